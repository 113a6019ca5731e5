"""The metrics of a whole study (agreement, self-preference, the chance level, people's
not-familiar votes), each a registered function from the study's data to rows of any judge
(``analysis.rows``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from analysis import alttest, calibration, consensus, metrics, selfpref, stats, vote_pairs
from analysis.frame import equals, is_in
from analysis.judge_metrics import POSITION_METRICS, position_rows
from analysis.rows import NUMBER, PERCENT, POINTS, Figure, Row, rate_row, row, study_metric

RANDOM_JUDGE = "random judge"
HUMAN_NF = "Human-NF"
HUMANS = "humans"


@dataclass
class StudyData:
    """What the study-wide metrics read (``analysis.compute`` builds it)."""

    counted: pd.DataFrame  # every counted vote
    prefs: pd.DataFrame | None  # every judge's item preferences
    prefs_by_judge: dict[str, pd.DataFrame]
    not_familiar: pd.DataFrame  # people's votes marked not familiar, with a choice
    humans: list[str]  # the judges whose votes come from people
    kinds: dict[str, str]  # judge → kind
    cluster_index: pd.Index
    counts: np.ndarray  # resamples × clusters of questions, the same as every judge's
    groups: list[str]
    semantics: dict[str, str]
    votes_per_item: int
    options: object  # analysis.compute.Options


@study_metric("human_nf_position", *POSITION_METRICS.values())
def human_nf_position(data: StudyData) -> list[Row]:
    """The position shares of people's votes marked "not familiar" (left out of every other
    figure), as a judge named Human-NF."""
    return position_rows(HUMAN_NF, "not familiar", metrics.position(data.not_familiar))


@study_metric("random_judge", "asr", "accuracy", *POSITION_METRICS.values())
def random_judge(data: StudyData) -> list[Row]:
    """The exact chance level of the study's design (metrics.random_judge): ASR, accuracy and
    position shares of a judge voting at random, with no interval and no n."""
    found = metrics.random_judge(data.votes_per_item, data.groups, data.semantics)
    out = []
    for g in data.groups:
        out.append(row(RANDOM_JUDGE, "chance level", "asr", found["asr"][g]["value"], group=g))
        if g in found["accuracy"]:
            out.append(row(RANDOM_JUDGE, "chance level", "accuracy", found["accuracy"][g]["value"], group=g))
    for share, metric in POSITION_METRICS.items():
        out.append(row(RANDOM_JUDGE, "chance level", metric, found["position"][share]))
    return out


@study_metric(
    "agreement_among_humans",
    Figure(
        "fleiss_kappa",
        "Fleiss' κ",
        "agreement",
        NUMBER,
        "Fleiss' kappa among people's votes: agreement beyond chance (1 perfect, 0 chance).",
        "items with two or more votes",
    ),
    Figure(
        "krippendorff_alpha",
        "Krippendorff's α",
        "agreement",
        NUMBER,
        "Krippendorff's alpha (nominal) among people's votes: agreement beyond chance.",
        "items with two or more votes",
    ),
)
def agreement_among_humans(data: StudyData) -> list[Row]:
    """Fleiss' kappa and Krippendorff's alpha among people's votes (n: items with two or more
    votes), with cluster-bootstrap intervals over questions."""
    counted = data.counted
    human_votes = counted[counted["judge"].isin(data.humans).to_numpy() & (counted["rater"] != "").to_numpy()]
    if not len(human_votes) or data.prefs is None or not len(data.prefs):
        return []
    item_code, item_ids = pd.factorize(human_votes["item_id"])
    choice_code = human_votes["choice"].cat.codes.to_numpy()
    table = np.bincount(item_code * 3 + choice_code, minlength=3 * (item_code.max() + 1)).reshape(-1, 3)
    item_question = np.zeros(len(item_ids), dtype=np.int64)
    item_question[item_code] = data.cluster_index.get_indexer(human_votes["cluster_id"])
    fleiss_parts, alpha_parts = stats.agreement_parts(table, item_question, len(data.cluster_index))
    n_items = int((table.sum(axis=1) >= 2).sum())
    figures = {
        "fleiss_kappa": (stats.fleiss_kappa(table), fleiss_parts, stats.fleiss_from_sums),
        "krippendorff_alpha": (stats.krippendorff_alpha_nominal(table), alpha_parts, stats.alpha_from_sums),
    }
    return [
        row(
            HUMANS,
            "human",
            metric,
            value,
            ci=stats.bootstrap_stat_ci(data.counts, parts, from_sums),
            n=n_items,
            note=f"{len(human_votes)} votes",
        )
        for metric, (value, parts, from_sums) in figures.items()
    ]


@study_metric(
    "agreement_with_human_majority",
    Figure(
        "cohen_kappa_vs_human_majority",
        "Cohen's κ vs human majority",
        "agreement",
        NUMBER,
        "Cohen's kappa of the judge's item preferences with the majority of people's votes on the same items.",
        "items",
    ),
    Figure(
        "agreement_vs_human_majority",
        "Agreement with human majority",
        "agreement",
        PERCENT,
        "The share of items on which the judge's preference equals the majority of people's votes.",
        "items",
    ),
)
def agreement_with_human_majority(data: StudyData) -> list[Row]:
    """Each other judge against the human majority on the items both rated: Cohen's kappa and
    the share of items that agree (n: items), intervals over the same question resamples."""
    prefs = data.prefs
    if prefs is None or not len(prefs):
        return []
    human_prefs = prefs[prefs["judge"].isin(data.humans).to_numpy()]
    if not len(human_prefs):
        return []
    # The human majority per item: the same preference rule over all human votes on it.
    majority = human_prefs.groupby("item_id")[["n_a1", "n_a2"]].sum()
    majority_pref = pd.Series(metrics.preference(majority["n_a1"], majority["n_a2"]), index=majority.index)
    return agreement_rows(data, majority_pref, "human_majority")


@study_metric(
    "agreement_with_human_dawid_skene",
    Figure(
        "cohen_kappa_vs_human_dawid_skene",
        "κ, consensus",
        "judges_against_people",
        NUMBER,
        "Cohen's kappa of the judge's item preferences with people's Dawid-Skene consensus (each rater "
        "weighed by their estimated reliability).",
        "items",
    ),
    Figure(
        "agreement_vs_human_dawid_skene",
        "Agreement, consensus",
        "judges_against_people",
        PERCENT,
        "The share of items on which the judge's preference equals people's Dawid-Skene consensus.",
        "items",
    ),
)
def agreement_with_human_dawid_skene(data: StudyData) -> list[Row]:
    """Each other judge against the Dawid-Skene consensus of people's raters
    (analysis.consensus: each rater weighed by their estimated reliability), as
    ``agreement_with_human_majority`` does against the majority: ``cohen_kappa_vs_human_dawid_skene``
    and ``agreement_vs_human_dawid_skene`` (n: items). Votes without a rater are left out."""
    found = human_consensus(data)
    if found is None:
        return []
    return agreement_rows(data, pd.Series(found.labels, index=found.item_ids), "human_dawid_skene")


@study_metric(
    "calibration",
    Figure(
        "calibration_ece",
        "ECE",
        "judges_against_people",
        NUMBER,
        "Expected calibration error over 10 bins: how far the judge's confidence in its choice is from how "
        "often it is right (0 calibrated).",
        "votes",
    ),
    Figure(
        "calibration_brier",
        "Brier",
        "judges_against_people",
        NUMBER,
        "The Brier score of the judge's confidence in its choice (0 best).",
        "votes",
    ),
    Figure(
        "calibration_bin_confidence",
        "Mean confidence, by bin",
        "judges_against_people",
        PERCENT,
        "The judge's mean confidence within one confidence bin (group: the bin), for the reliability curve.",
        "votes",
    ),
    Figure(
        "calibration_bin_accuracy",
        "Share right, by bin",
        "judges_against_people",
        PERCENT,
        "The share of the judge's votes right within one confidence bin (group: the bin).",
        "votes",
    ),
)
def calibration_rows(data: StudyData) -> list[Row]:
    """Does each other judge know when it is unsure? (analysis.calibration) ``calibration_ece``
    (10 equal-width bins) and ``calibration_brier`` of the confidence in the option it chose,
    n: votes; convention: where the confidence comes from and the reference (each vote's item's
    gold label where it has one, else people's Dawid-Skene consensus); the note says how many
    votes met each reference; intervals: percentile cluster bootstrap over the questions. A judge with neither option probabilities nor repeated votes, or
    no vote with a reference, gets an estimate of None and a note saying so."""
    counted = data.counted
    found = human_consensus(data)
    consensus_label = (
        pd.Series(
            np.array(["a1", "a2", "tie"], dtype=object)[np.select([found.labels == 1, found.labels == -1], [0, 1], 2)],
            index=found.item_ids,
        )
        if found is not None
        else pd.Series(dtype=object)
    )
    out = []
    for name in sorted(data.kinds):
        if name in data.humans:
            continue
        votes = counted[equals(counted["judge"], name)]
        at, confidence, source = calibration.vote_confidence(votes)
        gold = votes["gold_label"].to_numpy(dtype=object)[at]
        by_consensus = consensus_label.reindex(votes["item_id"].to_numpy()[at]).fillna("").to_numpy(dtype=object)
        reference = np.where(gold != "", gold, by_consensus)
        used = reference != ""
        n_gold, n_consensus = int((gold != "").sum()), int((used & (gold == "")).sum())
        right = votes["choice"].to_numpy(dtype=object)[at][used] == reference[used]
        result = calibration.calibration(confidence[used], right)
        refs = [r for r, k in (("gold", n_gold), ("dawid_skene", n_consensus)) if k]
        if source == calibration.NOT_APPLICABLE:
            note = calibration.NOT_APPLICABLE
        elif not result.n:
            note = "no vote on an item with a gold label or people's votes"
        else:
            note = f"{n_gold} votes against gold labels, {n_consensus} against people's Dawid-Skene consensus"
        where = {"convention": f"{source}; reference: {'+'.join(refs) or 'none'}", "note": note}
        kind = data.kinds[name]
        clusters = data.cluster_index.get_indexer(votes["cluster_id"].to_numpy()[at][used])
        ece_ci, brier_ci = calibration.calibration_intervals(confidence[used], right, clusters, data.counts)
        n_clusters = len(np.unique(clusters)) if result.n else None
        out += [
            row(name, kind, "calibration_ece", result.ece, ci=ece_ci, n=result.n, clusters=n_clusters, **where),
            row(name, kind, "calibration_brier", result.brier, ci=brier_ci, n=result.n, clusters=n_clusters, **where),
        ]
        for b in result.curve:  # the reliability curve (plots.reliability)
            group = f"{b['low']:.1f}-{b['high']:.1f}"
            out += [
                row(name, kind, "calibration_bin_confidence", b["confidence"], n=b["n"], group=group, **where),
                row(name, kind, "calibration_bin_accuracy", b["accuracy"], n=b["n"], group=group, **where),
            ]
    return out


def human_consensus(data: StudyData) -> consensus.Consensus | None:
    """The Dawid-Skene consensus of people's labels (one per rater and item), None without any."""
    counted = data.counted
    human_votes = counted[is_in(counted["judge"], data.humans)] if data.humans else counted.iloc[0:0]
    items, raters, labels = human_labels(human_votes)
    return consensus.dawid_skene(items, raters, labels) if len(items) else None


def agreement_rows(data: StudyData, reference: pd.Series, against: str) -> list[Row]:
    """Cohen's kappa and raw agreement of each non-human judge's item preferences with the
    reference labels (+1/-1/0 by item id), named ``cohen_kappa_vs_<against>`` and
    ``agreement_vs_<against>``."""
    prefs, cluster_index, counts = data.prefs, data.cluster_index, data.counts
    out = []
    for name in sorted(data.kinds):
        if name in data.humans:
            continue
        own_prefs = data.prefs_by_judge.get(name, prefs.iloc[0:0]).set_index("item_id")
        common = own_prefs.index.intersection(reference.index)
        a, b = own_prefs.loc[common, "pref"].to_numpy(), reference.loc[common].to_numpy()
        question = cluster_index.get_indexer(own_prefs.loc[common, "cluster_id"])
        # Items that agree per question, over the same question resamples as kappa's.
        agree = np.bincount(question, weights=(a == b), minlength=len(cluster_index))
        rated = np.bincount(question, minlength=len(cluster_index)).astype(np.float64)
        kind = data.kinds[name]
        kappa_ci = stats.bootstrap_stat_ci(
            counts, stats.confusion_parts(a, b, question, len(cluster_index)), stats.cohen_from_sums
        )
        out.append(row(name, kind, f"cohen_kappa_vs_{against}", stats.cohen_kappa(a, b), ci=kappa_ci, n=len(common)))
        out.append(
            row(
                name,
                kind,
                f"agreement_vs_{against}",
                float((a == b).mean()) if len(common) else None,
                ci=stats.bootstrap_ratio_ci(counts, agree[:, None], rated[:, None])[0],
                n=len(common),
            )
        )
    return out


@study_metric(
    "spearman_rho",
    Figure(
        "spearman_rho",
        "Spearman ρ (item scores)",
        "agreement",
        NUMBER,
        "Spearman's rank correlation between two judges' mean item scores over the items both rated (judge "
        "and group: the two judges).",
        "items",
    ),
)
def spearman(data: StudyData) -> list[Row]:
    """Spearman's rho between every two judges' mean item scores over the items both rated
    (judge and group: the two judges; n: items)."""
    prefs = data.prefs
    if prefs is None or not len(prefs):
        return []
    item_code, _ = pd.factorize(prefs["item_id"])
    judge_code, names = pd.factorize(prefs["judge"].astype(str))
    mean_score = np.full((item_code.max() + 1, len(names)), np.nan)
    mean_score[item_code, judge_code] = (prefs["score"] / prefs["n"]).to_numpy()
    return [
        row(names[i], data.kinds.get(names[i], ""), "spearman_rho", rho, n=n, group=names[j])
        for i, j, rho, n in stats.spearman_pairs(mean_score)
    ]


@study_metric(
    "vote_pair_agreement",
    Figure(
        "vote_pairs_with_ties",
        "Vote pairs agreeing, with ties (S1)",
        "agreement",
        PERCENT,
        "Zheng et al.'s agreement: the share of pairs of votes on an item that agree, ties kept.",
        "pairs of votes",
    ),
    Figure(
        "vote_pairs_without_ties",
        "Vote pairs agreeing, without ties (S2)",
        "agreement",
        PERCENT,
        "Zheng et al.'s agreement over pairs of votes neither of which is a tie.",
        "pairs of votes",
    ),
)
def vote_pair_agreement(data: StudyData) -> list[Row]:
    """Agreement over pairs of votes as Zheng et al. count it: every pair of votes on an item,
    ``vote_pairs_with_ties`` (S1) and ``vote_pairs_without_ties`` (S2); people among themselves
    (judge "humans") and each other judge against people (group "humans"); n: pairs of votes."""
    found = vote_pairs.vote_pair_agreement(
        data.counted, data.humans, counts=data.counts, cluster_index=data.cluster_index
    )
    parts = []
    if found["among_humans"]:
        parts.append((HUMANS, "human", found["among_humans"]))
    parts += [(name, data.kinds.get(name, ""), p) for name, p in found["vs_humans"].items()]
    return [
        rate_row(name, kind, f"vote_pairs_{convention}", part[convention], group=HUMANS)
        for name, kind, part in parts
        for convention in ("with_ties", "without_ties")
    ]


@study_metric(
    "self_preference",
    Figure(
        "self_preference_own",
        "Own family wins, this judge",
        "self_preference",
        PERCENT,
        "How often the judge prefers the answer of its own model family (a tie counts half).",
        "items",
    ),
    Figure(
        "self_preference_others",
        "Own family wins, other judges",
        "self_preference",
        PERCENT,
        "How often judges outside the family prefer that family's answer on the same pairs.",
        "items",
    ),
    Figure(
        "self_preference_difference",
        "Self-preference difference",
        "self_preference",
        POINTS,
        "This judge's own-family win rate minus the other judges', in percentage points.",
        "items",
    ),
)
def self_preference(data: StudyData) -> list[Row]:
    """Where answers name the system that wrote them: how often a judge prefers its own
    family's answer (``self_preference_own``), other judges on the same pairs (``_others``),
    and the difference (``_difference``, question bootstrap); group: the family; n: items."""
    found = selfpref.self_preference(data.counted, counts=data.counts, cluster_index=data.cluster_index)
    out = []
    for name, sp in found.items():
        if not sp["n_items"]:
            continue
        kind = data.kinds.get(name, "")
        for key in ("own", "others"):
            out.append(rate_row(name, kind, f"self_preference_{key}", sp[key], group=sp["family"]))
        out.append(
            row(
                name,
                kind,
                "self_preference_difference",
                sp["difference"],
                ci=sp["difference_ci"],
                n=sp["n_items"],
                group=sp["family"],
            )
        )
    return out


@study_metric(
    "alt_test",
    Figure(
        "alt_test_winning_rate",
        "ω",
        "judges_against_people",
        PERCENT,
        "The Alternative Annotator Test's winning rate: the share of tested raters the judge beats (passes at"
        " 50% or more).",
        "raters tested",
    ),
    Figure(
        "alt_test_advantage_probability",
        "ρ",
        "judges_against_people",
        PERCENT,
        "The advantage probability: how often the judge does at least as well as the rater left out.",
        "raters tested",
    ),
    Figure(
        "alt_test_passes",
        "Alt-test passes",
        "judges_against_people",
        NUMBER,
        "1 where the judge passes the Alternative Annotator Test, 0 where it fails, none without a verdict.",
        "items used",
    ),
)
def alt_test(data: StudyData) -> list[Row]:
    """The Alternative Annotator Test of every other judge against the people's raters
    (analysis.alttest): ``alt_test_winning_rate`` (omega; n: raters tested),
    ``alt_test_advantage_probability`` (rho; n: raters tested) and ``alt_test_passes`` (1
    passes, 0 fails, None without a verdict; n: items used), each with epsilon (and a reference
    other than the raters', ``; reference=dawid_skene``) as its convention and the verdict, or why there is none, as its note. A rater's label on an item
    is their vote (votes by the same rater on one item: the item preference rule); the judge's
    is its item preference (metrics.preference)."""
    counted, options = data.counted, data.options
    human_votes = counted[is_in(counted["judge"], data.humans)] if data.humans else counted.iloc[0:0]
    if not len(human_votes):
        return []
    epsilon = options.alt_test_epsilon
    items, raters, labels = human_labels(human_votes)
    out = []
    for name in sorted(data.kinds):
        if name in data.humans:
            continue
        prefs = data.prefs_by_judge.get(name)
        judge_items = prefs["item_id"].to_numpy() if prefs is not None else np.zeros(0, dtype=np.int64)
        judge_labels = prefs["pref"].to_numpy() if prefs is not None else np.zeros(0, dtype=np.int8)
        found = alttest.alt_test(
            items,
            raters,
            labels,
            judge_items,
            judge_labels,
            epsilon=epsilon,
            min_votes=options.alt_min_votes,
            min_items=options.alt_min_items,
            reference=options.alt_reference,
        )
        convention = f"epsilon={epsilon:g}"
        if options.alt_reference != "raters":
            convention += f"; reference={options.alt_reference}"
        where = {"convention": convention, "note": found.verdict}
        kind = data.kinds[name]
        out += [
            row(name, kind, "alt_test_winning_rate", found.winning_rate, n=found.n_tested, **where),
            row(name, kind, "alt_test_advantage_probability", found.advantage_probability, n=found.n_tested, **where),
            row(
                name,
                kind,
                "alt_test_passes",
                None if found.passes is None else float(found.passes),
                n=found.n_items,
                **where,
            ),
        ]
    return out


def human_labels(human_votes: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(item, rater, label) of each rater's label on each item they voted on: +1 A1, -1 A2, 0
    tie, several votes of one rater on an item by the item preference rule. Raters are keyed by
    their judge too (two human pools may both have a rater R1); votes without a rater are left
    out (no one to leave out)."""
    with_rater = ~equals(human_votes["rater"], "")
    votes = human_votes[with_rater]
    if not len(votes):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    judge_code = pd.factorize(votes["judge"])[0].astype(np.int64)
    rater_code, _ = pd.factorize(votes["rater"])
    rater = judge_code * (int(rater_code.max()) + 1) + rater_code
    n_a1, n_a2 = equals(votes["choice"], "a1").astype(np.int64), equals(votes["choice"], "a2").astype(np.int64)
    item_code, item_ids = pd.factorize(votes["item_id"].to_numpy(dtype=np.int64))
    code, pairs = pd.factorize(item_code.astype(np.int64) * (int(rater.max()) + 1) + rater)
    a1 = np.bincount(code, weights=n_a1, minlength=len(pairs))
    a2 = np.bincount(code, weights=n_a2, minlength=len(pairs))
    return item_ids[pairs // (int(rater.max()) + 1)], pairs % (int(rater.max()) + 1), metrics.preference(a1, a2)
