"""Preference by label and preference by position, estimated jointly. Pure numpy/scipy.

A judge that likes the answer shown first and a judge that likes the label "A" look the same
when the answer shown first is always "A". LLM judge runs counterbalance the two
(``judges.plan``), and this module separates them with one logistic model on the decisive votes
(ties left out; votes whose display order is unknown too):

    logit P(chose the answer shown first) = position + label_k · s + content · o

where s = +1 when the answer shown first had scheme k's first label and −1 when it had the
second, and o = +1 when A1 was shown first, −1 when A2 was (so ``content`` soaks up the judge's
preference for A1 over A2, which is not a bias). ``position`` is the log-odds towards the answer
shown first at even labels and content, ``label_k`` the log-odds towards scheme k's first label
at even positions and content: the two effects a simulated judge plants (``analysis.simulate``).

Votes on one question are not independent, so intervals and p-values come from the
cluster-robust (sandwich) variance with questions as clusters, CR1 scaling G/(G−1) and a t
distribution with G−1 degrees of freedom; never narrower than the model-based variance, so an
interval does not collapse to a point when every question agrees. Every (scheme, order, label order) cell gets half a
vote each way (Haldane's correction), which keeps the estimates finite when a judge always
picks the same label or position.

A label effect is only identifiable for a scheme whose label order varies independently of
display order and of which answer is which. Where it does not (people, who see answers left and
right; runs made before label order was counterbalanced) the result says so
(``identifiable: false`` with the reason) and reports the position effect alone, which then
includes any preference for the first label.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import expit, stdtr

from analysis.frame import equals, sorted_codes

METHOD = (
    "logistic model of choosing the answer shown first on decisive votes (ties excluded): position + label "
    "(per scheme) + A1-vs-A2 content; Wald intervals and p-values from the cluster-robust variance with "
    "questions as clusters (CR1, t with G-1 df; at least the model-based variance); half a vote each way "
    "added per cell"
)
NOT_COUNTERBALANCED = (
    "label order never varies independently of display order in these votes: the answer shown first always "
    "had the same label, so a preference for a label cannot be told from a preference for a position"
)
NO_LABELS = "these votes were not given under labels (people see the answers left and right)"
TIED_TO_ANSWER = (
    "label order follows which answer is which (A1 or A2), so a preference for a label cannot be told from a "
    "preference for an answer"
)


def _fit(x: np.ndarray, y: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Maximum-likelihood coefficients of a binomial logistic model with a few columns.

    The loss is convex and the pseudo-votes keep its optimum finite, so plain Newton steps
    reach it to machine precision; scipy's trust-region methods stop earlier, on a loss that
    no longer changes in floating point."""

    def loss(beta: np.ndarray) -> float:
        eta = x @ beta
        return float(np.sum(n * np.logaddexp(0.0, eta) - y * eta))

    beta = np.zeros(x.shape[1])
    for _ in range(100):
        p = expit(x @ beta)
        step = np.linalg.solve((x * (n * p * (1 - p))[:, None]).T @ x, x.T @ (y - n * p))
        # Halve a step that would overshoot (near-separated data, far from the optimum).
        while np.max(np.abs(step)) > 1e-3 and loss(beta + step) > loss(beta):
            step /= 2
        beta += step
        if np.max(np.abs(step)) < 1e-12:
            return beta
    raise ArithmeticError("the label/position model did not converge in 100 Newton steps")


@lru_cache(maxsize=256)
def _t_quantile(level: float, df: int) -> float:
    """The two-sided ``level`` quantile of t with ``df`` degrees of freedom (scipy's call costs
    more than the rest of an effect; a study's judges share a few values of df)."""
    return float(sps.t.ppf(0.5 + level / 2, df))


def _effect(beta: float, se: float | None, df: int, level: float) -> dict:
    if se is None or df < 1:
        ci, p = [None, None], None
    else:
        t = _t_quantile(level, df)
        ci = [float(beta - t * se), float(beta + t * se)]
        # t's survival function as scipy's t.sf computes it, without its argument checks.
        p = float(2 * stdtr(df, -(abs(beta) / se))) if se > 0 else None
    return {
        "log_odds": float(beta),
        "ci": ci,
        # The same effect as a share: how often the judge takes that side, other things even.
        "share": float(expit(beta)),
        "share_ci": [None if c is None else float(expit(c)) for c in ci],
        "p": p,
    }


def _cells(o: np.ndarray, s: np.ndarray, y: np.ndarray) -> list[dict]:
    """The four-cell table: display order x label order, share of votes for the answer shown first."""
    cells = []
    for shown_first, a1_first in (("a1", True), ("a2", False)):
        for swapped in (False, True):
            mask = ((o > 0) == a1_first) & ((s < 0) == swapped)
            n = int(mask.sum())
            cells.append(
                {
                    "shown_first": shown_first,
                    "labels_swapped": swapped,
                    "n": n,
                    "first": float(y[mask].mean()) if n else None,
                }
            )
    return cells


def label_and_position(
    votes: pd.DataFrame, scheme_labels: dict[str, tuple[str, str]] | None = None, *, level: float = 0.95
) -> dict | None:
    """Position and label effects of one judge's counted votes (``analysis.frame`` columns
    question_id, shown_first, labels_swapped, label_scheme, choice_shown, order_known).

    ``scheme_labels`` names each scheme's first and second label (e.g. "ab" → ("A", "B")); a
    scheme not in it but named "<first>/<second>" is read from its name. None when there is no
    decisive vote of known order."""
    scheme_labels = scheme_labels or {}
    # Plain arrays of the few columns read: a judge's votes are few, and pandas' per-call cost
    # on each comparison and selection was most of the time in a study of many judges.
    choice_shown = votes["choice_shown"]
    first = equals(choice_shown, "first")
    ties = int(equals(choice_shown, "tie").sum())
    keep = (first | equals(choice_shown, "second")) & votes["order_known"].to_numpy(dtype=bool)
    if not keep.any():
        return None
    y = first[keep].astype(float)
    o = np.where(equals(votes["shown_first"], "a1")[keep], 1.0, -1.0)
    s = np.where(votes["labels_swapped"].to_numpy(dtype=bool)[keep], -1.0, 1.0)
    question, questions = pd.factorize(votes["question_id"].to_numpy()[keep])
    n_questions = len(questions)
    scheme_code, scheme_values = sorted_codes(votes["label_scheme"], keep)
    schemes = [str(name) for name in scheme_values]

    # Aggregate to (question, scheme, order, label order): the model only sees these.
    key = ((question * len(schemes) + scheme_code) * 2 + (o > 0)) * 2 + (s > 0)
    row_of, keys = pd.factorize(key)
    n = np.bincount(row_of, minlength=len(keys))
    y_sum = np.bincount(row_of, weights=y, minlength=len(keys))
    r_s = np.where(keys % 2 == 1, 1.0, -1.0)
    r_o = np.where((keys // 2) % 2 == 1, 1.0, -1.0)
    r_scheme = (keys // 4) % len(schemes)
    r_question = keys // (4 * len(schemes))

    # Content (o) only where both orders occur: with one order, "first" and "A1" are the same.
    both_orders = bool((r_o > 0).any() and (r_o < 0).any())
    label_codes: dict[str, int] = {}
    reasons: dict[str, str] = {}

    def design(scheme: np.ndarray, o: np.ndarray, s: np.ndarray) -> np.ndarray:
        columns = [np.ones(len(o))] + ([o] if both_orders else [])
        return np.column_stack(columns + [np.where(scheme == k, s, 0.0) for k in label_codes.values()])

    for k, name in enumerate(schemes):
        if not name:
            reasons[name] = NO_LABELS
        elif len(np.unique(r_s[r_scheme == k])) < 2:
            reasons[name] = NOT_COUNTERBALANCED
        else:
            label_codes[name] = k
            candidate = design(r_scheme, r_o, r_s)
            if np.linalg.matrix_rank(candidate) < candidate.shape[1]:
                del label_codes[name]
                reasons[name] = TIED_TO_ANSWER
    x = design(r_scheme, r_o, r_s)
    label_columns = {name: 1 + both_orders + i for i, name in enumerate(label_codes)}

    # Half a vote each way in every (scheme, order, label order) cell, outside any cluster.
    cells = np.flatnonzero(np.bincount(keys % (4 * len(schemes)), minlength=4 * len(schemes)))
    pseudo = design(cells // 4, np.where((cells // 2) % 2 == 1, 1.0, -1.0), np.where(cells % 2 == 1, 1.0, -1.0))
    x_all = np.vstack([x, pseudo])
    beta = _fit(x_all, np.concatenate([y_sum, np.full(len(pseudo), 0.5)]), np.concatenate([n, np.ones(len(pseudo))]))

    p_all = expit(x_all @ beta)
    n_all = np.concatenate([n, np.ones(len(pseudo))])
    bread = (x_all * (n_all * p_all * (1 - p_all))[:, None]).T @ x_all
    scores = x * (y_sum - n * p_all[: len(keys)])[:, None]
    by_question = np.zeros((n_questions, x.shape[1]))
    np.add.at(by_question, r_question, scores)
    df = n_questions - 1
    if df >= 1:
        inverse = np.linalg.inv(bread)
        cov = inverse @ (by_question.T @ by_question) @ inverse * n_questions / df
        # Never narrower than the model-based variance: when every question says exactly the
        # same (a deterministic judge) the sandwich alone would collapse to a point.
        se = np.sqrt(np.maximum(np.diag(cov), np.diag(inverse)))
    else:
        se = np.full(x.shape[1], np.nan)

    def effect(column: int) -> dict:
        return _effect(beta[column], None if np.isnan(se[column]) else float(se[column]), df, level)

    by_scheme = {}
    for name in schemes:
        label_1, label_2 = scheme_labels.get(name) or (tuple(name.split("/")) if name.count("/") == 1 else ("", ""))
        entry: dict = {"first_label": label_1 or None, "second_label": label_2 or None}
        if name in label_columns:
            entry.update(identifiable=True, **effect(label_columns[name]))
        else:
            entry.update(identifiable=False, reason=reasons[name])
        by_scheme[name] = entry
    return {
        "method": METHOD,
        "level": level,
        "n": int(len(y)),
        "n_ties": ties,
        "n_questions": n_questions,
        "position": effect(0) if both_orders else None,
        "content_a1": effect(1) if both_orders else None,
        "identifiable": bool(label_columns),
        "reason": None if label_columns else "; ".join(sorted(set(reasons.values()))),
        "label": by_scheme,
        "cells": _cells(o, s, y),
    }
