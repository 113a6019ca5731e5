"""The metrics of one judge, each a registered function from that judge's votes to its rows.

The estimators themselves (``analysis.metrics``, ``stats``, ``lc``, ``labels``, ``consistency``)
return their figures as they compute them; each function here runs one and writes its figures
as rows of the metric table (``analysis.rows``), in the order the report lists them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from analysis import consistency, content_blind, labels, lc, metrics
from analysis.frame import CONTROL, is_in
from analysis.rows import NUMBER, PERCENT, POINTS, Figure, Row, judge_metric, rate_row, row


@dataclass
class JudgeData:
    """What a judge's metrics read: its counted votes, its item preferences and the study's
    bootstrap over the clusters of questions (``analysis.compute`` builds it)."""

    judge: str
    kind: str
    votes: pd.DataFrame  # the judge's counted votes (analysis/frame.py documents the columns)
    prefs: pd.DataFrame | None  # its item preferences (metrics.item_preferences), with an orientation
    cluster_index: pd.Index  # every cluster (cluster_id) with a counted vote, the bootstrap's order
    counts: np.ndarray  # resamples × clusters (stats.bootstrap_counts)
    groups: list[str]  # the perturbation groups of the study
    semantics: dict[str, str]  # group → "degrading" / "preserving"
    options: object  # analysis.compute.Options
    asked: pd.DataFrame  # the counted votes plus those whose verdict was not read
    pairs: pd.DataFrame  # its order-swapped pairs (consistency.swapped_pairs)

    def row(self, metric: str, estimate: float | None, **columns) -> Row:
        return row(self.judge, self.kind, metric, estimate, **columns)

    def rate_row(self, metric: str, rate: dict, **where) -> Row:
        return rate_row(self.judge, self.kind, metric, rate, **where)

    @property
    def has_prefs(self) -> bool:
        return self.prefs is not None and bool(len(self.prefs))

    @property
    def by_bloom(self) -> bool:
        """Bloom parts are computed where there are perturbation groups to break down."""
        return bool(self.options.by_bloom and self.has_prefs and self.groups)

    @cached_property
    def asr_and_accuracy(self) -> tuple[dict, dict, dict]:
        """(asr by group, accuracy by group, {bloom: (asr, accuracy)}); every group has a rate,
        undefined (n 0) where the judge has no pair for it."""
        empty = metrics.rate(0, 0, (None, None))
        asr = {g: empty for g in self.groups}
        acc = {g: empty for g in self.groups if self.semantics[g] == "degrading"}
        parts: dict = {}
        if self.has_prefs and self.groups:
            indicators = metrics.asr_indicators(metrics.oriented_pairs(self.prefs))
            got_asr, got_acc, parts = metrics.asr_and_accuracy(
                indicators,
                self.cluster_index,
                self.counts,
                self.groups,
                self.semantics,
                by="bloom" if self.options.by_bloom else None,
            )
            asr.update(got_asr)
            acc.update(got_acc)
        return asr, acc, parts or {}

    @cached_property
    def positions(self) -> tuple[dict, dict]:
        """(position over all counted votes, {bloom: position})."""
        return metrics.positions(self.votes, by="bloom" if self.by_bloom else None)


def _asr_rows(data: JudgeData, asr: dict, acc: dict, bloom: str = "") -> list[Row]:
    out = []
    for g in data.groups:
        rate = asr.get(g, metrics.rate(0, 0, (None, None)))
        # ASR and accuracy resample the clusters of questions: n is a number of questions.
        out.append(data.rate_row("asr", {"clusters": rate["n"], **rate}, group=g, bloom=bloom))
        if data.semantics[g] == "degrading":
            rate = acc.get(g, metrics.rate(0, 0, (None, None)))
            out.append(data.rate_row("accuracy", {"clusters": rate["n"], **rate}, group=g, bloom=bloom))
    return out


@judge_metric(
    "asr",
    Figure(
        "asr",
        "ASR",
        "table1",
        PERCENT,
        "Attack success rate: the share of questions on which the perturbation moved the judge the wrong way "
        "(towards the answer with an error, or away from an answer changed only in form); lower is better.",
        "questions",
    ),
    Figure(
        "accuracy",
        "Acc",
        "table1",
        PERCENT,
        "Accuracy: the share of questions whose item with a factual error the judge decided for the answer "
        "without it (A1); higher is better.",
        "questions",
    ),
)
def asr_and_accuracy(data: JudgeData) -> list[Row]:
    """Attack success rate per perturbation group (``asr``), and accuracy for degrading ones
    (``accuracy``), over questions (n: questions; SPEC), then per Bloom level."""
    asr, acc, parts = data.asr_and_accuracy
    out = _asr_rows(data, asr, acc)
    if data.by_bloom:
        for bloom, (b_asr, b_acc) in parts.items():
            out += _asr_rows(data, b_asr, b_acc, bloom=bloom)
    return out


@judge_metric(
    "items_tied",
    label="Tied items",
    section="table1",
    format=PERCENT,
    definition="The share of the judge's items whose votes for A1 and for A2 cancel out (item preference a tie): "
    "a judge that votes by position ties every item it sees in both orders, though none of its votes is a tie; "
    "ASR counts such an item as robust.",
    base="item preferences",
)
def items_tied(data: JudgeData) -> list[Row]:
    """The share of the judge's item preferences that are ties (n: items): beside ASR, which
    counts a tie as robust."""
    return [data.rate_row("items_tied", metrics.items_tied(data.prefs))]


@judge_metric(
    "content_blind",
    Figure(
        "asr_content_blind",
        "ASR, content-blind",
        "table1",
        PERCENT,
        "The ASR a judge with this judge's position shares and no regard for the answers would score on the "
        "same design (the range of 95% of simulated studies as interval; p: the judge's own ASR against it).",
        "questions that can enter the base set",
    ),
    Figure(
        "accuracy_content_blind",
        "Acc, content-blind",
        "table1",
        PERCENT,
        "The accuracy such a content-blind judge would score (as ASR, content-blind).",
        "questions that can enter the base set",
    ),
)
def content_blind_baseline(data: JudgeData) -> list[Row]:
    """What the judge's content-blind twin would score (``analysis.content_blind``): a judge
    voting first / tie / second with this judge's position shares and no regard for the
    answers, on the same items with the same votes in each order. ``asr_content_blind`` per
    group and ``accuracy_content_blind`` per degrading group, whole study: the exact
    expectation, the range of 95% of simulated studies as interval, ``p_value`` the two-sided
    test of the judge's own figure against it (n: questions that can enter the base set); the
    position shares in ``note``."""
    if not (data.has_prefs and data.groups):
        return []
    asr, acc, _ = data.asr_and_accuracy
    observed = {("asr", g): r["value"] for g, r in asr.items()} | {("accuracy", g): r["value"] for g, r in acc.items()}
    shares, found = content_blind.judge_baselines(
        data.votes, data.prefs, data.groups, data.semantics, observed, judge=data.judge, seed=data.options.seed
    )
    if shares is None:
        return []
    first, tie, second = shares
    note = f"position shares first {first:.1%}, tie {tie:.1%}, second {second:.1%}"
    return [
        data.rate_row(
            f"{metric}_content_blind",
            rate,
            group=g,
            p_value=rate["p_value"],
            convention=content_blind.CONVENTION,
            note=note,
        )
        for (metric, g), rate in found.items()
    ]


# The row names of the position shares, by their key in metrics.positions' result.
POSITION_METRICS = {
    "first": "position_first",
    "tie": "votes_tied",
    "second": "position_second",
    "diff": "position_diff",
}


def position_rows(judge: str, kind: str, pos: dict, bloom: str = "") -> list[Row]:
    """``position_first``, ``votes_tied``, ``position_second`` (shares of votes) and
    ``position_diff`` (first − second, with the clustered test of first against second:
    ``p_value``)."""
    ci = pos.get("ci") or {}
    out = []
    for share, metric in POSITION_METRICS.items():
        out.append(
            row(
                judge,
                kind,
                metric,
                pos[share],
                ci=ci.get(share),
                n=pos["n"],
                clusters=pos.get("clusters"),
                bloom=bloom,
                p_value=pos.get("p_value") if share == "diff" else None,
            )
        )
    return out


@judge_metric(
    "position",
    Figure(
        "position_first",
        "Votes for the first shown",
        "position",
        PERCENT,
        "The share of the judge's votes, ties included, that chose the answer shown first (left, Answer 1).",
        "votes of known display order",
    ),
    Figure(
        "votes_tied",
        "Tied votes",
        "position",
        PERCENT,
        "The share of the judge's votes that were a tie (neither answer better); not the share of tied items.",
        "votes of known display order",
    ),
    Figure(
        "position_second",
        "Votes for the second shown",
        "position",
        PERCENT,
        "The share of the judge's votes, ties included, that chose the answer shown second.",
        "votes of known display order",
    ),
    Figure(
        "position_diff",
        "Diff",
        "position",
        POINTS,
        "Votes for the first shown minus votes for the second shown, in percentage points, with the clustered"
        " test of first against second (ties left out; p adjusted by Holm over the report).",
        "votes of known display order",
    ),
)
def position(data: JudgeData) -> list[Row]:
    """Shares of votes for the answer shown first / tie / second and their difference, with
    the test of first against second (n: votes whose display order is known), then per Bloom
    level where the judge has ASR parts."""
    overall, parts = data.positions
    out = position_rows(data.judge, data.kind, overall)
    if data.by_bloom:
        _, _, asr_parts = data.asr_and_accuracy
        empty = metrics.positions(data.votes.iloc[0:0])[0]
        for bloom in asr_parts:
            out += position_rows(data.judge, data.kind, parts.get(bloom, empty), bloom=bloom)
    return out


@judge_metric(
    "verbosity",
    Figure(
        "longer_wins",
        "Longer answer wins",
        "verbosity",
        PERCENT,
        "The share of votes for the longer answer, by the report's verbosity convention (a tie counts half by"
        " default; pairs of equal length left out); 50% is no preference.",
        "votes",
    ),
    Figure(
        "verbosity_bin",
        "Longer answer wins, by length difference",
        "verbosity",
        PERCENT,
        "Longer answer wins within one bin of absolute length difference (group: the bin lo-hi, the last open).",
        "votes",
    ),
)
def verbosity(data: JudgeData) -> list[Row]:
    """``longer_wins`` (the share of votes for the longer answer, by the report's verbosity
    convention) and ``verbosity_bin`` per |Δ length| bin (group "lo-hi", the last one open
    "lo-"), over the votes of the verbosity groups (n: votes)."""
    options = data.options
    votes = data.votes
    in_verbosity = is_in(votes["group"], options.verbosity_groups)
    found = metrics.verbosity(
        votes if in_verbosity.all() else votes[in_verbosity],
        measure=options.measure,
        bin_width=options.bin_width,
        convention=options.verbosity_convention,
        seed=options.seed,
    )
    convention = f"{options.verbosity_convention}; {options.measure}"
    out = [
        data.row(
            "longer_wins",
            found["longer_wins"],
            ci=found["longer_wins_ci"],
            n=found["n"],
            clusters=found["clusters"],
            convention=convention,
        )
    ]
    for b in found["bins"]:
        label = f"{b['lo']}-{'' if b['hi'] is None else b['hi']}"
        out.append(data.row("verbosity_bin", b["value"], ci=b["ci"], n=b["n"], group=label, convention=convention))
    return out


LC_METRICS = ("raw_winrate", "lc_winrate", "raw_effect", "lc_effect")


@judge_metric(
    "length_controlled",
    Figure(
        "raw_winrate",
        "Raw win rate",
        "length_controlled",
        PERCENT,
        "The win rate of A2 / A2p over A1 in the group, a tie counting half.",
        "questions",
    ),
    Figure(
        "lc_winrate",
        "LC win rate",
        "length_controlled",
        PERCENT,
        "The length-controlled win rate: the judge's predicted win rate of A2 / A2p had both answers been "
        "equally long (after Dubois et al. 2024).",
        "questions",
    ),
    Figure(
        "raw_effect",
        "Raw effect",
        "length_controlled",
        POINTS,
        "The group's raw win rate minus the control's.",
        "questions",
    ),
    Figure(
        "lc_effect",
        "LC effect",
        "length_controlled",
        POINTS,
        "The group's length-controlled win rate minus the control's.",
        "questions",
    ),
    Figure(
        "length_slope",
        "Length slope",
        "length_controlled",
        NUMBER,
        "The judge's length term in the LC model, per unit of tanh(Δlen / scale), fitted on all its items.",
        "questions",
    ),
)
def length_controlled(data: JudgeData) -> list[Row]:
    """Raw and length-controlled (LC) win rates of A2/A2p over A1 per group (a tie counts half),
    the effects of each group against the control, and the judge's length slope (``analysis.lc``;
    n: questions)."""
    if not data.has_prefs:
        return []
    prefs, options = data.prefs, data.options
    n = prefs["n"].to_numpy(dtype=float)
    y = (prefs["n_a2"].to_numpy() + 0.5 * prefs["n_tie"].to_numpy()) / np.where(n > 0, n, 1)
    measure = options.measure
    delta = prefs[f"len_a2_{measure}"].to_numpy(dtype=float) - prefs[f"len_a1_{measure}"].to_numpy(dtype=float)
    result = lc.fit(
        prefs["group"].to_numpy(),
        prefs["question_id"].to_numpy(),
        delta,
        y,
        n,
        orientation=prefs["orientation"].to_numpy(),
        control=CONTROL,
        lambdas=options.lc_lambdas,
        seed=options.seed,
        clusters=prefs["cluster_id"].to_numpy(),
    )
    if result is None:
        return []
    estimates = {
        "raw_winrate": (result.raw_winrate, result.raw_ci),
        "lc_winrate": (result.lc_winrate, result.lc_ci),
        # The effect of a perturbation: how much more the judge prefers A2p over A1 than A2 over A1.
        "raw_effect": (result.raw_effect, result.raw_effect_ci),
        "lc_effect": (result.lc_effect, result.lc_effect_ci),
    }
    out = []
    for metric in LC_METRICS:
        values, intervals = estimates[metric]
        for g, value in values.items():
            n_questions = result.n_questions.get(g)
            out.append(
                data.row(
                    metric,
                    value,
                    ci=intervals.get(g),
                    n=n_questions,
                    clusters=result.n_clusters.get(g),
                    group=g,
                    convention=measure,
                )
            )
    for g in result.groups:
        # One slope per judge, fitted on all its items (per unit of tanh(Δlen / scale)).
        out.append(
            data.row(
                "length_slope",
                result.length_slope,
                n=result.n_questions.get(g),
                group=g,
                convention=measure,
                note=f"ridge penalty {result.lam:g}",
            )
        )
    return out


@judge_metric(
    "label_and_position",
    Figure(
        "takes_first_position",
        "Decisive votes for the first shown, within items",
        "position_and_label",
        PERCENT,
        "How often the judge takes the answer shown first among its decisive votes (ties left out), within "
        "the same item and with the label held even: a modelled effect (50% no preference), not the share of "
        "all votes for the first shown.",
        "decisive votes",
    ),
    Figure(
        "position_log_odds",
        "Position effect (log-odds)",
        "position_and_label",
        NUMBER,
        "The same position effect in log-odds.",
        "decisive votes",
    ),
    Figure(
        "takes_first_label",
        "Decisive votes for the first label, within items",
        "position_and_label",
        PERCENT,
        "How often the judge takes the answer under the scheme's first label among its decisive votes, "
        "position held even (50% no preference); not identifiable where label order did not vary within "
        "items.",
        "decisive votes",
    ),
    Figure(
        "label_log_odds",
        "Label effect (log-odds)",
        "position_and_label",
        NUMBER,
        "The same label effect in log-odds.",
        "decisive votes",
    ),
)
def label_and_position(data: JudgeData) -> list[Row]:
    """Position and label effects on decisive votes (``analysis.labels``), conditional on each
    item (convention ``conditional``) and pooled (``marginal``): ``takes_first_position`` and
    ``takes_first_label`` as shares (50% = no preference), ``position_log_odds`` and
    ``label_log_odds`` in log-odds; group: the label scheme. A label effect that cannot be told
    from position has no estimate and says why (note); an identified one names its labels."""
    found = labels.label_and_position(data.votes, data.options.scheme_labels)
    if not found:
        return []
    n = found["n"]

    def effect_rows(effect: dict | None, name: str, convention: str, group: str = "", note: str = "") -> list[Row]:
        if effect is None:
            return []
        where = {"n": n, "group": group, "convention": convention, "note": note}
        return [
            data.row(f"takes_first_{name}", effect["share"], ci=effect["share_ci"], **where),
            data.row(f"{name}_log_odds", effect["log_odds"], ci=effect["ci"], **where),
        ]

    out = effect_rows(found["position"], "position", "conditional")
    for scheme, label in found["label"].items():
        if label["identifiable"]:
            names = f"{label['first_label']} / {label['second_label']}" if label["first_label"] else ""
            out += effect_rows(label, "label", "conditional", group=scheme, note=names)
        else:
            out.append(
                data.row(
                    "takes_first_label",
                    None,
                    n=n,
                    group=scheme,
                    convention="conditional",
                    note=f"not identifiable: {label['reason']}",
                )
            )
    marginal = found.get("marginal") or {}
    out += effect_rows(marginal.get("position"), "position", "marginal")
    for scheme, label in (marginal.get("label") or {}).items():
        out += effect_rows(label, "label", "marginal", group=scheme)
    return out


@judge_metric(
    "option_probs",
    Figure(
        "mean_prob_a1",
        "Mean probability on A1",
        "position_and_label",
        PERCENT,
        "The model's own probability on A1, from its token probabilities, averaged over votes: how sure it "
        "is, not how often it chose.",
        "votes with option probabilities",
    ),
    Figure(
        "mean_prob_a2",
        "Mean probability on A2 / A2p",
        "position_and_label",
        PERCENT,
        "The model's own probability on A2 / A2p, from its token probabilities, averaged over votes: how sure"
        " it is, not how often it chose.",
        "votes with option probabilities",
    ),
    Figure(
        "mean_prob_tie",
        "Mean probability on a tie",
        "position_and_label",
        PERCENT,
        "The model's own probability on a tie, from its token probabilities, averaged over votes: how sure it"
        " is, not how often it chose.",
        "votes with option probabilities",
    ),
    Figure(
        "mean_prob_first",
        "Mean probability on the answer shown first",
        "position_and_label",
        PERCENT,
        "The model's own probability on the answer shown first, from its token probabilities, averaged over "
        "votes: how sure it is, not how often it chose.",
        "votes with option probabilities and a known display order",
    ),
    Figure(
        "mean_prob_second",
        "Mean probability on the answer shown second",
        "position_and_label",
        PERCENT,
        "The model's own probability on the answer shown second, from its token probabilities, averaged over "
        "votes: how sure it is, not how often it chose.",
        "votes with option probabilities and a known display order",
    ),
)
def option_probs(data: JudgeData) -> list[Row]:
    """The model's mean probability on each option where it gave them: ``mean_prob_a1``,
    ``_a2``, ``_tie`` (n: votes with probabilities), ``mean_prob_first``, ``_second`` (n: those
    whose display order is known)."""
    found = metrics.option_probs(data.votes)
    if found is None:
        return []
    out = [data.row(f"mean_prob_{o}", found[o], n=found["n"]) for o in ("a1", "a2", "tie")]
    out += [data.row(f"mean_prob_{o}", found[o], n=found["n_order_known"]) for o in ("first", "second")]
    return out


# The metric names of the position-consistency figures, by their key in
# analysis.consistency.position_consistency's result (the dashboard's table reads them so too);
# the gold-accuracy rows are gold_accuracy_<key>.
CONSISTENCY_METRICS = {
    "consistency": "position_consistency",
    "primacy": "primacy",
    "recency": "recency",
    "first_share": "inconsistent_first_share",
}
GOLD_METRICS = ("a1_first", "a2_first", "average", "both")


def _subset_parts(found: dict) -> list[tuple[str, dict]]:
    return [("", found), *sorted((found.get("by_subset") or {}).items())] if found else []


@judge_metric(
    "position_consistency",
    Figure(
        "position_consistency",
        "Consistent",
        "consistency",
        PERCENT,
        "The share of order-swapped pairs (the same item shown both ways) whose verdict survives the swap.",
        "order-swapped pairs",
    ),
    Figure(
        "primacy",
        "First both times",
        "consistency",
        PERCENT,
        "The share of order-swapped pairs where the judge took the answer shown first both times.",
        "order-swapped pairs",
    ),
    Figure(
        "recency",
        "Second both times",
        "consistency",
        PERCENT,
        "The share of order-swapped pairs where the judge took the answer shown second both times.",
        "order-swapped pairs",
    ),
    Figure(
        "inconsistent_first_share",
        "First, of those",
        "consistency",
        PERCENT,
        "Of the pairs that followed the position (first or second both times), the share that took the answer"
        " shown first.",
        "pairs first or second both times",
    ),
    Figure(
        "preference_fairness",
        "Preference fairness",
        "consistency",
        POINTS,
        "Second both times minus first both times, in percentage points (0 is fair).",
        "order-swapped pairs",
    ),
    Figure(
        "pairs_both_unread",
        "Pairs both unread",
        "consistency",
        NUMBER,
        "Order-swapped pairs whose two verdicts could not be read (a count).",
        "order-swapped pairs",
    ),
)
def position_consistency(data: JudgeData) -> list[Row]:
    """Over order-swapped pairs (n: pairs): ``position_consistency``, ``primacy`` and
    ``recency`` (first / second both times), ``inconsistent_first_share``, and
    ``preference_fairness`` (recency − primacy); overall and by subset, where there are pairs."""
    out = []
    for subset, part in _subset_parts(consistency.position_consistency(data.asked, pairs=data.pairs)):
        if not part["consistency"]["n"]:
            continue
        for key, metric in CONSISTENCY_METRICS.items():
            out.append(data.rate_row(metric, part[key], subset=subset))
        out.append(data.row("preference_fairness", part["fairness"], n=part["consistency"]["n"], subset=subset))
        out.append(data.row("pairs_both_unread", part["both_unread"], n=part["consistency"]["n"], subset=subset))
    return out


@judge_metric(
    "gold_accuracy",
    Figure(
        "gold_accuracy_a1_first",
        "Gold accuracy, A1 first",
        "consistency",
        PERCENT,
        "The share of votes shown A1 first that chose the item's gold label (an unread verdict is wrong).",
        "votes",
    ),
    Figure(
        "gold_accuracy_a2_first",
        "Gold accuracy, A2 first",
        "consistency",
        PERCENT,
        "The share of votes shown A2 first that chose the item's gold label.",
        "votes",
    ),
    Figure(
        "gold_accuracy_average",
        "Gold accuracy, average",
        "consistency",
        PERCENT,
        "The average of the two orders' gold accuracies.",
        "order-swapped pairs",
    ),
    Figure(
        "gold_accuracy_both",
        "Correct in both orders",
        "consistency",
        PERCENT,
        "The share of order-swapped pairs correct in both orders.",
        "order-swapped pairs",
    ),
)
def gold_accuracy(data: JudgeData) -> list[Row]:
    """Accuracy against the items' gold labels (an unread verdict is not correct):
    ``gold_accuracy_a1_first``, ``_a2_first`` (n: votes), ``_average`` of the two orders and
    ``_both`` (correct in both orders; n: pairs); overall and by subset, where n > 0."""
    found = consistency.gold_accuracy(data.asked, rater=metrics.rater_codes(data.asked), pairs=data.pairs)
    out = []
    for subset, part in _subset_parts(found):
        for key in GOLD_METRICS:
            if part[key]["n"]:
                out.append(data.rate_row(f"gold_accuracy_{key}", part[key], subset=subset))
    return out


@judge_metric(
    "repetition_stability",
    label="Repetition stability",
    section="consistency",
    format=PERCENT,
    definition="The mean share of the most frequent verdict over requests asked more than once (1: the same "
    "request always gets the same verdict).",
    base="requests asked more than once",
)
def repetition_stability(data: JudgeData) -> list[Row]:
    """The mean share of the most frequent verdict over requests asked more than once (n:
    requests), where there are such requests."""
    found = consistency.repetition_stability(data.asked)
    return [data.rate_row("repetition_stability", found)] if found["n"] else []
