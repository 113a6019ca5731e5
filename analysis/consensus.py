"""The human consensus of an item: by majority, and by Dawid-Skene (which raters can I trust?).

Labels are the item preference codes (``metrics.preference``): +1 A1, -1 A2, 0 tie; the three
classes are in that order in every array here (``CLASSES``).

The majority is the item preference rule over the raters' labels (A1 labels minus A2 labels;
a tie when they balance). Dawid and Skene (1979, "Maximum likelihood estimation of observer
error-rates using the EM algorithm") give each rater a 3 x 3 confusion matrix (row: the true
class, column: the label they give) and the items a class prior, and estimate both with the
item classes by EM:

- start from the majority: each item's class probabilities are the shares of its labels (a
  deterministic start; no random restarts);
- M step: the prior is the mean of the items' class probabilities; a rater's confusion row k is
  the class-k-weighted count of their labels, plus ``smoothing`` in every cell (a Dirichlet
  prior), so that a rater with few labels gets a matrix near uniform (they count for little)
  rather than a degenerate one of zeros and ones (which would let one lucky vote overrule
  everyone else);
- E step: an item's class probabilities are proportional to the prior times the product, over
  its raters, of the probability each rater gives the label they gave;
- until no item's probability moves by more than ``tol`` (or ``max_iter``).

A rater's reliability is the probability that their label is the true class, over the classes
of the items they labelled: sum_k w_k pi[k, k], with w their items' mean class probabilities.
Without smoothing it is exactly the mean, over their items, of the posterior probability of the
label they gave.

Pure numpy; ``analysis.study_metrics`` and ``analysis.rater_monitor`` feed it from the votes frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import metrics

CLASSES = np.array([1, -1, 0], dtype=np.int8)  # A1, A2, tie: the columns of every array here
SMOOTHING = 1.0
TOL = 1e-6
MAX_ITER = 200


@dataclass
class Consensus:
    """The consensus of every item and the estimated reliability of every rater.

    ``item_ids``: the items, in order of first appearance; ``majority`` and ``labels`` (the
    Dawid-Skene class with the highest probability, an exact draw going to A1, then A2) their
    consensus labels as +1/-1/0; ``posterior``: items x 3 class probabilities. ``rater_ids``:
    the raters; ``confusion``: raters x 3 x 3; ``reliability`` and ``n_labels`` per rater."""

    item_ids: np.ndarray
    majority: np.ndarray
    labels: np.ndarray
    posterior: np.ndarray
    rater_ids: np.ndarray
    confusion: np.ndarray
    reliability: np.ndarray
    n_labels: np.ndarray
    prior: np.ndarray
    n_iter: int
    converged: bool


def label_counts(item_code: np.ndarray, label_code: np.ndarray, n_items: int) -> np.ndarray:
    return np.bincount(item_code * 3 + label_code, minlength=3 * n_items).reshape(n_items, 3).astype(np.float64)


def dawid_skene(
    items: np.ndarray,
    raters: np.ndarray,
    labels: np.ndarray,
    *,
    smoothing: float = SMOOTHING,
    tol: float = TOL,
    max_iter: int = MAX_ITER,
) -> Consensus:
    """The majority and the Dawid-Skene consensus of (item, rater, label) triples, one per rater
    and item (``study_metrics.human_labels`` makes them from votes); labels +1/-1/0."""
    labels = np.asarray(labels, dtype=object)
    if not (len(items) == len(raters) == len(labels)):
        raise ValueError(f"items, raters and labels differ in length: {len(items)}, {len(raters)}, {len(labels)}")
    unknown = ~np.isin(labels, CLASSES)
    if unknown.any():
        at = int(np.flatnonzero(unknown)[0])
        raise ValueError(f"labels must be +1 (A1), -1 (A2) or 0 (tie); found {labels[at]!r} at position {at}")
    if smoothing <= 0:
        raise ValueError(f"smoothing must be positive, not {smoothing!r}")
    item_code, item_ids = pd.factorize(np.asarray(items))
    rater_code, rater_ids = pd.factorize(np.asarray(raters))
    label_code = np.select([labels == 1, labels == -1], [0, 1], 2).astype(np.int64)
    n_items, n_raters = len(item_ids), len(rater_ids)
    counts = label_counts(item_code, label_code, n_items)
    posterior = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1.0)
    n_iter, converged = 0, False
    while n_iter < max_iter:
        n_iter += 1
        prior, confusion = _m_step(posterior, item_code, rater_code, label_code, n_raters, smoothing)
        new = _e_step(prior, confusion, item_code, rater_code, label_code, n_items)
        moved = float(np.abs(new - posterior).max()) if n_items else 0.0
        posterior = new
        if moved <= tol:
            converged = True
            break
    prior, confusion = _m_step(posterior, item_code, rater_code, label_code, n_raters, smoothing)
    # The rater's class mix: the mean class probabilities of the items they labelled.
    mix = np.column_stack(
        [np.bincount(rater_code, weights=posterior[item_code, k], minlength=n_raters) for k in range(3)]
    ).reshape(n_raters, 3)
    n_labels = np.bincount(rater_code, minlength=n_raters)
    mix /= np.maximum(n_labels, 1)[:, None]
    reliability = (mix * np.diagonal(confusion, axis1=1, axis2=2)).sum(axis=1)
    return Consensus(
        item_ids=np.asarray(item_ids),
        majority=metrics.preference(counts[:, 0], counts[:, 1]),
        labels=CLASSES[posterior.argmax(axis=1)] if n_items else np.zeros(0, dtype=np.int8),
        posterior=posterior,
        rater_ids=np.asarray(rater_ids),
        confusion=confusion,
        reliability=reliability,
        n_labels=n_labels,
        prior=prior,
        n_iter=n_iter,
        converged=converged,
    )


def _m_step(posterior, item_code, rater_code, label_code, n_raters, smoothing):
    prior = (posterior.sum(axis=0) + smoothing) / (posterior.sum() + 3 * smoothing)
    confusion = np.full((n_raters, 3, 3), smoothing)
    # confusion[r, k, l] += P(item's class is k) for every label l that rater r gave (bincount:
    # np.add.at took four times as long).
    cell = rater_code * 3 + label_code
    for k in range(3):
        confusion[:, k, :] += np.bincount(cell, weights=posterior[item_code, k], minlength=3 * n_raters).reshape(-1, 3)
    confusion /= confusion.sum(axis=2, keepdims=True)
    return prior, confusion


def _e_step(prior, confusion, item_code, rater_code, label_code, n_items):
    log_label = np.log(confusion[rater_code, :, label_code])
    log_post = np.log(prior) + np.column_stack(
        [np.bincount(item_code, weights=log_label[:, k], minlength=n_items) for k in range(3)]
    )
    log_post -= log_post.max(axis=1, keepdims=True)
    post = np.exp(log_post)
    return post / post.sum(axis=1, keepdims=True)
