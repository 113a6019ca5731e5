"""Measures for data with both presentation orders or known answers, as pure functions over one
judge's votes (the votes frame, analysis.frame): position consistency, preference fairness and
repetition stability after Shi et al. 2024, and accuracy against gold labels in each order, on
average and "correct in both orders" (as LLMBar, Zeng et al. 2024, reports it).

The votes passed in are the judge's counted votes plus those whose verdict could not be read
(``parse_status`` invalid, ``choice`` missing): such a verdict is not correct, and it does not
survive a swap. docs/STATISTICS.md ("Position consistency and accuracy against gold labels")
gives the definitions and their intervals.

- Order-swapped pairs: on one item, every vote shown A1 first with every vote shown A2 first,
  from votes without a rater (one judge asked twice; a human pool's two votes come from two
  people) whose order is known. With one vote per order an item is one pair, as in Shi et al.
- Rates pool the pairs (or votes) of all items; intervals are clustered by question, the
  questions of one prompt key as one (``cluster_id``; ``stats.clustered_rates``: Wilson on the
  effective number, the Wilson fallback on the number of clusters at 0 or 1). An empty base
  is ``None`` with n = 0.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import stats
from analysis.frame import equals

# Verdict codes: a1, a2, tie (the frame's categories) and 3 = could not be read.
UNREAD = 3
EMPTY_RATE = {"value": None, "ci": [None, None], "n": 0, "clusters": 0, "n_eff": None}


def _rates(values: np.ndarray, bases: np.ndarray, clusters: stats.Clusters) -> list[dict]:
    """clustered_rates, with every empty base reported the same way (None, n 0)."""
    if not len(values) or not values.shape[1]:
        return [dict(EMPTY_RATE) for _ in range(values.shape[1] if values.ndim == 2 else 0)]
    return [r if r["n"] else dict(EMPTY_RATE) for r in stats.clustered_rates(values, bases, clusters)]


def _verdicts(votes: pd.DataFrame) -> np.ndarray:
    codes = votes["choice"].array.codes.astype(np.int64)
    return np.where(codes < 0, UNREAD, codes)


def _subset_masks(subsets: np.ndarray) -> list[tuple[str | None, np.ndarray]]:
    """(None, all) then one mask per named subset, in name order."""
    codes, names = pd.factorize(np.asarray(subsets, dtype=object))
    out: list[tuple[str | None, np.ndarray]] = [(None, np.ones(len(subsets), dtype=bool))]
    for k in np.argsort(np.asarray(names, dtype=str), kind="stable"):
        if str(names[k]):
            out.append((str(names[k]), codes == k))
    return out


def _no_rater(votes: pd.DataFrame) -> np.ndarray:
    return equals(votes["rater"], "") & votes["order_known"].to_numpy(bool)


def swapped_pairs(votes: pd.DataFrame) -> pd.DataFrame:
    """One row per item that has votes (without a rater, order known) in both orders: its
    question and subset, the number of order-swapped pairs and how many of them are
    consistent (the same verdict), both unread, primacy (the answer shown first both times),
    recency (the answer shown second both times), and correct in both orders (gold known)."""
    rows = np.flatnonzero(_no_rater(votes))
    columns = ["judge", "item_id", "question_id", "cluster_id", "subset", "pairs", "consistent", "both_unread"]
    columns += ["primacy", "recency"]
    if not len(rows):
        return pd.DataFrame({c: pd.Series(dtype=float) for c in [*columns, "both_correct", "gold_pairs"]})
    # Per judge and item, so that one call serves every judge (the report splits the rows by judge).
    # The judges' codes stand for their names (a million names as text cost a third of the call).
    # Plain arrays of the rows taken, not a copy of the frame's.
    judge_code, judge_names = pd.factorize(votes["judge"].take(rows))
    judge = np.asarray(judge_names.astype(str), dtype=object)
    item_code = stats.cluster_codes(judge_code, votes["item_id"].to_numpy()[rows])
    order = equals(votes["shown_first"], "a2")[rows].astype(np.int64)
    verdict = _verdicts(votes)[rows]
    # counts[item, order, verdict]
    n_items = int(item_code.max()) + 1
    counts = np.bincount(item_code * 8 + order * 4 + verdict, minlength=n_items * 8).reshape(-1, 2, 4)
    first, second = counts[:, 0, :].astype(float), counts[:, 1, :].astype(float)
    pairs = first.sum(axis=1) * second.sum(axis=1)
    keep = np.flatnonzero(pairs > 0)
    first, second = first[keep], second[keep]
    # The item's own columns, read from its first vote.
    first_vote = stats.first_of_codes(item_code)[keep]
    at = rows[first_vote]
    gold = votes["gold_label"].to_numpy(dtype=object)[at]
    has_gold = gold != ""
    gold_code = np.where(gold == "a2", 1, 0)
    pair_rows = np.arange(len(keep))
    return pd.DataFrame(
        {
            "judge": judge[judge_code[first_vote]],
            "item_id": votes["item_id"].to_numpy()[at],
            "question_id": votes["question_id"].to_numpy()[at],
            "cluster_id": votes["cluster_id"].to_numpy()[at],
            "subset": votes["subset"].to_numpy(dtype=object)[at],
            "pairs": pairs[keep],
            "consistent": (first[:, :3] * second[:, :3]).sum(axis=1),
            "both_unread": first[:, UNREAD] * second[:, UNREAD],
            # Shown A1 first the judge took A1, shown A2 first it took A2: the first both times.
            "primacy": first[:, 0] * second[:, 1],
            "recency": first[:, 1] * second[:, 0],
            "both_correct": np.where(has_gold, first[pair_rows, gold_code] * second[pair_rows, gold_code], 0.0),
            "gold_pairs": np.where(has_gold, pairs[keep], 0.0),
        }
    )


def position_consistency(votes: pd.DataFrame, *, pairs: pd.DataFrame | None = None) -> dict:
    """Position consistency, preference fairness and their cut by subset (see the module).
    ``pairs``: ``swapped_pairs(votes)`` when the caller has it already."""
    pairs = swapped_pairs(votes) if pairs is None else pairs
    parts = _subset_masks(pairs["subset"].to_numpy()) if len(pairs) else [(None, np.zeros(0, bool))]
    base = pairs["pairs"].to_numpy(float)
    primacy_n, recency_n = pairs["primacy"].to_numpy(float), pairs["recency"].to_numpy(float)
    positional = primacy_n + recency_n
    both_unread = pairs["both_unread"].to_numpy()
    shares = []
    for hit, b in ((pairs["consistent"].to_numpy(float), base), (primacy_n, base), (recency_n, base)):
        with np.errstate(invalid="ignore", divide="ignore"):
            shares.append((np.where(b > 0, hit / np.where(b > 0, b, 1), 0.0), b))
    with np.errstate(invalid="ignore", divide="ignore"):
        shares.append((np.where(positional > 0, primacy_n / np.where(positional > 0, positional, 1), 0.0), positional))
    values, bases = [], []
    for _, mask in parts:
        for value, b in shares:
            values.append(value)
            bases.append(np.where(mask, b, 0.0))
    clusters = stats.Clusters(pairs["cluster_id"].to_numpy())
    rates = _rates(np.stack(values, axis=1), np.stack(bases, axis=1), clusters)
    out: dict = {}
    for k, (name, mask) in enumerate(parts):
        consistency, primacy, recency, first_share = rates[4 * k : 4 * k + 4]
        part = {
            "consistency": consistency,
            "both_unread": int(both_unread[mask].sum()),
            "primacy": primacy,
            "recency": recency,
            # Which position the inconsistent verdicts favour: the share of those that followed
            # the position (primacy + recency) that took the answer shown first.
            "first_share": first_share,
            # Shi et al.'s sign: recency − primacy over all pairs, −1 (always first) … +1.
            "fairness": None if primacy["value"] is None else recency["value"] - primacy["value"],
        }
        if name is None:
            out.update(part)
            out["by_subset"] = {}
        else:
            out["by_subset"][name] = part
    return out


def repetition_stability(votes: pd.DataFrame) -> dict:
    """Shi et al.'s repetition stability: over requests asked more than once (the same item,
    display order, label scheme and label order, by a judge without raters), the mean share of
    the repeats that give the request's most frequent verdict (1 = always the same). Only read
    verdicts count."""
    keep = _no_rater(votes) & votes["choice"].notna().to_numpy()
    item = votes["item_id"].to_numpy(dtype=np.int64)
    # Most data asks each item once per order: no repeats, nothing more to look at.
    item_order = item * 2 + equals(votes["shown_first"], "a2")
    if len(pd.unique(item_order[keep])) == keep.sum():
        return dict(EMPTY_RATE)
    # Codes of the text columns stand for them: a request is which votes share all four, coded
    # by one count over a number naming the four (one pass where a code per column took four).
    shown_first, n_shown = pd.factorize(votes["shown_first"])
    scheme, n_schemes = pd.factorize(votes["label_scheme"])
    key = (item * (len(n_shown) + 1) + shown_first + 1) * (len(n_schemes) + 1) + scheme + 1
    request = stats.cluster_codes(key[keep] * 2 + votes["labels_swapped"].to_numpy(bool)[keep])
    verdict, cluster_id = _verdicts(votes)[keep], votes["cluster_id"].to_numpy()[keep]
    counts = np.bincount(request * 3 + verdict, minlength=(int(request.max()) + 1) * 3).reshape(-1, 3)
    n = counts.sum(axis=1)
    repeated = n >= 2
    if not repeated.any():
        return dict(EMPTY_RATE)
    cluster = np.zeros(len(n), dtype=np.int64)
    cluster[request] = cluster_id
    share = counts.max(axis=1)[repeated] / n[repeated]
    return _rates(share[:, None], np.ones((len(share), 1)), stats.Clusters(cluster[repeated]))[0]


def gold_accuracy(votes: pd.DataFrame, *, rater: np.ndarray | None = None, pairs: pd.DataFrame | None = None) -> dict:
    """Accuracy against the items' gold labels: in each order (votes shown A1 first, shown A2
    first; a verdict that could not be read is not correct), their average, and correct in both
    orders (order-swapped pairs, as ``swapped_pairs``), overall and by subset. ``rater``: per
    vote, a rater code (−1 none) for the two-way clustering of people's votes."""
    gold_label = votes["gold_label"].to_numpy(dtype=object)
    has_gold = (gold_label != "") & votes["order_known"].to_numpy(bool)
    # Plain arrays of the votes with a gold label (a frame's boolean indexing copies every column).
    choice = votes["choice"].to_numpy(dtype=object)[has_gold]
    correct = (choice == gold_label[has_gold]).astype(float)
    cluster_id = votes["cluster_id"].to_numpy()[has_gold]
    n_gold = len(correct)
    parts = _subset_masks(votes["subset"].to_numpy()[has_gold]) if n_gold else [(None, np.zeros(0, bool))]
    in_order = [equals(votes["shown_first"], order)[has_gold] for order in ("a1", "a2")]
    bases, values = [], []
    for _, mask in parts:
        for order_mask in in_order:
            bases.append((mask & order_mask).astype(float))
            values.append(correct)
        # The average of the two orders: each vote weighs 1 / (2 × votes in its order), scaled
        # to the votes of both, so the pooled rate is the mean of the two order rates.
        n1, n2 = bases[-2].sum(), bases[-1].sum()
        weight = np.zeros(n_gold)
        if n1 and n2:
            weight = (n1 + n2) * (bases[-2] / (2 * n1) + bases[-1] / (2 * n2))
        bases.append(weight)
        values.append(correct)
    clusters = stats.Clusters(cluster_id, None if rater is None else rater[has_gold])
    rates = _rates(np.stack(values, axis=1), np.stack(bases, axis=1), clusters)
    pairs = swapped_pairs(votes) if pairs is None else pairs
    pair_parts = _subset_masks(pairs["subset"].to_numpy()) if len(pairs) else [(None, np.zeros(0, bool))]
    gold_pairs = pairs["gold_pairs"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        both_value = np.where(
            gold_pairs > 0, pairs["both_correct"].to_numpy(float) / np.where(gold_pairs > 0, gold_pairs, 1), 0.0
        )
    both_rates = dict(
        zip(
            [name for name, _ in pair_parts],
            _rates(
                np.stack([both_value] * len(pair_parts), axis=1),
                np.stack([np.where(mask, gold_pairs, 0.0) for _, mask in pair_parts], axis=1),
                stats.Clusters(pairs["cluster_id"].to_numpy()),
            ),
            strict=True,
        )
    )
    unread = votes["choice"].isna().to_numpy()[has_gold]
    out: dict = {}
    for k, (name, mask) in enumerate(parts):
        a1_first, a2_first, average = rates[3 * k : 3 * k + 3]
        if average["n"]:
            average = {
                **average,
                "value": (a1_first["value"] + a2_first["value"]) / 2,
                "n": a1_first["n"] + a2_first["n"],
            }
        part = {
            "a1_first": a1_first,
            "a2_first": a2_first,
            "average": average,
            "both": both_rates.get(name, dict(EMPTY_RATE)),
            "unread": int((unread & mask).sum()),
        }
        if name is None:
            out.update(part)
            out["by_subset"] = {}
        else:
            out["by_subset"][name] = part
    return out
