"""Agreement as Zheng et al. (2023, MT-bench, Table 2) count it: over pairs of *votes* on the same
item, not item preferences. Pure over the votes frame (item_id, cluster_id, choice).

- judge vs humans: every (judge vote, human vote) pair on an item both voted on;
- humans vs humans: every pair of two different human votes on an item.

``with_ties`` (their setup S1) counts every pair, a tie agreeing only with a tie; ``without_ties``
(S2) leaves out the pairs where either vote is a tie. This is FastChat's ``compute_agreement.py``
(any "tie*" verdict is a tie). Each figure is agree / pairs with a percentile cluster bootstrap
over the clusters of questions (the report's resamples); null with n = 0 when there is no pair.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import stats
from analysis.frame import is_in

CONVENTIONS = {
    "with_ties": "Zheng et al. S1: all vote pairs, tie = tie",
    "without_ties": "Zheng et al. S2: vote pairs without a tie",
}


def _choice_codes(choice: pd.Series) -> np.ndarray:
    """0 a1, 1 a2, 2 tie, −1 none. No conversion to text: the frame's choice is a categorical of
    these already (recoded by its codes), a plain column is coded by its values."""
    return pd.Categorical(choice, categories=["a1", "a2", "tie"]).codes


def _table(row: np.ndarray, choice: np.ndarray, n_items: int) -> np.ndarray:
    keep = choice >= 0  # bincount: np.add.at is many times slower on a million votes
    cells = row[keep] * 3 + choice[keep]
    return np.bincount(cells, minlength=3 * n_items).reshape(n_items, 3).astype(float)


def judge_vs_humans(judge: np.ndarray, human: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per item (agreeing pairs, pairs) under each convention, from items × 3 count tables."""
    return {
        "with_ties": ((judge * human).sum(axis=1), judge.sum(axis=1) * human.sum(axis=1)),
        "without_ties": (
            (judge[:, :2] * human[:, :2]).sum(axis=1),
            judge[:, :2].sum(axis=1) * human[:, :2].sum(axis=1),
        ),
    }


def among(human: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per item (agreeing pairs, pairs) of two different votes of one table."""

    def pairs(n: np.ndarray) -> np.ndarray:
        return n * (n - 1) / 2

    return {
        "with_ties": (pairs(human).sum(axis=1), pairs(human.sum(axis=1))),
        "without_ties": (pairs(human[:, :2]).sum(axis=1), pairs(human[:, :2].sum(axis=1))),
    }


def summarise(
    per_item: dict[str, tuple[np.ndarray, np.ndarray]], item_question: np.ndarray, counts: np.ndarray
) -> dict[str, dict]:
    """Sum the per-item pairs to {value, ci, agree, n} per convention (n = pairs of votes)."""
    n_q = counts.shape[1]
    out = {}
    for name, (agree, total) in per_item.items():
        hits = np.bincount(item_question, weights=agree, minlength=n_q)[:, None]
        bases = np.bincount(item_question, weights=total, minlength=n_q)[:, None]
        n, k = float(total.sum()), float(agree.sum())
        ci = stats.bootstrap_ratio_ci(counts, hits, bases)[0] if n else (None, None)
        out[name] = {"value": k / n if n else None, "ci": list(ci), "agree": int(k), "n": int(n)}
    return out


def vote_pair_agreement(votes: pd.DataFrame, humans: list[str], *, counts: np.ndarray, cluster_index: pd.Index) -> dict:
    """{"conventions", "among_humans", "vs_humans": {judge: ...}} over the counted votes."""
    out: dict = {"conventions": CONVENTIONS, "among_humans": None, "vs_humans": {}}
    human_mask = is_in(votes["judge"], humans)
    items = pd.Index(pd.unique(votes["item_id"].to_numpy()))
    if not len(items) or not human_mask.any():
        return out
    # Each vote's item row and choice, found once for the human table and every judge's.
    item_row = items.get_indexer(votes["item_id"].to_numpy())
    choice = _choice_codes(votes["choice"])
    item_question = np.zeros(len(items), dtype=np.int64)
    item_question[item_row] = cluster_index.get_indexer(votes["cluster_id"].to_numpy())
    human = _table(item_row[human_mask], choice[human_mask], len(items))
    out["among_humans"] = summarise(among(human), item_question, counts)
    others_row, others_choice = item_row[~human_mask], choice[~human_mask]
    # Grouped by the judge column itself (a categorical: its codes), not by a million names as text.
    judge = votes["judge"][~human_mask]
    rows = judge.groupby(judge, observed=True, sort=False).indices
    for name in sorted(rows, key=str):
        own = _table(others_row[rows[name]], others_choice[rows[name]], len(items))
        out["vs_humans"][str(name)] = summarise(judge_vs_humans(own, human), item_question, counts)
    return out
