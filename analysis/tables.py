"""The dashboard's tables: the report's metric table (``report["rows"]``, ``analysis.rows``)
reshaped for display, one shape per section of the page (the paper's Table 1 and Table 2, the
agreement, verbosity, length-controlled, position-and-label, consistency and Bloom tables).

Pure functions of the report dict. They read its rows through the lookups of ``analysis.rows``
and, beside them, the report's ``judges``, ``groups``, ``filters``, ``tests`` and
``conventions``; the templates and the figures (``analysis.plots``) read these shapes, never
the rows. A rate in a shape is ``rows.as_rate``'s ``{value, ci: [lo, hi], n, clusters}``.
"""

from __future__ import annotations

from collections import defaultdict

from analysis import content_blind, rows, stats
from analysis.judge_metrics import CONSISTENCY_METRICS, GOLD_METRICS, POSITION_METRICS
from analysis.rows import Row, as_rate, estimate, one, select
from analysis.rows import by_judge as rows_by_judge
from analysis.study_metrics import HUMAN_NF, HUMANS, RANDOM_JUDGE

BLOOM_ORDER = ("remembering", "understanding", "applying", "analyzing", "evaluating", "creating")
POSITION_SHARES = ("first", "tie", "second", "diff")
NOT_IDENTIFIABLE = "not identifiable: "


def _by_judge(result: dict) -> dict[str, list[Row]]:
    """Each judge's rows (rows.by_judge), [] for a judge without any."""
    return defaultdict(list, rows_by_judge(result["rows"]))


def _cell(found: Row | None, rank: int | None = None, *, blind: Row | None = None) -> dict:
    """A rate as a table cell: value, interval (ci, and lo / hi beside it), n and rank; with
    its content-blind baseline, ``blind`` (its value, range and p-value) and ``no_rank`` (why
    it has no rank: it does not differ from the baseline), else None."""
    rate = as_rate(found)
    cell = {**rate, "lo": rate["ci"][0], "hi": rate["ci"][1], "rank": rank, "blind": None, "no_rank": None}
    if blind is not None and blind["estimate"] is not None:
        cell["blind"] = {**as_rate(blind), "p_value": blind["p_value"]}
        if rate["value"] is not None and not content_blind.differs(blind):
            cell["no_rank"] = content_blind.NO_BETTER
    return cell


def position_dominated_reasons(mine: list[Row]) -> list[str]:
    """Why a judge is position-dominated (its ``position_dominated`` row's reasons), or []."""
    found = one(mine, metric="position_dominated")
    return found["note"].split("; ") if found and found["estimate"] else []


def columns(result: dict) -> list[dict]:
    """Table 1 columns: ASR for every perturbation, accuracy for degrading ones; with a group
    filter, only the groups it keeps (the others would be columns of n/a, a study of the whole
    catalogue has over ten)."""
    kept = set(result.get("filters", {}).get("groups") or [])
    cols = []
    for g in result["groups"]:
        if kept and g["group"] not in kept:
            continue
        cols.append({"group": g["group"], "metric": "asr", "label": f"ASR {g['group']}", "better": "lower"})
        if g["semantics"] == "degrading":
            cols.append({"group": g["group"], "metric": "accuracy", "label": f"Acc {g['group']}", "better": "higher"})
    return cols


def _blind(mine: list[Row], c: dict) -> Row | None:
    """The judge's content-blind baseline of a Table 1 column (analysis.content_blind)."""
    return one(mine, metric=f"{c['metric']}_content_blind", group=c["group"], bloom="")


def _ranks(by_judge: dict[str, list[Row]], judges: list[dict], cols: list[dict]) -> dict[tuple, int | None]:
    """(judge, metric, group) → rank among the judges not position-dominated (a flagged judge
    has none: its ASR would put it first for voting by position) whose figure differs from
    their content-blind baseline in that column (one that does not is no better than ignoring
    the answers: content_blind.differs)."""
    ranked = [j["judge"] for j in judges if not position_dominated_reasons(by_judge[j["judge"]])]
    out: dict[tuple, int | None] = {}
    for c in cols:
        values = {
            name: estimate(by_judge[name], metric=c["metric"], group=c["group"], bloom="")
            for name in ranked
            if content_blind.differs(_blind(by_judge[name], c))
        }
        for name, rank in stats.ranks(values, lower_is_better=c["better"] == "lower").items():
            out[(name, c["metric"], c["group"])] = rank
    return out


def table1(result: dict, part: str | None = None) -> dict:
    """Rows of judges (then the random judge) with value, interval, n and rank per column.
    ``part`` selects a Bloom level's breakdown instead of the whole study (no ranks, no ties)."""
    cols = columns(result)
    by_judge = _by_judge(result)
    bloom = part or ""
    ranks = _ranks(by_judge, result["judges"], cols) if part is None else {}
    out = []
    for judge in result["judges"]:
        name, mine = judge["judge"], by_judge[judge["judge"]]
        if part is not None and one(mine, metric="asr", bloom=part) is None:
            continue
        ties = one(mine, metric="items_tied") if part is None else None
        # A Bloom level's votes, not the judge's total: its counted votes with a choice.
        n_votes = judge["n_votes"] if part is None else _position(mine, part)["n"]
        out.append(
            {
                "judge": name,
                "kind": judge["kind"],
                "n_votes": n_votes,
                "cells": [
                    _cell(
                        one(mine, metric=c["metric"], group=c["group"], bloom=bloom),
                        ranks.get((name, c["metric"], c["group"])),
                        blind=_blind(mine, c) if part is None else None,
                    )
                    for c in cols
                ],
                # The whole study's: a judge voting by position ties a lot, and ASR counts a tie as robust.
                "ties": _cell(ties) if ties else None,
                "position_dominated": position_dominated_reasons(mine),
            }
        )
    chance = by_judge[RANDOM_JUDGE]
    cells = [_cell(one(chance, metric=c["metric"], group=c["group"])) for c in cols]
    out.append({"judge": RANDOM_JUDGE, "kind": "chance level", "n_votes": None, "cells": cells, "chance": True})
    return {"columns": cols, "rows": out, "with_ties": part is None}


def _position(mine: list[Row], bloom: str = "") -> dict:
    """A judge's position shares: first, tie, second, diff, their intervals (``ci``: share →
    [lo, hi]), n, clusters, and the test of first against second (p_value, p_adjusted)."""
    shares = {s: as_rate(one(mine, metric=POSITION_METRICS[s], bloom=bloom)) for s in POSITION_SHARES}
    diff = one(mine, metric=POSITION_METRICS["diff"], bloom=bloom) or {}
    return {
        **{s: rate["value"] for s, rate in shares.items()},
        "ci": {s: rate["ci"] for s, rate in shares.items()},
        "n": shares["first"]["n"],
        "clusters": shares["first"]["clusters"],
        "p_value": diff.get("p_value"),
        "p_adjusted": diff.get("p_adjusted"),
    }


def table2(result: dict) -> list[dict]:
    """Position shares of every judge, then of people's not-familiar votes (Human-NF), then the
    random judge's chance level."""
    by_judge = _by_judge(result)
    out = [{"judge": j["judge"], "kind": j["kind"], **_position(by_judge[j["judge"]])} for j in result["judges"]]
    out.append({"judge": HUMAN_NF, "kind": "not familiar", **_position(by_judge[HUMAN_NF])})
    out.append({"judge": RANDOM_JUDGE, "kind": "chance level", **_position(by_judge[RANDOM_JUDGE]), "chance": True})
    return out


def bloom_position_rows(result: dict) -> list[dict]:
    """Position shares per (judge, Bloom level), where the judge has Bloom parts."""
    by_judge = _by_judge(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        for r in mine:
            if r["metric"] == "position_diff" and r["bloom"]:
                out.append({"judge": judge["judge"], "bloom": r["bloom"], **_position(mine, r["bloom"])})
    return out


def blooms(result: dict) -> list[str]:
    """The Bloom levels the report breaks ASR and accuracy down by, in Bloom's order."""
    seen = {r["bloom"] for r in select(result["rows"], metric="asr") if r["bloom"]}
    return [b for b in BLOOM_ORDER if b in seen]


def bloom_rates(result: dict) -> list[dict]:
    """ASR and accuracy by Bloom level: per (judge, Table 1 column) {judge, metric, group,
    label, cells: its rate at each level of ``blooms`` (n 0 where the judge has no such part),
    each with its ``bloom``}."""
    by_judge = _by_judge(result)
    levels = blooms(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        for c in columns(result):
            cells = [{"bloom": b, **as_rate(one(mine, metric=c["metric"], group=c["group"], bloom=b))} for b in levels]
            out.append(
                {
                    "judge": judge["judge"],
                    "metric": c["metric"],
                    "group": c["group"],
                    "label": c["label"],
                    "cells": cells,
                }
            )
    return out


def _effect(found: Row | None) -> dict | None:
    return None if found is None else {"share": found["estimate"], "share_ci": [found["ci_lo"], found["ci_hi"]]}


def label_rows(result: dict) -> list[dict]:
    """One row per (judge, label scheme) of the position-and-label table: the conditional
    position and label effects where the label order varied within items, else ``split``
    False and the reason (people, older runs: the two cannot be told apart, and the position
    alone is in the positional table)."""
    by_judge = _by_judge(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        position = one(mine, metric="takes_first_position", convention="conditional")
        for label in select(mine, metric="takes_first_label", convention="conditional"):
            split = not label["note"].startswith(NOT_IDENTIFIABLE)
            out.append(
                {
                    "judge": judge["judge"],
                    "labels": (label["note"] or label["group"]) if split else label["group"],
                    "split": split,
                    "position": _effect(position) if split else None,
                    "label": _effect(label) if split else None,
                    "reason": None if split else label["note"].removeprefix(NOT_IDENTIFIABLE),
                    "n": label["n"],
                }
            )
    return out


LC_COLUMNS = (("raw", "raw_winrate"), ("lc", "lc_winrate"), ("raw_effect", "raw_effect"), ("lc_effect", "lc_effect"))


def lc_rows(result: dict) -> list[dict]:
    """One row per (judge, group): raw and length-controlled win rates and effects, each with
    its interval (lo/hi keys beside the value), the length slope and the questions behind it."""
    by_judge = _by_judge(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        for winrate in select(mine, metric="lc_winrate"):
            g = winrate["group"]
            row = {"judge": judge["judge"], "group": g, "slope": estimate(mine, metric="length_slope", group=g)}
            row["n"] = winrate["n"]
            for name, metric in LC_COLUMNS:
                rate = as_rate(one(mine, metric=metric, group=g))
                row.update({name: rate["value"], f"{name}_lo": rate["ci"][0], f"{name}_hi": rate["ci"][1]})
            out.append(row)
    return out


def verbosity_rows(result: dict) -> list[dict]:
    """Per judge: the share of votes for the longer answer (``longer_wins``, a rate) and the
    same by |Δ length| bin (``bins``: lo, hi, None for the open last bin, and the rate)."""
    by_judge = _by_judge(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        bins = []
        for b in select(mine, metric="verbosity_bin"):
            lo, hi = b["group"].split("-")
            bins.append({"lo": int(lo), "hi": int(hi) if hi else None, **as_rate(b)})
        out.append({"judge": judge["judge"], "longer_wins": as_rate(one(mine, metric="longer_wins")), "bins": bins})
    return out


def spearman_pairs(result: dict) -> list[dict]:
    """Spearman's rho of every two judges' item scores: {a, b, rho, n (items)}."""
    return [
        {"a": r["judge"], "b": r["group"], "rho": r["estimate"], "n": r["n"]}
        for r in select(result["rows"], metric="spearman_rho")
    ]


def _vote_pairs(found: Row | None) -> dict:
    """Agreement over vote pairs as a rate, with the agreeing pairs (``agree``) of its n."""
    rate = as_rate(found)
    agree = round(rate["value"] * rate["n"]) if rate["value"] is not None else 0
    return {**rate, "agree": agree}


def agreement(result: dict) -> dict:
    """The agreement section: ``among_humans`` (Krippendorff's alpha and Fleiss' kappa as rates,
    ``n_items``; None without two human votes on an item), ``vs_human_majority`` (per other
    judge: Cohen's kappa, agreement, n items), ``spearman`` (spearman_pairs) and ``vote_pairs``
    (Zheng et al.: ``among_humans`` and per judge ``vs_humans``, with_ties / without_ties)."""
    table = result["rows"]
    alpha = one(table, judge=HUMANS, metric="krippendorff_alpha")
    among_humans = None
    if alpha is not None:
        fleiss = one(table, judge=HUMANS, metric="fleiss_kappa")
        among_humans = {"krippendorff_alpha": as_rate(alpha), "fleiss_kappa": as_rate(fleiss), "n_items": alpha["n"]}
    agreements = {r["judge"]: r for r in select(table, metric="agreement_vs_human_majority")}
    vs_majority = [
        {"judge": k["judge"], "cohen_kappa": as_rate(k), "agreement": as_rate(agreements.get(k["judge"])), "n": k["n"]}
        for k in select(table, metric="cohen_kappa_vs_human_majority")
    ]
    without_ties = {r["judge"]: r for r in select(table, metric="vote_pairs_without_ties", group=HUMANS)}
    pairs = [
        {"judge": r["judge"], "with_ties": _vote_pairs(r), "without_ties": _vote_pairs(without_ties.get(r["judge"]))}
        for r in select(table, metric="vote_pairs_with_ties", group=HUMANS)
    ]
    humans = next((p for p in pairs if p["judge"] == HUMANS), None)
    return {
        "among_humans": among_humans,
        "vs_human_majority": vs_majority,
        "spearman": spearman_pairs(result),
        "vote_pairs": {"among_humans": humans, "vs_humans": [p for p in pairs if p["judge"] != HUMANS]},
    }


def self_preference_rows(result: dict) -> list[dict]:
    """Per judge with pairs of its own family's answer against another's: {judge, family, own,
    others, difference (rates), n_items}."""
    by_judge = _by_judge(result)
    out = []
    for own in select(result["rows"], metric="self_preference_own"):
        mine = by_judge[own["judge"]]
        difference = as_rate(one(mine, metric="self_preference_difference"))
        out.append(
            {
                "judge": own["judge"],
                "family": own["group"],
                "own": as_rate(own),
                "others": as_rate(one(mine, metric="self_preference_others")),
                "difference": difference,
                "n_items": difference["n"],
            }
        )
    return out


def option_prob_rows(result: dict) -> list[dict]:
    """Per judge that gave token probabilities: its mean probability on A1, A2, tie (over ``n``
    votes) and on the answer shown first and second (over ``n_order_known``)."""
    by_judge = _by_judge(result)
    out = []
    for judge in result["judges"]:
        mine = by_judge[judge["judge"]]
        a1, first = one(mine, metric="mean_prob_a1"), one(mine, metric="mean_prob_first")
        if a1 is None:
            continue
        row = {o: estimate(mine, metric=f"mean_prob_{o}") for o in ("a1", "a2", "tie", "first", "second")}
        out.append({"judge": judge["judge"], **row, "n": a1["n"], "n_order_known": first["n"] if first else 0})
    return out


def _consistency(mine: list[Row], subset: str) -> dict:
    """The consistency table's figures of one judge and subset ("" for all): rates of
    consistency, primacy, recency, first_share; fairness; both_unread; gold (the gold-label
    accuracy rates a1_first, a2_first, average, both)."""

    def rate(metric: str) -> dict:
        return as_rate(one(mine, metric=metric, subset=subset))

    both_unread = estimate(mine, metric="pairs_both_unread", subset=subset)
    return {
        **{key: rate(metric) for key, metric in CONSISTENCY_METRICS.items()},
        "fairness": estimate(mine, metric="preference_fairness", subset=subset),
        "both_unread": None if both_unread is None else int(both_unread),
        "gold": {key: rate(f"gold_accuracy_{key}") for key in GOLD_METRICS},
    }


# A judge is in the consistency table when it has one of these rows: order-swapped pairs or gold labels.
CONSISTENCY_TABLE_EVIDENCE = (CONSISTENCY_METRICS["consistency"], *(f"gold_accuracy_{key}" for key in GOLD_METRICS))


def consistency_rows(result: dict) -> tuple[list[dict], list[dict]]:
    """Judges with order-swapped pairs or gold labels, overall and by subset: (rows, subset
    rows), each {judge, subset, consistency, primacy, recency, first_share, fairness,
    both_unread, gold}, the overall row also the repetition ``stability``. Judges the data says
    nothing about are left out."""
    by_judge = _by_judge(result)
    out, subset_rows = [], []
    for judge in result["judges"]:
        name, mine = judge["judge"], by_judge[judge["judge"]]
        found = select(mine, metric=CONSISTENCY_TABLE_EVIDENCE)
        if not any(r["subset"] == "" for r in found):
            continue
        stability = as_rate(one(mine, metric="repetition_stability"))
        out.append({"judge": name, "subset": "", **_consistency(mine, ""), "stability": stability})
        for subset in sorted({r["subset"] for r in found if r["subset"]}):
            subset_rows.append({"judge": name, "subset": subset, **_consistency(mine, subset)})
    return out, subset_rows


ALT_TEST_METRICS = ("alt_test_winning_rate", "alt_test_advantage_probability", "alt_test_passes")


def judges_against_people(result: dict) -> list[dict]:
    """The "Judges against people" section: per judge with an alt-test, an agreement with
    people's Dawid-Skene consensus or a calibration against a reference, {judge, verdict (the
    note: passes, fails or "no verdict: why"; "—" without an alt-test), passes (True, False or
    None), winning_rate, advantage_probability, epsilon, n_tested (raters), n_items,
    consensus_kappa, consensus_agreement (rates), calibration ({ece, ece_ci, brier, brier_ci, n, source, note}),
    ppi_votes ({effective, n}: PPI's human-equivalent votes for people's position difference,
    and the human votes cast; None without)}."""
    out = []
    for judge, mine in _by_judge(result).items():
        verdict = one(mine, metric="alt_test_passes")
        kappa = one(mine, metric="cohen_kappa_vs_human_dawid_skene")
        ece = one(mine, metric="calibration_ece")
        ppi_votes = one(mine, metric="ppi_effective_votes", group="position")
        if verdict is None and kappa is None and (ece is None or not ece["n"]) and ppi_votes is None:
            continue
        verdict = verdict or {"estimate": None, "note": "—", "convention": "", "n": None}
        passes = None if verdict["estimate"] is None else bool(verdict["estimate"])
        winning = one(mine, metric="alt_test_winning_rate") or {}
        calibration = None
        if ece is not None:
            brier = one(mine, metric="calibration_brier") or {}
            calibration = {
                "ece": ece["estimate"],
                "ece_ci": [ece["ci_lo"], ece["ci_hi"]],
                "brier": brier.get("estimate"),
                "brier_ci": [brier.get("ci_lo"), brier.get("ci_hi")],
                "n": ece["n"],
                "source": ece["convention"],
                "note": ece["note"],
            }
        out.append(
            {
                "judge": judge,
                "verdict": verdict["note"],
                "passes": passes,
                "winning_rate": winning.get("estimate"),
                "advantage_probability": estimate(mine, metric="alt_test_advantage_probability"),
                "epsilon": verdict["convention"].split(";")[0].removeprefix("epsilon="),
                "n_tested": winning.get("n"),
                "n_items": verdict["n"],
                "consensus_kappa": as_rate(kappa),
                "consensus_agreement": as_rate(one(mine, metric="agreement_vs_human_dawid_skene")),
                "calibration": calibration,
                "ppi_votes": ppi_votes and {"effective": ppi_votes["estimate"], "n": ppi_votes["n"]},
            }
        )
    return out


# The figures the hand-made tables above (and the page's figures) show. Every other figure is
# listed in its section's table of further figures (``section_figures``), so that a new metric
# shows on the dashboard with no change here; a test holds these names to the declared ones.
SHOWN_BY_TABLES = frozenset(
    {
        "asr",
        "accuracy",
        "items_tied",
        "asr_content_blind",
        "accuracy_content_blind",
        "position_dominated",
        *POSITION_METRICS.values(),
        "fleiss_kappa",
        "krippendorff_alpha",
        "cohen_kappa_vs_human_majority",
        "agreement_vs_human_majority",
        "spearman_rho",
        "vote_pairs_with_ties",
        "vote_pairs_without_ties",
        *ALT_TEST_METRICS,
        "cohen_kappa_vs_human_dawid_skene",
        "agreement_vs_human_dawid_skene",
        "calibration_ece",
        "calibration_brier",
        "calibration_bin_confidence",
        "calibration_bin_accuracy",
        *CONSISTENCY_METRICS.values(),
        "preference_fairness",
        "pairs_both_unread",
        *(f"gold_accuracy_{key}" for key in GOLD_METRICS),
        "repetition_stability",
        "bt_rating",
        "bt_rating_style",
        "style_coef",
        "rank_spearman",
        "rank_kendall",
        "rank_reversal",
        "mixed_effect",
        "mixed_position",
        "mixed_sd_rater",
        "mixed_sd_question",
        "self_preference_own",
        "self_preference_others",
        "self_preference_difference",
        "longer_wins",
        "verbosity_bin",
        *(metric for _, metric in LC_COLUMNS),
        "length_slope",
        "takes_first_position",
        "position_log_odds",
        "takes_first_label",
        "label_log_odds",
        "mean_prob_a1",
        "mean_prob_a2",
        "mean_prob_tie",
        "mean_prob_first",
        "mean_prob_second",
    }
)


def section_figures(result: dict, section: str, shown: frozenset[str] = SHOWN_BY_TABLES) -> list[dict]:
    """The figures of a section (``rows.SECTIONS``) that no hand-made table shows, each with its
    whole-study rows (every cut but the Bloom levels): [{figure (rows.Figure), rows: [{judge,
    cut, text}]}], in declaration order; figures without rows are left out."""
    table = result["rows"]
    names = dict.fromkeys(r["metric"] for r in table if r["metric"] not in shown)
    out = []
    for name in names:
        declared = rows.figure(name)
        if declared.section != section:
            continue
        found = [
            {"judge": r["judge"], "cut": rows.cut(r), "text": rows.figure_text(r)}
            for r in select(table, metric=name, bloom="")
        ]
        if found:
            out.append({"figure": declared, "rows": found})
    return out


def every_section_figures(result: dict) -> dict[str, dict]:
    """Every section by its key: {title: its table's caption, figures: its ``section_figures``}."""
    return {
        key: {
            "title": title if key == rows.OTHER else f"{title}: further figures",
            "figures": section_figures(result, key),
        }
        for key, title in rows.SECTIONS.items()
    }


def glossary(result: dict) -> list[dict]:
    """Every figure of the report with a definition, in declaration order: [{metric, label,
    definition}] (the dashboard's glossary; its labels are the tables' headers)."""
    present = {r["metric"] for r in result["rows"]}
    return [
        {"metric": f.metric, "label": f.label, "definition": f.definition}
        for f in rows.FIGURES.values()
        if f.metric in present and f.definition
    ]


def labels() -> dict[str, str]:
    """Each declared figure's label by its row name (the templates' headers)."""
    return {name: f.label for name, f in rows.FIGURES.items()}


# The judges whose ratings rows stand for people (analysis.rating_metrics), shown first.
PEOPLE_RATINGS = ("humans", "human majority")


def systems(result: dict) -> dict | None:
    """The "Systems" section: per judge (people first), each system's plain and
    style-controlled rating with intervals (systems in people's plain order, else the judge's),
    the style coefficients, and each judge's rank agreement with people; None without ratings."""
    found = select(result["rows"], metric=("bt_rating", "bt_rating_style"))
    if not found:
        return None
    by_judge: dict[str, dict[str, dict]] = {}
    for r in found:
        cell = by_judge.setdefault(r["judge"], {}).setdefault(r["group"], {"system": r["group"]})
        cell["style" if r["metric"] == "bt_rating_style" else "plain"] = as_rate(r)
    names = [j for j in PEOPLE_RATINGS if j in by_judge] + sorted(j for j in by_judge if j not in PEOPLE_RATINGS)
    reference = by_judge[names[0]]
    order = sorted(reference, key=lambda s: -(reference[s].get("plain", {}).get("value") or 0))
    judges = []
    for name in names:
        cells = by_judge[name]
        ranked = [s for s in order if s in cells] + sorted(s for s in cells if s not in order)
        judges.append({"judge": name, "systems": [cells[s] for s in ranked]})
    coefs = [
        {"judge": r["judge"], "feature": r["group"], "coef": as_rate(r)}
        for r in select(result["rows"], metric="style_coef")
    ]
    agreement = {}
    for r in select(result["rows"], metric=("rank_spearman", "rank_kendall")):
        entry = agreement.setdefault(r["judge"], {"judge": r["judge"], "n": r["n"]})
        entry[f"{r['metric'].removeprefix('rank_')}_{r['convention']}"] = as_rate(r)
    reversals = [
        {"judge": r["judge"], "pair": r["group"], "convention": r["convention"]}
        for r in select(result["rows"], metric="rank_reversal")
    ]
    note = next((r["note"] for r in found if r["metric"] == "bt_rating_style" and r["note"]), "")
    convention = found[0]["convention"]
    return {
        "judges": judges,
        "coefs": coefs,
        "agreement": list(agreement.values()),
        "reversals": reversals,
        "note": note,
        "convention": convention,
    }


def _figure(found: Row | None) -> dict:
    """A row as ``{value, ci, n, note}`` (``note``: why it is missing, or the sizes behind it)."""
    return {**as_rate(found), "note": found["note"] if found else ""}


def mixed_effects_rows(result: dict) -> list[dict]:
    """The mixed model beside the plain rates ("Judges against people"), per judge with
    mixed-model rows: {judge, terms (the random terms, from the convention), effects: [{label,
    group, plain, mixed}] (the position first: plain the share first − second
    (``position_diff``); then each group: plain the raw win-rate effect against the control
    (``raw_effect``)), sd_rater, sd_question (figures with their notes), note (the sizes behind
    the fit, or why there is none)}."""
    out = []
    for judge, mine in _by_judge(result).items():
        position = one(mine, metric="mixed_position")
        if position is None:
            continue
        effects = [
            {
                "label": "answer shown first",
                "group": "",
                "plain": as_rate(one(mine, metric="position_diff", bloom="")),
                "mixed": _figure(position),
            }
        ]
        for found in select(mine, metric="mixed_effect"):
            g = found["group"]
            effects.append(
                {
                    "label": g,
                    "group": g,
                    "plain": as_rate(one(mine, metric="raw_effect", group=g)),
                    "mixed": _figure(found),
                }
            )
        out.append(
            {
                "judge": judge,
                "terms": position["convention"].rpartition("random intercepts: ")[2],
                "effects": effects,
                "sd_rater": _figure(one(mine, metric="mixed_sd_rater")),
                "sd_question": _figure(one(mine, metric="mixed_sd_question")),
                "note": position["note"],
            }
        )
    return out
