"""The study's metrics as pure functions over the votes frame (see analysis.frame and SPEC).

Item preferences are coded as integers: +1 = A1, -1 = A2, 0 = Tie.
"""

from __future__ import annotations

from itertools import product
from math import comb

import numpy as np
import pandas as pd

from analysis import stats
from analysis.frame import CONTROL, OPTIONS, equals

PREF_LABEL = {1: "A1", -1: "A2", 0: "Tie"}
ITEM_COLUMNS = ["item_id", "question_id", "cluster_id", "bloom", "group", "semantics", "a1_root", "a2_root"]


def preference(n_a1: np.ndarray, n_a2: np.ndarray) -> np.ndarray:
    """The item preference rule, in one place: score = votes A1 − votes A2 (ties count 0);
    A1 if the score is positive, A2 if negative, Tie if zero."""
    return np.sign(np.asarray(n_a1, dtype=np.int64) - np.asarray(n_a2, dtype=np.int64)).astype(np.int8)


def item_preferences(votes: pd.DataFrame) -> pd.DataFrame:
    """One row per (judge, item) with counted votes, in order of each pair's first vote: n_a1,
    n_a2, n_tie, n, score, pref, plus the item's columns (from the item's first vote).
    ``votes`` holds counted votes only (see frame.apply_filters)."""
    choice = votes["choice"].cat.codes.to_numpy()  # 0 a1, 1 a2, 2 tie
    item = votes["item_id"].to_numpy()
    item_code = stats.cluster_codes(item)
    # Counts per (judge, item) by codes: a grouping over the judge's names and a merge on the
    # item cost a million-vote study a quarter of a second more.
    judge = pd.factorize(votes["judge"])[0].astype(np.int64)
    pair = stats.cluster_codes(judge * (int(item_code.max(initial=0)) + 1) + item_code)
    first = stats.first_of_codes(pair)
    n_pairs = len(first)
    counts = pd.DataFrame(
        {
            "judge": votes["judge"].to_numpy()[first],
            "item_id": item[first],
            **{
                name: np.bincount(pair[choice == code], minlength=n_pairs).astype(np.int32)
                for code, name in enumerate(("n_a1", "n_a2", "n_tie"))
            },
        }
    )
    counts["n"] = counts["n_a1"] + counts["n_a2"] + counts["n_tie"]
    counts["score"] = counts["n_a1"] - counts["n_a2"]
    counts["pref"] = preference(counts["n_a1"], counts["n_a2"])
    columns = ITEM_COLUMNS[1:] + [c for c in votes.columns if c.startswith("len_")]
    item_rows = stats.first_of_codes(item_code)[item_code[first]]
    return pd.concat([counts, votes[columns].take(item_rows).reset_index(drop=True)], axis=1)


def oriented_pairs(prefs: pd.DataFrame) -> pd.DataFrame:
    """For one judge's item preferences: one row per (question, perturbation group) with the
    experimental preference and the control preference read relative to that perturbation.

    The control item is (A1, A2) of the question; a perturbation's item may have perturbed the
    other original, so the control preference flips sign when the perturbation's A2 derives from
    the control's A1. Questions without a counted control preference get ``ctrl`` NaN. Each
    row names its item (``item_id``), the control item (``ctrl_item``) and the ``orientation``
    (+1, −1, NaN without a control).
    """
    ctrl = prefs[prefs["group"] == CONTROL][["question_id", "item_id", "pref", "a1_root", "a2_root"]]
    ctrl = ctrl.rename(columns={"item_id": "ctrl_item", "pref": "ctrl", "a1_root": "c_a1", "a2_root": "c_a2"})
    exp = prefs[prefs["group"] != CONTROL][
        ["question_id", "item_id", "cluster_id", "bloom", "group", "semantics", "pref", "a2_root"]
    ]
    pairs = exp.merge(ctrl, on="question_id", how="left")
    orient = np.where(
        pairs["a2_root"].to_numpy() == pairs["c_a2"].to_numpy(),
        1.0,
        np.where(pairs["a2_root"].to_numpy() == pairs["c_a1"].to_numpy(), -1.0, np.nan),
    )
    pairs["ctrl"] = pairs["ctrl"].to_numpy(dtype=float) * orient
    pairs["orientation"] = orient
    pairs["group"] = pairs["group"].astype(str)
    pairs["semantics"] = pairs["semantics"].astype(str)
    return pairs


def asr_indicators(pairs: pd.DataFrame) -> pd.DataFrame:
    """Per (question, perturbation): whether it is in the base set and whether it counts as a
    success of the attack, for ASR; and for degrading kinds the same for accuracy.

    - non-semantic: base V1 = control pref A1 or Tie; hit = p-item pref A2.
    - degrading: base V2 = control pref A2 or Tie; hit = FE pref A2 or Tie.
    - accuracy (degrading): base = questions with a preference on the FE item (the control's
      is not needed); hit = FE pref A1.
    """
    ctrl, exp = pairs["ctrl"].to_numpy(), pairs["pref"].to_numpy()
    has_ctrl = ~np.isnan(ctrl)
    degrading = (pairs["semantics"] == "degrading").to_numpy()
    with np.errstate(invalid="ignore"):
        base = np.where(degrading, ctrl <= 0, ctrl >= 0) & has_ctrl
        hit = base & np.where(degrading, exp <= 0, exp == -1)
    out = pairs[["question_id", "cluster_id", "bloom", "group", "semantics"]].copy()
    out["asr_base"], out["asr_hit"] = base, hit
    out["acc_base"] = degrading
    out["acc_hit"] = out["acc_base"].to_numpy() & (exp == 1)
    return out


def rate(hit: int, base: int, ci: tuple[float | None, float | None]) -> dict:
    """A rate with its interval; undefined (None, n 0) when the base set is empty."""
    if base == 0:
        return {"value": None, "ci": [None, None], "n": 0}
    return {"value": hit / base, "ci": [ci[0], ci[1]], "n": int(base)}


def asr_and_accuracy(
    indicators: pd.DataFrame,
    cluster_index: pd.Index,
    counts: np.ndarray,
    groups: list[str],
    semantics: dict,
    *,
    by: str | None = None,
) -> tuple[dict, dict, dict]:
    """ASR per perturbation group and accuracy per degrading group, with bootstrap intervals
    over the clusters of questions (``counts``: resamples × clusters, aligned with ``cluster_index``,
    the clusters' ids: ``cluster_id``).

    Returns (asr, accuracy, parts): with ``by`` (e.g. "bloom"), parts is {value: (asr, accuracy)}
    for each value of that column, all sharing one pass over the resamples; else it is empty."""
    # Row positions of each part (all rows, then each value of ``by``) and plain arrays of the
    # columns: selecting rows of the frame once per part and group cost most of the time.
    parts = [(None, np.arange(len(indicators)))]
    if by is not None:
        parts += list(indicators.groupby(by, observed=True).indices.items())
    qpos_all = cluster_index.get_indexer(indicators["cluster_id"])
    group_all = indicators["group"].to_numpy(dtype=object)
    columns = {c: indicators[c].to_numpy(float) for c in ("asr_hit", "asr_base", "acc_hit", "acc_base")}
    cols, names = [], []
    for part, rows in parts:
        in_part = group_all[rows]
        for group in groups:
            sub = rows[in_part == group]
            qpos = qpos_all[sub]
            for metric in ("asr", "acc") if semantics.get(group) == "degrading" else ("asr",):
                hit = np.bincount(qpos, weights=columns[f"{metric}_hit"][sub], minlength=len(cluster_index))
                base = np.bincount(qpos, weights=columns[f"{metric}_base"][sub], minlength=len(cluster_index))
                cols.append((hit, base))
                names.append((part, metric, group))
    if cols:
        hits = np.stack([c[0] for c in cols], axis=1)
        bases = np.stack([c[1] for c in cols], axis=1)
        cis = stats.bootstrap_ratio_ci(counts, hits, bases)
    out: dict = {part: ({}, {}) for part, _ in parts}
    for j, (part, metric, group) in enumerate(names):
        target = out[part][0] if metric == "asr" else out[part][1]
        # n: the questions in the base set; clusters: the resampled units they fall into.
        target[group] = {
            **rate(int(hits[:, j].sum()), int(bases[:, j].sum()), cis[j]),
            "clusters": int((bases[:, j] > 0).sum()),
        }
    return out[None][0], out[None][1], {str(k): v for k, v in out.items() if k is not None}


def rater_codes(votes: pd.DataFrame) -> np.ndarray | None:
    """Per vote, a code for its rater (−1 for none); None when no vote has a rater, so that
    intervals cluster by question only (LLM judges, simulated and imported judges)."""
    if "rater" not in votes.columns or not len(votes):
        return None
    column = votes["rater"]
    codes = column.array.codes.astype(np.int64)
    categories = list(column.array.categories)
    if "" in categories:
        codes = np.where(codes == categories.index(""), -1, codes)
    return codes if (codes >= 0).any() else None


POSITION_TEST = "clustered sign test of first vs second (ties excluded), normal approximation"


def position(votes: pd.DataFrame) -> dict:
    """Shares of votes for the answer shown first / tie / second and Diff = first − second,
    each with an interval clustered by question (and rater, for people; stats.clustered_rates),
    and a clustered test of first against second with ties left out (stats.clustered_sign_test).
    Votes whose order is unknown (some imported data) are not part of it."""
    return positions(votes)[0]


def positions(votes: pd.DataFrame, by: str | None = None) -> tuple[dict, dict[str, dict]]:
    """``position`` of all the votes and, with ``by`` (e.g. "bloom"), of each value of that
    column, from one coding of the clusters: (overall, {value: position})."""
    column = votes["choice_shown"]
    codes = column.array.codes
    code_of = {c: i for i, c in enumerate(column.array.categories)}
    first, second, tie = (codes == code_of.get(name, -2) for name in ("first", "second", "tie"))
    keep = votes["order_known"].to_numpy() & (first | second | tie)
    first, second, tie = first[keep], second[keep], tie[keep]
    if not keep.any():
        return _position_result(None, None, 0), {}
    raters = rater_codes(votes)
    clusters = stats.Clusters(votes["cluster_id"].to_numpy()[keep], raters[keep] if raters is not None else None)
    # Diff is a mean of +1 / 0 / −1 per vote; as (1 + d) / 2 it is a share like the others.
    values = np.stack([first, tie, second, (1.0 + first - second) / 2], axis=1).astype(float)
    diff = first.astype(float) - second
    overall = _position_result(
        stats.clustered_rates(values, np.ones_like(values), clusters),
        stats.clustered_sign_test(diff, clusters),
        int(keep.sum()),
    )
    parts: dict[str, dict] = {}
    if by is not None:
        # A categorical column (the frame's) by its codes: the same codes and names in the same
        # order of first appearance, without hashing a string per vote.
        column = votes[by]
        part_of = column.array if isinstance(column.dtype, pd.CategoricalDtype) else column.to_numpy()
        group, names = pd.factorize(part_of[keep])
        n_groups = len(names)
        rates = stats.clustered_rates(values, None, clusters, group=group, n_groups=n_groups)
        per_metric = [rates[j * n_groups : (j + 1) * n_groups] for j in range(4)]
        p_values = stats.clustered_sign_test(diff, clusters, group=group, n_groups=n_groups)
        sizes = np.bincount(group, minlength=n_groups)
        for g, name in enumerate(names):
            parts[str(name)] = _position_result([m[g] for m in per_metric], p_values[g], int(sizes[g]))
    return overall, parts


def _position_result(rates: list[dict] | None, p_value: float | None, n: int) -> dict:
    if not n:
        return {
            "first": None,
            "tie": None,
            "second": None,
            "diff": None,
            "n": 0,
            "clusters": 0,
            "ci": {},
            "p_value": None,
        }
    r_first, r_tie, r_second, r_diff = rates
    lo, hi = r_diff["ci"]
    return {
        "first": r_first["value"],
        "tie": r_tie["value"],
        "second": r_second["value"],
        "diff": 2 * r_diff["value"] - 1,
        "n": n,
        "clusters": r_first["clusters"],
        "ci": {
            "first": r_first["ci"],
            "tie": r_tie["ci"],
            "second": r_second["ci"],
            "diff": [2 * lo - 1, 2 * hi - 1],
        },
        "p_value": p_value,
    }


# A position-dominated judge (SPEC): its votes follow the display order, so balanced orders turn
# its item preferences into ties, and ASR counts a tie as robust: it would look perfect. Such a
# judge is flagged and not ranked when either of these holds (docs/STATISTICS.md):
DOMINATED_DIFF = 0.5  # |first − second| of its counted votes at least 50 points ...
DOMINATED_ALPHA = 0.05  # ... and the first-vs-second test significant (Holm-adjusted p below this)
DOMINATED_ITEMS_TIED = 0.5  # or more than half of its item preferences are ties


def items_tied(prefs: pd.DataFrame | None) -> dict:
    """The share of a judge's item preferences (every item it voted on, control and perturbed)
    that are ties, with an interval clustered by question (stats.clustered_rates)."""
    if prefs is None or not len(prefs):
        return {"value": None, "ci": [None, None], "n": 0}
    ties = (prefs["pref"].to_numpy() == 0).astype(float)[:, None]
    found = stats.clustered_rates(ties, np.ones_like(ties), stats.Clusters(prefs["cluster_id"].to_numpy()))[0]
    return {"value": found["value"], "ci": list(found["ci"]), "n": int(len(ties)), "clusters": found["clusters"]}


def position_dominated(position: dict, ties: dict) -> list[str]:
    """Why a judge's ASR and accuracy say nothing about its robustness: empty when they do.
    ``position`` is its ``positions`` result with ``p_adjusted`` set, ``ties`` its ``items_tied``."""
    reasons = []
    diff, p = position.get("diff"), position.get("p_adjusted")
    if diff is not None and abs(diff) >= DOMINATED_DIFF and p is not None and p < DOMINATED_ALPHA:
        side = "first" if diff > 0 else "second"
        reasons.append(
            f"votes follow the display order: the answer shown {side} wins by {abs(diff):.0%} of votes "
            f"(at least {DOMINATED_DIFF:.0%}, Holm-adjusted p < {DOMINATED_ALPHA})"
        )
    if ties["value"] is not None and ties["value"] > DOMINATED_ITEMS_TIED:
        reasons.append(f"{ties['value']:.0%} of its items tied (more than {DOMINATED_ITEMS_TIED:.0%})")
    return reasons


# How a vote on a pair of answers scores for "the longer answer wins" (docs/STATISTICS.md):
# what a tie scores, and what becomes of pairs of equal length.
VERBOSITY_CONVENTIONS = {
    "tie_half": ("a tie counts half a win", "pairs of equal length left out"),
    "blog": (
        "a tie's winner drawn at random, a win only when strictly longer (Dsouza 2023, verbosity blog post)",
        "pairs of equal length counted, never a win",
    ),
}


def verbosity_convention_parts(convention: str, *, seed: int) -> dict:
    """The report's words for ``convention`` (its ``conventions`` object)."""
    ties, equal = VERBOSITY_CONVENTIONS[convention]
    if convention == "blog":
        ties = f"{ties}; seed {seed}"
    return {"longer_wins_ties": ties, "longer_wins_equal_length": equal}


def longer_wins_scores(
    choice: np.ndarray, a2_longer: np.ndarray, equal: np.ndarray, *, convention: str, seed: int
) -> np.ndarray:
    """Each vote's score for "the longer answer wins" under ``convention`` (a key of
    ``VERBOSITY_CONVENTIONS``). ``choice``: 0 A1, 1 A2, 2 tie; ``a2_longer`` and ``equal`` say
    which answer of the pair is longer. Under "tie_half" pairs of equal length must be left out
    before; under "blog" they score 0, and each tie's winner is drawn with ``seed`` (one draw per
    vote, in order, so a vote's draw does not depend on which other votes are ties)."""
    if convention == "tie_half":
        return np.where(choice == 2, 0.5, np.where((choice == 1) == a2_longer, 1.0, 0.0))
    if convention == "blog":
        coin = np.random.default_rng(seed).random(len(choice)) < 0.5
        winner_a2 = np.where(choice == 2, coin, choice == 1)
        return np.where(~equal & (winner_a2 == a2_longer), 1.0, 0.0)
    raise ValueError(f"unknown verbosity convention {convention!r}; known: {', '.join(VERBOSITY_CONVENTIONS)}")


def verbosity(
    votes: pd.DataFrame,
    *,
    measure: str = "words",
    bin_width: int = 10,
    max_bins: int = 10,
    convention: str = "tie_half",
    seed: int = 0,
) -> dict:
    """Preference for the longer answer against |Δ length| (bins of ``bin_width``, the last one
    open), and "longer answer wins": the mean of the same vote scores over all bins. How a vote
    scores is the ``convention`` (``VERBOSITY_CONVENTIONS``): by default a vote scores 1 for the
    longer answer, 0 for the shorter, 0.5 for a tie (a tie counts half a win), and pairs of equal
    length are left out; "blog" draws a tie's winner with ``seed``. Pairs with unknown length
    are left out. Every figure has an interval clustered by question (and rater)."""
    la1, la2 = votes[f"len_a1_{measure}"].to_numpy(), votes[f"len_a2_{measure}"].to_numpy()
    delta = la2 - la1
    with np.errstate(invalid="ignore"):
        usable = ~np.isnan(delta) & ((delta != 0) | (convention == "blog"))
    delta = delta[usable]
    choice = votes["choice"].array.codes[usable]
    longer_chosen = longer_wins_scores(choice, delta > 0, delta == 0, convention=convention, seed=seed)
    absd = np.abs(delta)
    bin_of = np.minimum((absd // bin_width).astype(np.int64), max_bins) if len(absd) else np.zeros(0, np.int64)
    n_bins = int(bin_of.max()) + 1 if len(bin_of) else 0
    raters = rater_codes(votes)
    clusters = stats.Clusters(votes["cluster_id"].to_numpy()[usable], raters[usable] if raters is not None else None)
    overall = stats.clustered_rates(longer_chosen, None, clusters, group=np.zeros(len(bin_of), np.int64))[0]
    rates = stats.clustered_rates(longer_chosen, None, clusters, group=bin_of, n_groups=n_bins)
    bins = []
    for b, r in enumerate(rates):
        lo = b * bin_width
        hi = None if b == max_bins else (b + 1) * bin_width
        bins.append({"lo": lo, "hi": hi, "value": r["value"], "n": r["n"], "ci": r["ci"]})
    return {
        "measure": measure,
        "convention": convention,
        "bin_width": bin_width,
        "bins": bins,
        "longer_wins": overall["value"],
        "longer_wins_ci": overall["ci"],
        "n": overall["n"],
        "clusters": overall["clusters"],
    }


def option_probs(votes: pd.DataFrame) -> dict | None:
    """Mean probability the judge put on A1/A2/tie, and on the answer shown first/second, where
    it gave them. First/second are over the votes whose display order is known (``n_order_known``
    of them; null when none): an imported vote whose source did not record the order is stored
    A1 first, so its A1 probability would read as a preference for the first position."""
    first, second, tie = (votes[f"prob_{option}"].to_numpy(dtype=float) for option in OPTIONS)
    has = ~np.isnan(first)  # a vote with probabilities has all three (analysis.frame)
    if not has.any():
        return None
    first, second, tie = first[has], second[has], tie[has]
    a1_first = equals(votes["shown_first"], "a1")[has]
    p_a1 = np.where(a1_first, first, second)
    p_a2 = np.where(a1_first, second, first)
    known = votes["order_known"].to_numpy(dtype=bool)[has]
    return {
        "n": int(has.sum()),
        "n_order_known": int(known.sum()),
        "first": float(first[known].mean()) if known.any() else None,
        "second": float(second[known].mean()) if known.any() else None,
        "tie": float(tie.mean()),
        "a1": float(p_a1.mean()),
        "a2": float(p_a2.mean()),
        "confidence": float(np.maximum(np.maximum(first, second), tie).mean()),
    }


def random_judge(votes_per_item: int, groups: list[str], semantics: dict, p_tie: float = 1 / 3) -> dict:
    """Exact expected metrics of a judge that votes A1 / A2 / tie at random (tie with ``p_tie``,
    A1 and A2 equally likely otherwise), ``votes_per_item`` votes per item: the chance level of
    this study's design. Its control and experimental preferences are independent, so
    ASR = P(experimental pref hits) whatever the base set."""
    p_side = (1 - p_tie) / 2
    k = votes_per_item
    p_a1 = p_a2 = p_tied = 0.0
    for n_a1, n_a2 in product(range(k + 1), repeat=2):
        if n_a1 + n_a2 > k:
            continue
        n_t = k - n_a1 - n_a2
        prob = comb(k, n_a1) * comb(k - n_a1, n_a2) * p_side ** (n_a1 + n_a2) * p_tie**n_t
        if n_a1 > n_a2:
            p_a1 += prob
        elif n_a2 > n_a1:
            p_a2 += prob
        else:
            p_tied += prob
    asr, acc = {}, {}
    for group in groups:
        if semantics.get(group) == "degrading":
            asr[group] = {"value": p_a2 + p_tied, "ci": [None, None], "n": None}
            acc[group] = {"value": p_a1, "ci": [None, None], "n": None}
        else:
            asr[group] = {"value": p_a2, "ci": [None, None], "n": None}
    return {
        "judge": "random",
        "kind": "random",
        "votes_per_item": k,
        "asr": asr,
        "accuracy": acc,
        "position": {"first": p_side, "tie": p_tie, "second": p_side, "diff": 0.0, "n": None},
        "verbosity_longer_wins": 0.5,
        "lc_winrate": {g: 0.5 for g in [CONTROL, *groups]},
    }
