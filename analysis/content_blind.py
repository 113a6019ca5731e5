"""What a judge that ignores the answers would score: the content-blind baseline of ASR and
accuracy (docs/STATISTICS.md, "Would a judge that ignores the answers do as well?").

The content-blind twin of a judge votes for the answer shown first, a tie or the answer shown
second with the judge's own measured position shares, whatever the answers say, on exactly the
judge's vote design: the same items, the same number of counted votes per item in each display
order. Each of its votes then has a known outcome distribution, each item's preference
(A1 / A2 / Tie, ``metrics.preference``) follows exactly by convolving its votes' scores, and its
items are independent of each other. ASR is a ratio of two random counts (hits over the base
set), so:

- the baseline's value is its exact expectation given a non-empty base set,
  E[H / B | B > 0] = Σ_q P(hit_q) · P(base_q) · E[1 / (1 + B₋q)] / P(B > 0), with B₋q the base set
  without question q (a sum of independent Bernoullis whose distribution is convolved exactly);
- its range is the 2.5th to 97.5th percentile of the twin's ASR over ``DRAWS`` simulated
  studies of the same design (seeded), and ``p_value`` the two-sided Monte Carlo test of "the
  judge is its content-blind twin": how unusual the judge's own ASR would be for the twin.

Questions whose items share a design share their probabilities, so both computations run per
kind of question, never per question: their cost does not grow with the study's size.
"""

from __future__ import annotations

import zlib

import numpy as np
import pandas as pd
from scipy import signal, stats

from analysis import metrics
from analysis.simulate import score_distribution

DRAWS = 2000  # simulated studies per figure: the p-value's Monte Carlo sd is at most 0.011
ALPHA = 0.05  # a judge is ranked in a column where p < ALPHA: it differs from its twin
CONVENTION = f"exact expectation; range: 95% of {DRAWS} simulated studies of the design"
NO_BETTER = "no better than ignoring content"


def position_shares(votes: pd.DataFrame) -> tuple[float, float, float] | None:
    """(first, tie, second) of the judge's counted votes of known display order; where no
    order is known, the tie share of all its votes and the rest split evenly. None without votes."""
    shown = votes["choice_shown"].astype(object).to_numpy()
    known = votes["order_known"].to_numpy(dtype=bool)
    if known.any():
        n = known.sum()
        return tuple(float((shown[known] == s).sum() / n) for s in ("first", "tie", "second"))
    if not len(votes):
        return None
    tie = float((votes["choice"].astype(object).to_numpy() == "tie").mean())
    return ((1 - tie) / 2, tie, (1 - tie) / 2)


def item_designs(votes: pd.DataFrame) -> pd.DataFrame:
    """Per item with counted votes (index item_id): its votes shown A1 first (``a1_first``), A2
    first (``a2_first``) and of unknown order (``unknown``)."""
    known = votes["order_known"].to_numpy(dtype=bool)
    a2_first = known & (votes["shown_first"].astype(object).to_numpy() == "a2")
    frame = pd.DataFrame(
        {
            "item_id": votes["item_id"].to_numpy(),
            "a1_first": (known & ~a2_first).astype(int),
            "a2_first": a2_first.astype(int),
            "unknown": (~known).astype(int),
        }
    )
    return frame.groupby("item_id").sum()


def item_preference_probabilities(
    a1_first: int, a2_first: int, unknown: int, shares: tuple[float, float, float]
) -> tuple[float, float, float]:
    """(P(A1), P(A2), P(Tie)) of an item's preference for the content-blind judge with position
    ``shares`` (first, tie, second): shown A1 first a vote is A1 with the first share, shown A2
    first A2; of unknown order, A1 and A2 alike."""
    first, tie, second = shares
    side = (first + second) / 2
    total = np.ones(1)
    for n, p_a1, p_a2 in ((a1_first, first, second), (a2_first, second, first), (unknown, side, side)):
        total = np.convolve(total, score_distribution(int(n), p_a1, p_a2, tie))
    mid = len(total) // 2
    return float(total[mid + 1 :].sum()), float(total[:mid].sum()), float(total[mid])


def pair_probabilities(prefs: pd.DataFrame, designs: pd.DataFrame, shares: tuple[float, float, float]) -> pd.DataFrame:
    """Per (question, perturbation group) of the judge (``metrics.oriented_pairs``): the
    probability that the content-blind judge puts it in ASR's base set (``p_base``) and that it
    is then a hit (``p_hit``, the perturbed item's preference is independent of the control's),
    and for accuracy that the perturbed item is preferred A1 (``p_acc``)."""
    pairs = metrics.oriented_pairs(prefs)
    # Each design (votes in each order) once: a study's items share a handful of them.
    kinds, kind_of = np.unique(designs.to_numpy(dtype=np.int64), axis=0, return_inverse=True)
    by_kind = np.array([item_preference_probabilities(*kind, shares) for kind in kinds]).reshape(-1, 3)
    position = pd.Series(np.asarray(kind_of).reshape(-1), index=designs.index)

    def probabilities(item_ids: np.ndarray) -> np.ndarray:
        kind = position.reindex(item_ids).to_numpy(dtype=float)
        out = np.full((len(item_ids), 3), np.nan)
        known = ~np.isnan(kind)
        out[known] = by_kind[kind[known].astype(np.int64)]
        return out

    exp = probabilities(pairs["item_id"].to_numpy())
    ctrl = probabilities(pairs["ctrl_item"].to_numpy())
    orient = pairs["orientation"].to_numpy(dtype=float)
    # Read relative to the perturbation, as the judge's own control preference is.
    c_a1 = np.where(orient == -1, ctrl[:, 1], ctrl[:, 0])
    c_a2 = np.where(orient == -1, ctrl[:, 0], ctrl[:, 1])
    c_tie = ctrl[:, 2]
    degrading = (pairs["semantics"] == "degrading").to_numpy()
    has_ctrl = ~np.isnan(orient) & ~np.isnan(c_tie)
    p_base = np.where(has_ctrl, np.where(degrading, c_a2 + c_tie, c_a1 + c_tie), 0.0)
    p_hit = np.where(degrading, exp[:, 1] + exp[:, 2], exp[:, 1])
    return pd.DataFrame(
        {
            "group": pairs["group"].to_numpy(),
            "semantics": pairs["semantics"].to_numpy(),
            "has_ctrl": has_ctrl,
            "p_base": np.nan_to_num(p_base),
            "p_hit": p_hit,
            "p_acc": exp[:, 0],
        }
    )


def _kinds(p_base: np.ndarray, p_hit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Questions of the same probabilities counted together: (count, p_base, p_hit) per kind,
    leaving out those that never enter the base set."""
    keep = p_base > 0
    kinds, count = np.unique(np.column_stack([p_base[keep], p_hit[keep]]), axis=0, return_counts=True)
    return count, kinds[:, 0], kinds[:, 1]


def expected_ratio(p_base: np.ndarray, p_hit: np.ndarray) -> float | None:
    """E[H / B | B > 0] for independent questions, each in the base set with ``p_base`` and
    then a hit with ``p_hit``: exact (see the module's doc); None when B is 0 for sure."""
    count, pb, ph = _kinds(np.asarray(p_base, float), np.asarray(p_hit, float))
    if not len(count):
        return None
    pmfs = [stats.binom.pmf(np.arange(n + 1), n, p) for n, p in zip(count, pb, strict=True)]
    # The kinds before and after each one, convolved once: each kind's "all other kinds" is
    # then one more convolution, not one per other kind (a pool of people has many designs).
    before, after = [np.ones(1)], [np.ones(1)]
    for pmf in pmfs:
        before.append(signal.convolve(before[-1], pmf))
    for pmf in reversed(pmfs):
        after.append(signal.convolve(pmf, after[-1]))
    after.reverse()
    total = 0.0
    for k, (n, p, h) in enumerate(zip(count, pb, ph, strict=True)):
        others = signal.convolve(before[k], after[k + 1])
        rest = signal.convolve(stats.binom.pmf(np.arange(n), n - 1, p), others)  # and its own kind's others
        inverse = float((np.clip(rest, 0, None) / np.arange(1, len(rest) + 1)).sum())  # E[1 / (1 + B₋q)]
        total += h * n * p * inverse
    p_empty = float(np.prod((1 - pb) ** count))
    return total / (1 - p_empty)


def simulated_ratios(p_base: np.ndarray, p_hit: np.ndarray, rng: np.random.Generator, draws: int = DRAWS) -> np.ndarray:
    """The content-blind judge's H / B in ``draws`` simulated studies of the design (those whose
    base set is empty left out)."""
    count, pb, ph = _kinds(np.asarray(p_base, float), np.asarray(p_hit, float))
    if not len(count):
        return np.zeros(0)
    base = rng.binomial(count[None, :], pb[None, :], size=(draws, len(count)))
    hits = rng.binomial(base, ph[None, :])
    b, h = base.sum(axis=1), hits.sum(axis=1)
    defined = b > 0
    return h[defined] / b[defined]


def baseline(p_base: np.ndarray, p_hit: np.ndarray, observed: float | None, *, seed: int | list[int]) -> dict:
    """The baseline of one figure as a rate: ``value`` (the exact expectation), ``ci`` (the
    range of 95% of simulated studies), ``p_value`` (two-sided, of the judge's ``observed``
    figure against the simulated studies) and ``n`` (questions that can enter the base set)."""
    value = expected_ratio(p_base, p_hit)
    n = int((np.asarray(p_base) > 0).sum())
    if value is None:
        return {"value": None, "ci": [None, None], "n": 0, "p_value": None}
    draws = simulated_ratios(p_base, p_hit, np.random.default_rng(seed))
    lo, hi = (float(x) for x in np.percentile(draws, [2.5, 97.5]))
    p_value = None
    if observed is not None:
        below, above = int((draws <= observed).sum()), int((draws >= observed).sum())
        p_value = min(1.0, 2 * (1 + min(below, above)) / (1 + len(draws)))
    return {"value": value, "ci": [lo, hi], "n": n, "p_value": p_value}


def judge_baselines(
    votes: pd.DataFrame,
    prefs: pd.DataFrame,
    groups: list[str],
    semantics: dict[str, str],
    observed: dict[tuple[str, str], float | None],
    *,
    judge: str,
    seed: int,
) -> tuple[tuple[float, float, float] | None, dict[tuple[str, str], dict]]:
    """One judge's baselines: (its position shares, {(metric, group): ``baseline``}) for "asr"
    of every group and "accuracy" of the degrading ones; ``observed`` holds the judge's own
    figures by the same keys."""
    shares = position_shares(votes)
    if shares is None or prefs is None or not len(prefs):
        return shares, {}
    pairs = pair_probabilities(prefs, item_designs(votes), shares)
    out = {}
    for g in groups:
        mine = pairs[pairs["group"].to_numpy() == g]
        figures = [("asr", mine["p_base"].to_numpy(), mine["p_hit"].to_numpy())]
        if semantics.get(g) == "degrading":
            figures.append(("accuracy", np.ones(len(mine)), mine["p_acc"].to_numpy()))
        for metric, p_base, p_hit in figures:
            out[(metric, g)] = baseline(p_base, p_hit, observed.get((metric, g)), seed=seed_of(seed, judge, metric, g))
    return shares, out


def seed_of(seed: int, *names: str) -> list[int]:
    """A figure's own seed, the same in every process, whatever else the report holds."""
    return [seed, zlib.crc32("\0".join(names).encode())]


def differs(found: dict | None) -> bool:
    """Whether a figure differs from its content-blind baseline (its row, or None when there
    is none: then nothing says it does not, and it is ranked as before)."""
    return found is None or found.get("p_value") is None or found["p_value"] < ALPHA
