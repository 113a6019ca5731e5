"""Does the judge know when it is unsure? The calibration of a judge's confidence.

Each vote is a prediction: the option the judge chose, with a confidence, and whether that
option is the reference label of the item (its gold label where the study has one, else the
human consensus). A judge is calibrated when, of its votes made with confidence p, a share p is
right.

- The expected calibration error (ECE, Naeini et al. 2015, Guo et al. 2017): the confidences in
  10 equal-width bins over [0, 1] (the last one closed), ECE = sum over bins of
  (votes in bin / votes) * |share right in bin - mean confidence in bin|. 0 is calibrated.
- The Brier score of the chosen option: the mean of (confidence - right)^2, right being 1 or 0.
  It mixes calibration with how well the judge separates right from wrong (lower is better).
- The reliability curve: per non-empty bin, its votes, mean confidence and share right.
- Intervals (``calibration_intervals``): percentile cluster bootstrap of both over the report's
  resamples of questions (a question's votes, or a prompt's, stay together), from per-cluster
  sums of each bin's votes, confidences and rights and of the squared errors.

The confidence is the probability the judge put on the option it chose, where its backend
returned option probabilities (``prob_first``/``prob_second``/``prob_tie`` of the votes frame,
as displayed, mapped back through the vote's display order). Without them, a judge that voted
on an item more than once has the share of its votes on the item that chose the same option
(a vote-share confidence: the repeated votes of a judge sampled above temperature 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

BINS = 10
FROM_PROBABILITIES = "option probabilities"
FROM_VOTE_SHARES = "repeated votes"
NOT_APPLICABLE = "no option probabilities and no repeated votes"


@dataclass
class Calibration:
    """``ece`` and ``brier`` (None without votes), ``n`` votes, ``curve``: one dict per
    non-empty bin {low, high, n, confidence, accuracy}."""

    ece: float | None
    brier: float | None
    n: int
    curve: list[dict] = field(default_factory=list)


def calibration(confidence: np.ndarray, correct: np.ndarray, bins: int = BINS) -> Calibration:
    """ECE over ``bins`` equal-width bins, Brier score and the reliability curve of
    predictions made with ``confidence`` (in [0, 1]) that were ``correct`` (bool or 0/1)."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    if len(confidence) != len(correct):
        raise ValueError(f"confidence and correct differ in length: {len(confidence)} and {len(correct)}")
    outside = ~((confidence >= 0) & (confidence <= 1))
    if outside.any():
        at = int(np.flatnonzero(outside)[0])
        raise ValueError(f"a confidence must be in [0, 1]; found {float(confidence[at])!r} at position {at}")
    if not len(confidence):
        return Calibration(None, None, 0)
    # Bin b holds [b/bins, (b+1)/bins); a confidence of exactly 1 goes in the last bin.
    where = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    n_bin = np.bincount(where, minlength=bins)
    conf_sum = np.bincount(where, weights=confidence, minlength=bins)
    right_sum = np.bincount(where, weights=correct, minlength=bins)
    ece = float(np.abs(right_sum - conf_sum).sum() / len(confidence))
    curve = [
        {
            "low": b / bins,
            "high": (b + 1) / bins,
            "n": int(n_bin[b]),
            "confidence": float(conf_sum[b] / n_bin[b]),
            "accuracy": float(right_sum[b] / n_bin[b]),
        }
        for b in range(bins)
        if n_bin[b]
    ]
    return Calibration(ece, float(np.mean((confidence - correct) ** 2)), len(confidence), curve)


def calibration_intervals(
    confidence: np.ndarray,
    correct: np.ndarray,
    cluster: np.ndarray,
    counts: np.ndarray,
    bins: int = BINS,
    level: float = 0.95,
) -> tuple[tuple[float | None, float | None], tuple[float | None, float | None]]:
    """Percentile intervals of (ECE, Brier) over cluster resamples: ``cluster`` is each
    prediction's column of ``counts`` (resamples x clusters: how often each cluster is drawn,
    ``stats.bootstrap_counts``). (None, None) for both without predictions or resamples."""
    confidence = np.asarray(confidence, dtype=np.float64)
    correct = np.asarray(correct, dtype=np.float64)
    cluster = np.asarray(cluster, dtype=np.int64)
    none = ((None, None), (None, None))
    if not len(confidence) or not counts.size:
        return none
    if len(cluster) != len(confidence) or (cluster < 0).any() or (cluster >= counts.shape[1]).any():
        raise ValueError("each prediction needs its cluster's column of the resample counts")
    k = counts.shape[1]
    where = np.minimum((confidence * bins).astype(np.int64), bins - 1)
    cell = cluster * bins + where

    def per_cluster(weights: np.ndarray | None) -> np.ndarray:
        return np.bincount(cell, weights=weights, minlength=k * bins).reshape(k, bins)

    parts = np.hstack(
        [
            per_cluster(None),
            per_cluster(confidence),
            per_cluster(correct),
            np.bincount(cluster, weights=(confidence - correct) ** 2, minlength=k)[:, None],
        ]
    )
    sums = counts.astype(np.float64) @ parts
    n_bin, conf_sum, right_sum, squares = (
        sums[:, :bins],
        sums[:, bins : 2 * bins],
        sums[:, 2 * bins : 3 * bins],
        sums[:, -1],
    )
    n = n_bin.sum(axis=1)
    drawn = n > 0
    if not drawn.any():
        return none
    ece = np.abs(right_sum - conf_sum).sum(axis=1)[drawn] / n[drawn]
    brier = squares[drawn] / n[drawn]
    q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
    lo_e, hi_e = np.percentile(ece, q)
    lo_b, hi_b = np.percentile(brier, q)
    return (float(lo_e), float(hi_e)), (float(lo_b), float(hi_b))


def vote_confidence(votes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, str]:
    """Each usable vote's (row positions in ``votes``, confidence) and where the confidence
    comes from (``FROM_PROBABILITIES``, ``FROM_VOTE_SHARES`` or ``NOT_APPLICABLE`` with no
    votes). Probabilities are used when any vote has them (the votes without are left out);
    else votes on items the judge voted on more than once."""
    first = votes["prob_first"].to_numpy(dtype=float)
    has = ~np.isnan(first)
    if has.any():
        choice = votes["choice"].to_numpy(dtype=object)
        shown_first = votes["shown_first"].to_numpy(dtype=object)
        on_first = choice == shown_first
        tie = choice == "tie"
        prob = np.where(
            tie,
            votes["prob_tie"].to_numpy(dtype=float),
            np.where(on_first, first, votes["prob_second"].to_numpy(dtype=float)),
        )
        at = np.flatnonzero(has)
        return at, np.clip(prob[at], 0.0, 1.0), FROM_PROBABILITIES
    item_code = pd.factorize(votes["item_id"])[0]
    choice_code = votes["choice"].cat.codes.to_numpy().astype(np.int64)
    n_item = np.bincount(item_code)
    same = np.bincount(item_code * 3 + choice_code, minlength=3 * len(n_item)).reshape(-1, 3)
    repeated = n_item[item_code] >= 2
    if not repeated.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0), NOT_APPLICABLE
    at = np.flatnonzero(repeated)
    return at, same[item_code, choice_code][at] / n_item[item_code][at], FROM_VOTE_SHARES
