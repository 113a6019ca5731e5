"""Preference by label and preference by position, estimated jointly. Pure numpy/scipy.

A judge that likes the answer shown first and a judge that likes the label "A" look the same
when the answer shown first is always "A". LLM judge runs counterbalance the two
(``judges.plan``), and this module separates them on the decisive votes (ties left out; votes
whose display order is unknown too) with a logistic model whose every item has its own term:

    logit P(chose A2) = item + position · f + label_k · l

where f = +1 when A2 was shown first and −1 when A1 was, and l = +1 when A2 had scheme k's
first label and −1 when it had the second. ``item`` is how clearly the item's content favours
A2; it differs from item to item (a clear-cut question is voted the same way in every order)
and is not a bias. ``position`` is the log-odds towards the answer shown first and ``label_k``
towards scheme k's first label, for the same item: the two effects a simulated judge plants
(``analysis.simulate``).

The item terms are eliminated by conditioning on each item's number of A2 votes (conditional
logistic regression, Breslow & Day 1980): given that total, which of the item's votes went to
A2 depends on position and label alone. That estimate stays consistent with few votes per item
(a fitted term per item, as plain fixed-effects logit has, is not: with 2 votes per item it
doubles the effects), and it does not shrink when items differ in clarity, as a pooled logistic
fit does (measured: about 17% at a spread of clarity of sd 1 on the logit scale). The pooled fit
is kept beside it as the *marginal* (population-averaged) effects.

Every item is a stratum (with several label schemes, every item and scheme): an item of one
question, whatever its perturbation, has all four display order × label order cells in a
counterbalanced run (4 votes or more; 2 votes give a balanced half). A stratum whose decisive
votes all went one way carries no information about the biases and drops out of the
conditional likelihood. Half a vote each way is added per (scheme, order, label order) cell,
outside every stratum (a log-F(1, 1) prior on the effects, Greenland & Mansournia 2015), so a
judge that always picks the same label or position still gets a finite estimate.

Votes on one question are not independent, so intervals and p-values come from the
cluster-robust (sandwich) variance with questions as clusters (the questions of one prompt key
as one: ``cluster_id``), CR1 scaling G/(G−1) and a t
distribution with G−1 degrees of freedom; never narrower than the model-based variance, so an
interval does not collapse to a point when every question agrees.

A label effect is only identifiable for a scheme whose label order varies within items
independently of display order. Where it does not (people, who see answers left and right; runs
made before label order was counterbalanced; labels that follow the answer) the result says so
(``identifiable: false`` with the reason) and reports the position effect alone, which then
includes any preference for the first label.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import stats as sps
from scipy.special import expit, gammaln, stdtr

from analysis.frame import equals, sorted_codes

METHOD = (
    "conditional logistic regression of choosing A2 on decisive votes (ties excluded), one stratum per item "
    "and label scheme: position + label (per scheme), each item's own content term eliminated by "
    "conditioning on its A2 votes; Wald intervals and p-values from the cluster-robust variance with "
    "questions as clusters (CR1, t with G-1 df; at least the model-based variance); half a vote each way "
    "added per cell"
)
MARGINAL_METHOD = (
    "pooled logistic model (population-averaged): position + label (per scheme) + one A1-vs-A2 content term; "
    "shrinks towards no preference when items differ in clarity; same intervals and pseudo-votes"
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
TIED_WITHIN_ITEMS = (
    "within each item one answer keeps the same label (with fewer than 4 votes per item the plan gives each item "
    "one vote per display order, a balanced half), so a label preference cannot be told from a preference for "
    "that item's answer; only the marginal (pooled) estimate is available"
)
# The four cells of a stratum, indexed 2 · (A2 shown first) + (A2 had the first label), and
# their covariates in the model: f (position) and l (label).
CELL_F = np.array([-1.0, -1.0, 1.0, 1.0])
CELL_L = np.array([-1.0, 1.0, -1.0, 1.0])


def _newton(loss, gradient_and_information, p: int) -> np.ndarray:
    """The minimum of a strictly convex ``loss`` by Newton steps from zero, halving a step that
    would overshoot (near-separated data, far from the optimum)."""
    beta = np.zeros(p)
    for _ in range(100):
        gradient, information = gradient_and_information(beta)
        step = -np.linalg.solve(information, gradient)
        while np.max(np.abs(step)) > 1e-3 and loss(beta + step) > loss(beta):
            step /= 2
        beta += step
        if np.max(np.abs(step)) < 1e-10:
            return beta
    raise ArithmeticError("the label/position model did not converge in 100 Newton steps")


def _times(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row by row, the product of polynomials (coefficients along the last axis), truncated."""
    out = np.zeros_like(a)
    width = a.shape[-1]
    for j in range(width):
        out[..., j:] += a[..., j : j + 1] * b[..., : width - j]
    return out


def conditional_moments(eta: np.ndarray, n: np.ndarray, m: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For strata of cells (``n`` votes in cell c, linear predictor ``eta``, both strata × cells)
    with ``m`` votes for A2 per stratum: the log of the normalising sum of the conditional
    likelihood, and the mean and covariance of each cell's A2 votes given m.

    The A2 votes per cell given their total follow Fisher's noncentral hypergeometric
    distribution: P(k) ∝ Π_c C(n_c, k_c) exp(k_c · eta_c). Its normalising sum is the
    coefficient of z^m in Π_c (1 + z · exp(eta_c))^n_c; replacing a cell's factor by the
    polynomial with coefficients k · C(n_c, k) exp(k · eta_c) (or k² · ...) gives the moments."""
    k = np.arange(int(n.sum(axis=1).max()) + 1)  # up to the largest stratum's votes
    inside = k <= n[..., None]
    log_coef = np.where(
        inside,
        gammaln(n[..., None] + 1) - gammaln(k + 1) - gammaln(np.maximum(n[..., None] - k, 0) + 1) + k * eta[..., None],
        -np.inf,
    )
    shift = log_coef.max(axis=-1)  # each cell's polynomial scaled to a largest coefficient of 1
    plain = np.exp(log_coef - shift[..., None])
    once, twice = plain * k, plain * k * k
    rows = np.arange(len(m))
    cells = range(n.shape[1])

    def coefficient(polys: list[np.ndarray]) -> np.ndarray:
        product = polys[0]
        for poly in polys[1:]:
            product = _times(product, poly)
        return product[rows, m]

    def with_cells(replaced: dict[int, np.ndarray]) -> np.ndarray:
        return coefficient([replaced[c][:, c] if c in replaced else plain[:, c] for c in cells])

    total = coefficient([plain[:, c] for c in cells])
    mean = np.column_stack([with_cells({c: once}) / total for c in cells])
    second = np.empty(n.shape + n.shape[1:])
    for c in cells:
        second[:, c, c] = with_cells({c: twice}) / total
        for d in range(c + 1, n.shape[1]):
            second[:, c, d] = second[:, d, c] = with_cells({c: once, d: once}) / total
    cov = second - mean[:, :, None] * mean[:, None, :]
    return np.log(total) + shift.sum(axis=1), mean, cov


def _pseudo_terms(x: np.ndarray, beta: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Loss, gradient and information of half a vote each way at each row of ``x``."""
    eta = x @ beta
    p = expit(eta)
    loss = float(np.sum(np.logaddexp(0.0, eta) - 0.5 * eta))
    return loss, x.T @ (p - 0.5), (x * (p * (1 - p))[:, None]).T @ x


def _conditional_fit(
    x: np.ndarray, n: np.ndarray, y: np.ndarray, weight: np.ndarray, pseudo: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The conditional maximum-likelihood effects of strata × 4 cells (covariates ``x``:
    strata × cells × effects; ``n`` votes and ``y`` A2 votes per cell), each stratum counted
    ``weight`` times, with the pseudo-votes at the rows of ``pseudo``. Returns the effects, the
    information (the bread of the sandwich) and each stratum's score."""
    m = y.sum(axis=1).astype(np.intp)

    def loss(beta: np.ndarray) -> float:
        eta = x @ beta
        log_total, _, _ = conditional_moments(eta, n, m)
        return float(weight @ (log_total - (y * eta).sum(axis=1))) + _pseudo_terms(pseudo, beta)[0]

    def gradient_and_information(beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        _, mean, cov = conditional_moments(x @ beta, n, m)
        _, g, info = _pseudo_terms(pseudo, beta)
        g = g - np.einsum("s,sc,scp->p", weight, y - mean, x)
        info = info + np.einsum("s,scp,scd,sdq->pq", weight, x, cov, x)
        return g, info

    beta = _newton(loss, gradient_and_information, x.shape[2])
    _, information = gradient_and_information(beta)
    _, mean, _ = conditional_moments(x @ beta, n, m)
    return beta, information, np.einsum("sc,scp->sp", y - mean, x)


@lru_cache(maxsize=256)
def _t_quantile(level: float, df: int) -> float:
    """The two-sided ``level`` quantile of t with ``df`` degrees of freedom (scipy's call costs
    more than the rest of an effect; a study's judges share a few values of df)."""
    return float(sps.t.ppf(0.5 + level / 2, df))


def _clustered_se(information: np.ndarray, scores: np.ndarray, question: np.ndarray, n_questions: int) -> np.ndarray:
    """Standard errors from the cluster-robust (CR1) sandwich, scores summed per question;
    never below the model-based ones (a deterministic judge would collapse the sandwich)."""
    if n_questions < 2:
        return np.full(information.shape[0], np.nan)
    by_question = np.zeros((n_questions, scores.shape[1]))
    np.add.at(by_question, question, scores)
    inverse = np.linalg.inv(information)
    cov = inverse @ (by_question.T @ by_question) @ inverse * n_questions / (n_questions - 1)
    return np.sqrt(np.maximum(np.diag(cov), np.diag(inverse)))


def _effect(beta: float, se: float, df: int, level: float) -> dict:
    if np.isnan(se) or df < 1:
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


def _within_strata(x: np.ndarray, n: np.ndarray) -> np.ndarray:
    """The covariates of every cell with votes less their stratum's mean, weighted by the
    votes: what a conditional model can learn from (a column that is 0 here is not identified)."""
    total = n.sum(axis=1)
    mean = np.einsum("sc,scp->sp", n, x) / total[:, None]
    return ((x - mean[:, None, :]) * np.sqrt(n)[:, :, None]).reshape(-1, x.shape[2])


def _design(stratum_scheme: np.ndarray, with_position: bool, label_codes: list[int]) -> np.ndarray:
    """Strata × 4 cells × effects: position (f), then one label column (l) per scheme in ``label_codes``."""
    columns = [np.broadcast_to(CELL_F, (len(stratum_scheme), 4))] if with_position else []
    columns += [np.where((stratum_scheme == k)[:, None], CELL_L, 0.0) for k in label_codes]
    return np.stack(columns, axis=2) if columns else np.zeros((len(stratum_scheme), 4, 0))


def _identified(
    schemes: list[str], stratum_scheme: np.ndarray, n: np.ndarray, scheme_varies: list[bool]
) -> tuple[bool, list[int], dict[str, str]]:
    """Whether position is identified within strata, the schemes whose label effect is, and
    why each other scheme's is not."""
    with_position = bool(np.any(_within_strata(_design(stratum_scheme, True, []), n)))
    label_codes: list[int] = []
    reasons: dict[str, str] = {}
    for k, name in enumerate(schemes):
        if not name:
            reasons[name] = NO_LABELS
            continue
        if not scheme_varies[k]:
            reasons[name] = NOT_COUNTERBALANCED
            continue
        own = _within_strata(_design(stratum_scheme, False, [k]), n)
        candidate = _within_strata(_design(stratum_scheme, with_position, [*label_codes, k]), n)
        if not np.any(own):
            reasons[name] = TIED_TO_ANSWER  # the label stays with one answer within every item
        elif np.linalg.matrix_rank(candidate) < candidate.shape[1]:
            reasons[name] = NOT_COUNTERBALANCED  # within items, label order moves with display order
        else:
            label_codes.append(k)
    return with_position, label_codes, reasons


def _marginal(
    question: np.ndarray, scheme_code: np.ndarray, o: np.ndarray, s: np.ndarray, y: np.ndarray, *,
    n_schemes: int, label_codes: list[int], n_questions: int, level: float,
) -> dict:  # fmt: skip
    """The pooled (population-averaged) fit: logit P(first) = position + label_k · s + content · o,
    one content term for all items. Its effects shrink towards 0 when items differ in clarity."""
    # Aggregate to (question, scheme, order, label order): the model only sees these.
    key = ((question * n_schemes + scheme_code) * 2 + (o > 0)) * 2 + (s > 0)
    row_of, keys = pd.factorize(key)
    n = np.bincount(row_of, minlength=len(keys)).astype(float)
    y_sum = np.bincount(row_of, weights=y, minlength=len(keys))
    r_s = np.where(keys % 2 == 1, 1.0, -1.0)
    r_o = np.where((keys // 2) % 2 == 1, 1.0, -1.0)
    r_scheme = (keys // 4) % n_schemes
    # Content (o) only where both orders occur: with one order, "first" and "A1" are the same.
    both_orders = bool((r_o > 0).any() and (r_o < 0).any())

    def design(scheme: np.ndarray, o: np.ndarray, s: np.ndarray) -> np.ndarray:
        columns = [np.ones(len(o))] + ([o] if both_orders else [])
        return np.column_stack(columns + [np.where(scheme == k, s, 0.0) for k in label_codes])

    candidates, label_codes = label_codes, []
    for k in candidates:  # a label that follows A1 or A2 is not separable from the content term
        label_codes.append(k)
        candidate = design(r_scheme, r_o, r_s)
        if np.linalg.matrix_rank(candidate) < candidate.shape[1]:
            label_codes.pop()
    x = design(r_scheme, r_o, r_s)
    # Half a vote each way in every (scheme, order, label order) cell, outside any cluster.
    cells = np.flatnonzero(np.bincount(keys % (4 * n_schemes), minlength=4 * n_schemes))
    pseudo = design(cells // 4, np.where((cells // 2) % 2 == 1, 1.0, -1.0), np.where(cells % 2 == 1, 1.0, -1.0))

    def loss(beta: np.ndarray) -> float:
        eta = x @ beta
        return float(np.sum(n * np.logaddexp(0.0, eta) - y_sum * eta)) + _pseudo_terms(pseudo, beta)[0]

    def gradient_and_information(beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        p = expit(x @ beta)
        _, g, info = _pseudo_terms(pseudo, beta)
        return g + x.T @ (n * p - y_sum), info + (x * (n * p * (1 - p))[:, None]).T @ x

    beta = _newton(loss, gradient_and_information, x.shape[1])
    _, information = gradient_and_information(beta)
    scores = x * (y_sum - n * expit(x @ beta))[:, None]
    se = _clustered_se(information, scores, keys // (4 * n_schemes), n_questions)

    def effect(column: int) -> dict:
        return _effect(beta[column], se[column], n_questions - 1, level)

    return {
        "method": MARGINAL_METHOD,
        "position": effect(0) if both_orders else None,
        "content_a1": effect(1) if both_orders else None,
        "label": {k: effect(1 + both_orders + i) for i, k in enumerate(label_codes)},
    }


def label_and_position(
    votes: pd.DataFrame, scheme_labels: dict[str, tuple[str, str]] | None = None, *, level: float = 0.95
) -> dict | None:
    """Position and label effects of one judge's counted votes (``analysis.frame`` columns
    item_id, cluster_id, shown_first, labels_swapped, label_scheme, choice_shown, order_known),
    conditional on each item, with the marginal (pooled) effects beside them under ``marginal``.

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
    # The clusters of the sandwich: questions, the questions of one prompt key as one.
    question, questions = pd.factorize(votes["cluster_id"].to_numpy()[keep])
    n_questions = len(questions)
    item, _ = pd.factorize(votes["item_id"].to_numpy()[keep])
    scheme_code, scheme_values = sorted_codes(votes["label_scheme"], keep)
    schemes = [str(name) for name in scheme_values]

    # Strata (item, scheme) × the 4 cells, with votes and votes for A2 per cell.
    a2_first = o < 0
    cell = 2 * a2_first + (a2_first != (s < 0))
    stratum, stratum_key = pd.factorize(item * len(schemes) + scheme_code)
    n_strata = len(stratum_key)
    n = np.bincount(stratum * 4 + cell, minlength=4 * n_strata).reshape(-1, 4)
    y_a2 = np.bincount(stratum * 4 + cell, weights=(y > 0) == a2_first, minlength=4 * n_strata).reshape(-1, 4)
    stratum_scheme = stratum_key % len(schemes)
    stratum_question = np.zeros(n_strata, dtype=np.intp)
    stratum_question[stratum] = question

    scheme_varies = [len(np.unique(s[scheme_code == k])) > 1 for k in range(len(schemes))]
    with_position, label_codes, reasons = _identified(schemes, stratum_scheme, n, scheme_varies)
    estimate = se = np.zeros(0)
    if with_position or label_codes:
        # Strata alike in scheme and counts contribute alike: fit each kind once, weighted.
        kinds, kind_of, weight = np.unique(
            np.column_stack([stratum_scheme, n, y_a2]), axis=0, return_inverse=True, return_counts=True
        )
        # Half a vote each way in every (scheme, order, label order) cell that has votes.
        used = np.unique((stratum_scheme[:, None] * 4 + np.arange(4))[n > 0])
        pseudo = _design(used // 4, with_position, label_codes)[np.arange(len(used)), used % 4]
        estimate, information, scores = _conditional_fit(
            _design(kinds[:, 0], with_position, label_codes), kinds[:, 1:5], kinds[:, 5:9], weight.astype(float), pseudo
        )
        se = _clustered_se(information, scores[kind_of.ravel()], stratum_question, n_questions)

    def effect(column: int) -> dict:
        return _effect(estimate[column], se[column], n_questions - 1, level)

    label_columns = {k: with_position + i for i, k in enumerate(label_codes)}
    varies = [k for k, name in enumerate(schemes) if name and scheme_varies[k]]
    marginal = _marginal(
        question, scheme_code, o, s, y,
        n_schemes=len(schemes), label_codes=varies, n_questions=n_questions, level=level,
    )  # fmt: skip
    by_scheme, marginal_labels = {}, {}
    for k, name in enumerate(schemes):
        label_1, label_2 = scheme_labels.get(name) or (tuple(name.split("/")) if name.count("/") == 1 else ("", ""))
        entry: dict = {"first_label": label_1 or None, "second_label": label_2 or None}
        if k in label_columns:
            entry.update(identifiable=True, **effect(label_columns[k]))
        elif k in marginal["label"] and reasons[name] == TIED_TO_ANSWER:
            entry.update(identifiable=False, reason=TIED_WITHIN_ITEMS)
        else:
            entry.update(identifiable=False, reason=reasons[name])
        if k in marginal["label"]:
            marginal_labels[name] = marginal["label"][k]
        by_scheme[name] = entry
    informative = (n > 0).sum(axis=1) > 1
    informative &= (y_a2.sum(axis=1) > 0) & (y_a2.sum(axis=1) < n.sum(axis=1))
    return {
        "method": METHOD,
        "level": level,
        "n": int(len(y)),
        "n_ties": ties,
        "n_questions": n_questions,
        # Items (per scheme) whose decisive votes went both ways: only these inform the estimate.
        "n_informative_items": int(informative.sum()),
        "position": effect(0) if with_position else None,
        "identifiable": bool(label_codes),
        "reason": None if label_codes else "; ".join(sorted(set(reasons.values()))),
        "label": by_scheme,
        "marginal": {**marginal, "label": marginal_labels},
        "cells": _cells(o, s, y),
    }
