"""The Alternative Annotator Test: can this judge replace my raters? (Calderon, Reichart and
Dror, "The Alternative Annotator Test for LLM-as-a-Judge", ACL 2025, arXiv 2501.10970.)

Implemented from the paper (their code has no licence; nothing of it is here). Leave one rater
j out at a time. On each item i that j labelled, score the judge f and the rater j against the
other raters of the item with the paper's accuracy alignment: the share of the others who gave
the same label, ``S(f, i, j)`` and ``S(h_j, i, j)``. The judge's indicator is
``W^f_ij = 1{S(f) >= S(h_j)}``, the rater's ``W^h_ij = 1{S(h_j) >= S(f)}`` (a draw counts for
both). ``rho^f_j`` and ``rho^h_j`` are their means over j's items. Rater j is "beaten" when the
one-sided paired t-test rejects ``H0_j: rho^f_j <= rho^h_j - epsilon`` (the mean of
``W^h - W^f`` is at least epsilon), epsilon being the cost-benefit margin the judge is granted
(0.2 for expert raters, 0.15 skilled, 0.1 crowd). The p-values of the tested raters are
adjusted together by Benjamini-Yekutieli at q = 0.05; the winning rate omega is the share of
tested raters whose null is rejected, and the judge passes when omega >= 0.5. The advantage
probability rho is the mean of ``rho^f_j`` over the tested raters: how likely the judge is to
be as good as or better than a randomly chosen rater (for comparing judges).

The authors' filters: an item counts when it has at least ``min_votes`` raters' labels (2; 3
advised) and a label of the judge; a rater is tested when they labelled at least ``min_items``
such items (30, for the t-test's normality). A rater with fewer items is not tested but is
still one of "the others" on the items they labelled.

Labels are anything comparable for equality (the report uses the item preference: +1 A1, -1 A2,
0 tie). No Django here: ``analysis.study_metrics`` feeds it from the votes frame.

The reference a study may choose instead (``reference="dawid_skene"``): the judge and the
left-out rater are each scored 1 where they give the Dawid-Skene consensus of the other raters
(``analysis.consensus``, fitted on every label but the left-out rater's, once per tested rater),
0 otherwise; the rest of the test is the same. Where some raters are more reliable than others,
the consensus trusts them more than a share of the others does (the paper leaves the alignment
score open; this is ours). Labels must then be +1 / -1 / 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import special

from analysis import consensus

# The authors' rule of thumb for epsilon by who the raters are.
EPSILON = {"expert": 0.2, "skilled": 0.15, "crowd": 0.1}
DEFAULT_RATERS = "crowd"
Q_FDR = 0.05
MIN_VOTES = 2  # human labels per item (the authors advise 3)
MIN_ITEMS = 30  # items per tested rater
# Below three tested raters the winning rate is 0, 1/2 or 1 of one or two comparisons, and the
# test no longer asks whether the judge represents a group (the authors advise three raters).
MIN_TESTED = 3
# What the judge and the left-out rater are scored against, item by item.
REFERENCES = {
    "raters": "the share of the other raters giving the same label (the paper's)",
    "dawid_skene": "the Dawid-Skene consensus of the other raters",
}


@dataclass
class RaterTest:
    """One left-out rater: their items, the judge's and the rater's advantage probabilities
    (``judge_advantage`` is rho^f_j), the p-value of H0_j and whether BY rejected it."""

    rater: object
    n_items: int
    judge_advantage: float
    rater_advantage: float
    p_value: float
    rejected: bool = False


@dataclass
class AltTestResult:
    """The test of one judge. ``winning_rate`` (omega) and ``advantage_probability`` (rho) are
    None when no rater could be tested; ``passes`` is None when the data cannot support a
    verdict, and ``reason`` then says why, with the numbers."""

    epsilon: float
    q: float
    min_votes: int
    min_items: int
    min_tested: int
    n_items: int  # items with >= min_votes human labels and a label of the judge
    n_raters: int  # raters with a label on one of those items
    raters: list[RaterTest] = field(default_factory=list)  # the tested raters
    winning_rate: float | None = None
    advantage_probability: float | None = None
    passes: bool | None = None
    reason: str = ""

    @property
    def n_tested(self) -> int:
        return len(self.raters)

    @property
    def n_rejected(self) -> int:
        return sum(r.rejected for r in self.raters)

    @property
    def verdict(self) -> str:
        if self.passes is None:
            return f"no verdict: {self.reason}"
        return "passes" if self.passes else "fails"


def alt_test(
    items: np.ndarray,
    raters: np.ndarray,
    labels: np.ndarray,
    judge_items: np.ndarray,
    judge_labels: np.ndarray,
    *,
    epsilon: float = EPSILON[DEFAULT_RATERS],
    q: float = Q_FDR,
    min_votes: int = MIN_VOTES,
    min_items: int = MIN_ITEMS,
    min_tested: int = MIN_TESTED,
    reference: str = "raters",
) -> AltTestResult:
    """The alt-test of one judge against people: ``items``, ``raters``, ``labels`` are the
    people's labels (one per rater and item), ``judge_items`` / ``judge_labels`` the judge's
    (one per item); ``reference`` a key of ``REFERENCES``."""
    if reference not in REFERENCES:
        raise ValueError(f"unknown alt-test reference {reference!r}; known: {', '.join(REFERENCES)}")
    if not 0 <= epsilon < 1:
        raise ValueError(f"epsilon must be in [0, 1), got {epsilon}")
    if not 0 < q < 1:
        raise ValueError(f"q must be in (0, 1), got {q}")
    if min_votes < 2:
        raise ValueError(f"min_votes must be at least 2 (a left-out rater needs another), got {min_votes}")
    if min_items < 2:
        raise ValueError(f"min_items must be at least 2 (a t-test needs two items), got {min_items}")
    # As they come: numbers stay numbers (a study's ids and labels), which factorize far faster
    # than objects.
    items, raters, labels, judge_items, judge_labels = (
        np.asarray(a) for a in (items, raters, labels, judge_items, judge_labels)
    )
    if not len(items) == len(raters) == len(labels):
        raise ValueError(f"items, raters and labels differ in length: {len(items)}, {len(raters)}, {len(labels)}")
    if len(judge_items) != len(judge_labels):
        raise ValueError(f"judge_items and judge_labels differ in length: {len(judge_items)}, {len(judge_labels)}")
    result = AltTestResult(
        epsilon=epsilon, q=q, min_votes=min_votes, min_items=min_items, min_tested=min_tested, n_items=0, n_raters=0
    )

    judge_item_codes, judge_item_names = pd.factorize(judge_items)
    if len(judge_item_names) < len(judge_items):
        repeated = judge_item_names[np.argmax(np.bincount(judge_item_codes) > 1)]
        raise ValueError(
            f"the judge has more than one label on item {_plain(repeated)!r}: give one per item (its item preference)"
        )
    if not len(items):
        result.reason = "no human votes with a rater id"
        return result
    item, item_names = pd.factorize(items)
    rater, rater_names = pd.factorize(raters)
    # By hashing: a count per possible (item, rater) pair would be items x raters long.
    repeated = pd.Series(item.astype(np.int64) * len(rater_names) + rater).duplicated().to_numpy()
    if repeated.any():
        at = np.flatnonzero(repeated)[0]
        raise ValueError(
            f"rater {_plain(raters[at])!r} has more than one label on item {_plain(items[at])!r}: "
            "give one per rater and item"
        )
    # Labels as codes over the people's and the judge's together.
    label_codes, label_names = pd.factorize(np.concatenate([labels, judge_labels]))
    for what, codes in (("item", item), ("rater", rater), ("label", label_codes)):
        if (codes < 0).any():
            raise ValueError(f"a {what} is missing (None or NaN) in {int((codes < 0).sum())} of the labels given")
    label, judge_label = label_codes[: len(labels)], label_codes[len(labels) :]
    # The judge's label per item of the people's (-1 where it has none).
    judge_on_item = np.full(len(item_names), -1, dtype=np.int64)
    at = pd.Index(item_names).get_indexer(judge_items)
    judge_on_item[at[at >= 0]] = judge_label[at >= 0]
    votes_per_item = np.bincount(item, minlength=len(item_names))
    kept_item = (votes_per_item >= min_votes) & (judge_on_item >= 0)
    keep = kept_item[item]
    result.n_items = int(kept_item.sum())
    result.n_raters = len(np.unique(rater[keep]))
    if not result.n_items:
        result.reason = (
            f"no item has {min_votes} or more human labels and a label of the judge "
            f"({int((votes_per_item >= min_votes).sum())} items have {min_votes}+ human labels; "
            f"the judge labelled {int((judge_on_item >= 0).sum())} of the people's {len(item_names)} items)"
        )
        return result

    everyone = (item, rater, label)
    item, rater, label = item[keep], rater[keep], label[keep]
    n = np.bincount(rater, minlength=len(rater_names))
    tested = np.flatnonzero(n >= min_items)
    f = judge_on_item[item]
    if reference == "dawid_skene":
        rater_agrees, judge_agrees = _consensus_agreements(everyone, item, rater, label, f, tested, label_names)
    else:
        n_labels = len(label_names)
        # How many people gave each label on each item.
        count = np.bincount(item * n_labels + label, minlength=len(item_names) * n_labels).reshape(-1, n_labels)
        # Agreements with the others of the item; the others are as many for both, so the counts
        # compare as the shares would.
        rater_agrees = count[item, label] - 1
        judge_agrees = count[item, f] - (f == label)
    judge_wins = (judge_agrees >= rater_agrees).astype(np.int64)
    rater_wins = (rater_agrees >= judge_agrees).astype(np.int64)
    d = rater_wins - judge_wins
    if len(tested):
        s1 = np.bincount(rater, weights=d, minlength=len(rater_names))[tested]
        s2 = np.bincount(rater, weights=d * d, minlength=len(rater_names))[tested]
        wins_f = np.bincount(rater, weights=judge_wins, minlength=len(rater_names))[tested]
        wins_h = np.bincount(rater, weights=rater_wins, minlength=len(rater_names))[tested]
        p = _one_sided_t_below(s1, s2, n[tested], epsilon)
        rejected = benjamini_yekutieli(p, q)
        result.raters = [
            RaterTest(
                rater=_plain(rater_names[j]),
                n_items=int(n[j]),
                judge_advantage=float(wins_f[k] / n[j]),
                rater_advantage=float(wins_h[k] / n[j]),
                p_value=float(p[k]),
                rejected=bool(rejected[k]),
            )
            for k, j in enumerate(tested)
        ]
        result.winning_rate = result.n_rejected / len(tested)
        result.advantage_probability = float(np.mean([r.judge_advantage for r in result.raters]))
    if len(tested) < min_tested:
        most_untested = int(n[n < min_items].max(initial=0))
        result.reason = (
            f"{len(tested)} of {result.n_raters} raters have {min_items} or more items with {min_votes}+ human "
            f"labels and a label of the judge ({min_tested} needed; the most any other rater has is {most_untested})"
        )
        return result
    result.passes = result.winning_rate >= 0.5
    return result


def _consensus_agreements(
    everyone: tuple[np.ndarray, np.ndarray, np.ndarray],
    item: np.ndarray,
    rater: np.ndarray,
    label: np.ndarray,
    f: np.ndarray,
    tested: np.ndarray,
    label_names: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Per kept label (``item``, ``rater``, ``label`` codes; ``f`` the judge's label code on its
    item): whether the rater and the judge give the Dawid-Skene consensus of the other raters
    (1 or 0), fitted on ``everyone``'s labels without the rater's, for the ``tested`` raters' labels
    (the others' are never tested: 0 for both)."""
    values = np.asarray(label_names, dtype=object)
    if not np.isin(values, consensus.CLASSES).all():
        odd = values[~np.isin(values, consensus.CLASSES)][0]
        raise ValueError(f"the Dawid-Skene reference needs labels +1 (A1), -1 (A2) or 0 (tie); found {odd!r}")
    all_item, all_rater, all_label = everyone
    rater_agrees = np.zeros(len(item), dtype=np.int64)
    judge_agrees = np.zeros(len(item), dtype=np.int64)
    for j in tested:
        others = all_rater != j
        found = consensus.dawid_skene(all_item[others], all_rater[others], values[all_label[others]].astype(np.int64))
        mine = np.flatnonzero(rater == j)
        at = pd.Index(found.item_ids).get_indexer(item[mine])
        # Every kept item has another rater's label (min_votes >= 2): the consensus has it.
        agreed = pd.Index(values).get_indexer(found.labels[at])
        rater_agrees[mine] = label[mine] == agreed
        judge_agrees[mine] = f[mine] == agreed
    return rater_agrees, judge_agrees


def _one_sided_t_below(s1: np.ndarray, s2: np.ndarray, n: np.ndarray, mu: float) -> np.ndarray:
    """The p-values of one-sample t-tests of H0: mean >= mu against mean < mu, from each
    sample's sum ``s1``, sum of squares ``s2`` and size ``n`` (scipy's ttest_1samp with
    ``alternative="less"``; the sums of -1/0/1 indicators are exact, so is the variance's
    numerator). A sample without variance has t = -inf or +inf: p 0 or 1, as scipy's."""
    n = n.astype(np.float64)
    mean = s1 / n
    var = (n * s2 - s1 * s1) / (n * (n - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (mean - mu) / np.sqrt(var / n)
    return special.stdtr(n - 1, t)


def benjamini_yekutieli(p_values: np.ndarray, q: float) -> np.ndarray:
    """Which nulls the Benjamini-Yekutieli step-up procedure rejects at false discovery rate q:
    the k smallest p-values, k the largest rank i with p_(i) <= i q / (m H_m), H_m the m-th
    harmonic number (valid under any dependence between the tests). A NaN p-value is never
    rejected."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    rejected = np.zeros(m, dtype=bool)
    if not m:
        return rejected
    order = np.argsort(p, kind="stable")
    harmonic = np.sum(1.0 / np.arange(1, m + 1))
    below = p[order] <= np.arange(1, m + 1) / m * (q / harmonic)
    if below.any():
        rejected[order[: np.flatnonzero(below).max() + 1]] = True
    return rejected


def _plain(value: object) -> object:
    """A numpy scalar as the Python value it holds (for messages and results)."""
    return value.item() if isinstance(value, np.generic) else value
