"""A plain-text rendering of an analysis report, for the terminal: its metric rows
(``analysis.rows``), judge by judge: a few figures in lines made for them, then every other
figure as a line of its declared label and format (``rows.figure_text``), so that a new metric
shows here with no change."""

from __future__ import annotations

from collections.abc import Iterator

from analysis import content_blind, rows
from analysis.judge_metrics import POSITION_METRICS
from analysis.metrics import VERBOSITY_CONVENTIONS
from analysis.stats import format_p
from analysis.study_metrics import HUMAN_NF, RANDOM_JUDGE
from analysis.tables import position_dominated_reasons

# The figures printed by the lines made for them below; and the points of a curve (a figure's
# bins), which the text leaves to the dashboard's figures. Every other figure gets a line of its own.
PRINTED_ABOVE = frozenset(
    {
        "asr",
        "accuracy",
        "asr_content_blind",
        "accuracy_content_blind",
        "items_tied",
        "position_dominated",
        *POSITION_METRICS.values(),
        "longer_wins",
        "lc_winrate",
        "alt_test_winning_rate",
        "alt_test_advantage_probability",
        "alt_test_passes",
        "gold_accuracy_a1_first",
        "gold_accuracy_a2_first",
        "gold_accuracy_average",
        "gold_accuracy_both",
        "position_consistency",
        "preference_fairness",
        "repetition_stability",
        "self_preference_own",
        "self_preference_others",
        "self_preference_difference",
    }
)
CURVE_POINTS = frozenset({"verbosity_bin", "calibration_bin_confidence", "calibration_bin_accuracy"})


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def interval(lo: float | None, hi: float | None) -> str:
    return "" if lo is None else f" [{pct(lo)}, {pct(hi)}]"


def rate_text(found: rows.Row | None) -> str:
    """A rate row as "value [lo, hi] n=…" ("n/a (n=0)" where there is no figure)."""
    if found is None or found["estimate"] is None:
        return "n/a (n=0)"
    n = "" if found["n"] is None else f" n={found['n']}"
    return f"{pct(found['estimate'])}{interval(found['ci_lo'], found['ci_hi'])}{n}"


def blind_text(found: rows.Row | None) -> str:
    """A content-blind baseline beside its figure: "; blind 38.0% [20.0%, 57.1%] p 0.56", and
    "(not ranked: no better than ignoring content)" where the figure does not differ from it."""
    if found is None or found["estimate"] is None:
        return ""
    text = f"; blind {pct(found['estimate'])}{interval(found['ci_lo'], found['ci_hi'])}"
    if found["p_value"] is not None:
        text += f" p {format_p(found['p_value'])}"
    return text + ("" if content_blind.differs(found) else f" (not ranked: {content_blind.NO_BETTER})")


def position_text(table: list[rows.Row], judge: str, bloom: str = "") -> str:
    found = {s: rows.one(table, judge=judge, metric=m, bloom=bloom) for s, m in POSITION_METRICS.items()}
    text = ", ".join(f"{rows.figure(r['metric']).label.lower()} {_value(r)}" for r in found.values())
    diff = found["diff"]
    if diff["p_value"] is not None:
        text += f" p {format_p(diff['p_value'])} (adjusted {format_p(diff['p_adjusted'])})"
    return text


def _value(found: rows.Row) -> str:
    """A row's estimate and interval in its figure's format: "57.8% [48.4%, 66.7%]", "+22.4 pt [...]"."""
    fmt = rows.figure(found["metric"]).format
    text = rows.formatted(found["estimate"], fmt)
    if found["ci_lo"] is not None:
        text += f" [{rows.formatted(found['ci_lo'], fmt)}, {rows.formatted(found['ci_hi'], fmt)}]"
    return text


def report_lines(report: dict, *, verbose: bool = False) -> Iterator[str]:
    table = report["rows"]
    f = report["filters"]
    yield f"Study {report['study']}: {f['n_votes_counted']} of {f['n_votes_total']} votes counted"
    excluded = ", ".join(f"{k} {v}" for k, v in f["excluded"].items() if v)
    yield f"  excluded: {excluded or 'none'}"
    conventions = report.get("conventions", {})
    if conventions:
        yield f"  runs: {conventions['runs']}; clustered by {conventions['cluster_unit']}; p adjusted: {conventions['p_adjust']}"
    of_judge = rows.by_judge(table)
    random_judge = of_judge.get(RANDOM_JUDGE)
    judges = [*report["judges"], *([{"judge": RANDOM_JUDGE, "kind": random_judge[0]["kind"]}] if random_judge else [])]
    for judge in judges:
        yield ""
        yield f"{judge['judge']} ({judge['kind']}), {judge.get('n_votes', '-')} votes"
        yield from _judge_lines(of_judge.get(judge["judge"], []), judge, verbose=verbose)
    known = {j["judge"] for j in judges} | {HUMAN_NF}
    for name, mine in of_judge.items():
        # Figures of no judge of the report: people among themselves ("humans"), and the like.
        lines = list(generic_lines(mine, verbose=verbose)) if name not in known else []
        if lines:
            yield ""
            yield f"{name} ({mine[0]['kind']})"
            yield from lines
    human_nf = rows.one(table, judge=HUMAN_NF, metric=POSITION_METRICS["first"])
    if human_nf:
        yield ""
        yield f"Human-NF position: {position_text(table, HUMAN_NF)} n={human_nf['n']}"
    found = rows.select(table, metric="self_preference_difference")
    if found:
        yield ""
        yield "Self-preference (own family's answer vs other judges on the same items, a tie counts half):"
        for diff in found:
            own, others = (
                rows.one(table, judge=diff["judge"], metric=f"self_preference_{key}") for key in ("own", "others")
            )
            yield (
                f"  {diff['judge']} ({diff['group']}): own {rate_text(own)}, others {rate_text(others)}, "
                f"difference {pct(diff['estimate'])}{interval(diff['ci_lo'], diff['ci_hi'])} over {diff['n']} items"
            )


def _judge_lines(table: list[rows.Row], judge: dict, *, verbose: bool) -> Iterator[str]:
    """One judge's lines, from its own rows."""
    for r in rows.select(table, metric=("asr", "accuracy"), bloom=""):
        blind = rows.one(table, metric=f"{r['metric']}_content_blind", group=r["group"])
        yield f"  {'ASR' if r['metric'] == 'asr' else 'Acc'} {r['group']}: {rate_text(r)}{blind_text(blind)}"
    ties = rows.one(table, metric="items_tied")
    if ties:
        yield f"  {rows.figure('items_tied').label.lower()}: {rate_text(ties)}"
    for reason in position_dominated_reasons(table):
        yield f"  position-dominated, not ranked: {reason}"
    yield f"  position: {position_text(table, judge['judge'])}"
    if judge.get("runs"):
        yield f"  runs: {', '.join(str(r) for r in judge['runs'])}"
    longer = rows.one(table, metric="longer_wins")
    if longer:
        convention, measure = longer["convention"].split("; ")
        ties_rule = VERBOSITY_CONVENTIONS[convention][0]
        yield (
            f"  longer answer wins ({measure}, {ties_rule}): "
            f"{pct(longer['estimate'])}{interval(longer['ci_lo'], longer['ci_hi'])}"
        )
    lc = rows.select(table, metric="lc_winrate")
    if lc:
        winrates = ", ".join(f"{r['group']} {pct(r['estimate'])}" for r in lc)
        yield f"  length-controlled win rate of A2/A2p: {winrates}"
    alt = rows.one(table, metric="alt_test_winning_rate")
    if alt:
        advantage = rows.estimate(table, metric="alt_test_advantage_probability")
        yield (
            f"  alt-test ({alt['convention'].replace('=', ' ')}): {alt['note']}; winning rate {pct(alt['estimate'])}, "
            f"advantage probability {pct(advantage)}, {alt['n'] or 0} raters tested"
        )
    yield from _consistency_and_gold_lines(table, verbose=verbose)
    yield from generic_lines(table, verbose=verbose)
    if verbose:
        blooms = dict.fromkeys(r["bloom"] for r in rows.select(table, metric="asr") if r["bloom"])
        for bloom in blooms:
            asr = ", ".join(f"{r['group']} {rate_text(r)}" for r in rows.select(table, metric="asr", bloom=bloom))
            yield f"  [{bloom}] ASR {asr}"


def _consistency_and_gold_lines(table: list[rows.Row], *, verbose: bool) -> Iterator[str]:
    """Accuracy against gold labels, position consistency and repetition stability, where the
    data has them (a row exists only where n > 0); by subset when verbose."""
    for average in rows.select(table, metric="gold_accuracy_average"):
        if average["subset"] and not verbose:
            continue
        where = f" [{average['subset']}]" if average["subset"] else ""
        a1_first, a2_first, both = (
            rows.one(table, metric=f"gold_accuracy_{key}", subset=average["subset"])
            for key in ("a1_first", "a2_first", "both")
        )
        yield (
            f"  gold accuracy{where}: A1 first {rate_text(a1_first)}, A2 first {rate_text(a2_first)}, "
            f"average {rate_text(average)}, correct in both orders {rate_text(both)}"
        )
    for consistency in rows.select(table, metric="position_consistency"):
        if consistency["subset"] and not verbose:
            continue
        where = f" [{consistency['subset']}]" if consistency["subset"] else ""
        fairness = rows.estimate(table, metric="preference_fairness", subset=consistency["subset"])
        yield (
            f"  position consistency{where}: {rate_text(consistency)}; preference fairness "
            f"(recency - primacy) {pct(fairness)}"
        )
    stability = rows.one(table, metric="repetition_stability")
    if stability:
        yield f"  repetition stability: {rate_text(stability)}"


def generic_lines(table: list[rows.Row], *, verbose: bool) -> Iterator[str]:
    """One line per row of the figures no line above prints, by section then declaration
    order: "  label [cut]: value [lo, hi] n=…; convention; note" (Bloom levels and subsets only
    when verbose)."""
    order = {name: k for k, name in enumerate(rows.FIGURES)}
    sections = list(rows.SECTIONS)
    shown = [
        r
        for r in table
        if r["metric"] not in PRINTED_ABOVE
        and r["metric"] not in CURVE_POINTS
        and (verbose or not (r["bloom"] or r["subset"]))
    ]
    shown.sort(key=lambda r: (sections.index(rows.figure(r["metric"]).section), order.get(r["metric"], len(order))))
    for r in shown:
        where = rows.cut(r)
        yield f"  {rows.figure(r['metric']).label}{f' [{where}]' if where else ''}: {rows.figure_text(r)}"
