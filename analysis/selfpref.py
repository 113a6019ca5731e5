"""Self-preference: does a judge favour answers written by its own family of models more than the
other judges do on the same pairs? Pure over the votes frame (``analysis.frame``: judge,
cluster_id, item_id, choice, a1_system, a2_system).

A judge's family is named explicitly: ``JUDGE_FAMILY`` maps the judges of the imported data sets
to a family, and a judge named like a system (an LLM judge called "gpt-4") belongs to that
system's family. ``SYSTEM_FAMILY`` maps answer systems to families: one family per model line
(GPT-4, GPT-3.5, Claude, Bard, Vicuna, Guanaco of every size, Alpaca, LLaMA); a system not
listed is its own family. Judges without a family (people, simulated judges) get no figure.

For a judge J of family F, the pairs are the items where exactly one answer is F's and on which
J and at least one other judge voted; "others" are the votes of every judge outside F (people
included) on those items. Each vote scores 1 when it picks F's answer, ½ for a tie, 0 otherwise.
``own`` and ``others`` are the mean scores with clustered intervals (``stats.clustered_rates``,
by the clusters of questions: ``cluster_id``); ``difference`` = own − others, with a percentile
cluster bootstrap over the same clusters.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import stats

SYSTEM_FAMILY = {
    "gpt4": "gpt-4",
    "gpt-4": "gpt-4",
    "gpt35": "gpt-3.5",
    "gpt-3.5-turbo": "gpt-3.5",
    "claude": "claude",
    "claude-v1": "claude",
    "bard": "bard",
    "vicuna-13b": "vicuna",
    "vicuna-13b-v1.2": "vicuna",
    "guanaco-7b": "guanaco",
    "guanaco-13b": "guanaco",
    "guanaco-33b": "guanaco",
    "guanaco-65b": "guanaco",
    "alpaca-13b": "alpaca",
    "llama-13b": "llama",
}
JUDGE_FAMILY = {
    "prd-gpt4": "gpt-4",
    "prd-gpt35": "gpt-3.5",
    "prd-claude": "claude",
    "prd-bard": "bard",
    "prd-vicuna-13b": "vicuna",
    "mtbench-gpt4-pair": "gpt-4",
}
EMPTY_RATE = {"value": None, "ci": [None, None], "n": 0, "clusters": 0, "n_eff": None}


def judge_family(judge: str) -> str | None:
    return JUDGE_FAMILY.get(judge) or SYSTEM_FAMILY.get(judge)


def system_family(system: str) -> str:
    return SYSTEM_FAMILY.get(system, system) if system else ""


def _each_once(values: np.ndarray, fn) -> np.ndarray:
    """``fn`` of every value, called once per distinct value (there are few systems and judges)."""
    distinct, code = np.unique(values, return_inverse=True)
    return np.array([fn(x) for x in distinct], dtype=object)[code.ravel()]


def self_preference(votes: pd.DataFrame, *, counts: np.ndarray, cluster_index: pd.Index) -> dict[str, dict]:
    """Per judge of ``votes``: {family, n_items, own, others, difference, difference_ci}.
    ``counts`` (resamples × clusters) and ``cluster_index`` (the clusters' ids, ``cluster_id``)
    are the report's bootstrap over the clusters of questions. A judge without a family or without such pairs has null figures with n = 0."""
    judges = sorted(str(j) for j in pd.unique(votes["judge"]))
    out = {j: _empty(judge_family(j)) for j in judges}
    if all(judge_family(j) is None for j in judges):
        return out
    votes = votes[votes["choice"].notna().to_numpy()]
    if not len(votes):
        return out
    fam1 = _each_once(votes["a1_system"].astype(str).to_numpy(), system_family)
    fam2 = _each_once(votes["a2_system"].astype(str).to_numpy(), system_family)
    judge = votes["judge"].astype(str).to_numpy()
    vote_family = _each_once(judge, lambda j: judge_family(j) or "")
    item = votes["item_id"].to_numpy()
    choice = votes["choice"].astype(str).to_numpy()
    question = cluster_index.get_indexer(votes["cluster_id"].to_numpy())
    for name in judges:
        family = judge_family(name)
        if family is None:
            continue
        own_side = np.where(
            (fam1 == family) & (fam2 != family), "a1", np.where((fam2 == family) & (fam1 != family), "a2", "")
        )
        mine = (judge == name) & (own_side != "")
        theirs = (vote_family != family) & (own_side != "")
        common = np.intersect1d(item[mine], item[theirs])
        mine &= np.isin(item, common)
        theirs &= np.isin(item, common)
        if not mine.any():
            continue
        score = np.where(choice == own_side, 1.0, np.where(choice == "tie", 0.5, 0.0))
        own, others = (_rate(score[m], question[m]) for m in (mine, theirs))
        diff = own["value"] - others["value"]
        out[name] = {
            "family": family,
            "n_items": len(common),
            "own": own,
            "others": others,
            "difference": diff,
            "difference_ci": _difference_ci(score, question, mine, theirs, counts),
        }
    return out


def _empty(family: str | None) -> dict:
    return {
        "family": family,
        "n_items": 0,
        "own": dict(EMPTY_RATE),
        "others": dict(EMPTY_RATE),
        "difference": None,
        "difference_ci": [None, None],
    }


def _rate(score: np.ndarray, question: np.ndarray) -> dict:
    return stats.clustered_rates(score[:, None], np.ones((len(score), 1)), stats.Clusters(question))[0]


def _difference_ci(score, question, mine, theirs, counts: np.ndarray, level: float = 0.95) -> list[float | None]:
    """Percentile interval of own − others over the report's question resamples."""
    n_q = counts.shape[1]
    if n_q == 0:
        return [None, None]
    parts = np.stack(
        [
            np.bincount(question[mine], weights=score[mine], minlength=n_q),
            np.bincount(question[mine], minlength=n_q),
            np.bincount(question[theirs], weights=score[theirs], minlength=n_q),
            np.bincount(question[theirs], minlength=n_q),
        ],
        axis=1,
    ).astype(np.float64)
    sums = counts.astype(np.float64) @ parts
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = sums[:, 0] / sums[:, 1] - sums[:, 2] / sums[:, 3]
    diff = diff[~np.isnan(diff)]
    if not diff.size:
        return [None, None]
    lo, hi = np.percentile(diff, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return [float(lo), float(hi)]
