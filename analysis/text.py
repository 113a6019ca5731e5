"""A plain-text rendering of an analysis report, for the terminal."""

from __future__ import annotations

from collections.abc import Iterator

from analysis.metrics import VERBOSITY_CONVENTIONS
from analysis.stats import format_p


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def rate_text(rate: dict) -> str:
    if rate.get("value") is None:
        return "n/a (n=0)"
    lo, hi = rate["ci"]
    interval = f" [{pct(lo)}, {pct(hi)}]" if lo is not None else ""
    return f"{pct(rate['value'])}{interval} n={rate['n']}"


def interval(ci: list | None) -> str:
    if not ci or ci[0] is None:
        return ""
    return f" [{pct(ci[0])}, {pct(ci[1])}]"


def position_text(pos: dict) -> str:
    ci = pos.get("ci") or {}
    text = (
        f"first {pct(pos['first'])}{interval(ci.get('first'))} tie {pct(pos['tie'])}{interval(ci.get('tie'))} "
        f"second {pct(pos['second'])}{interval(ci.get('second'))} diff {pct(pos['diff'])}{interval(ci.get('diff'))}"
    )
    if pos.get("p_value") is not None:
        text += f" p {format_p(pos['p_value'])} (adjusted {format_p(pos.get('p_adjusted'))})"
    return text


def report_lines(report: dict, *, verbose: bool = False) -> Iterator[str]:
    f = report["filters"]
    yield f"Study {report['study']}: {f['n_votes_counted']} of {f['n_votes_total']} votes counted"
    excluded = ", ".join(f"{k} {v}" for k, v in f["excluded"].items() if v)
    yield f"  excluded: {excluded or 'none'}"
    conventions = report.get("conventions", {})
    if conventions:
        yield f"  runs: {conventions['runs']}; clustered by {conventions['cluster_unit']}; p adjusted: {conventions['p_adjust']}"
    groups = [g["group"] for g in report["groups"]]
    for judge in [*report["judges"], report["random_judge"]]:
        yield ""
        yield f"{judge['judge']} ({judge['kind']}), {judge.get('n_votes', '-')} votes"
        for g in groups:
            yield f"  ASR {g}: {rate_text(judge['asr'][g])}"
            if g in judge["accuracy"]:
                yield f"  Acc {g}: {rate_text(judge['accuracy'][g])}"
        if "tie_share" in judge:
            yield f"  item preferences tied: {rate_text(judge['tie_share'])}"
        for reason in judge.get("position_dominated") or []:
            yield f"  position-dominated, not ranked: {reason}"
        yield f"  position: {position_text(judge['position'])}"
        if judge.get("runs"):
            yield f"  runs: {', '.join(str(r) for r in judge['runs'])}"
        if "verbosity" in judge:
            v = judge["verbosity"]
            ties = VERBOSITY_CONVENTIONS[v.get("convention", "tie_half")][0]
            yield f"  longer answer wins ({v['measure']}, {ties}): {pct(v['longer_wins'])}{interval(v['longer_wins_ci'])}"
        if judge.get("lc_winrate"):
            lc = ", ".join(f"{g} {pct(v)}" for g, v in judge["lc_winrate"].items())
            yield f"  length-controlled win rate of A2/A2p: {lc}"
        yield from _consistency_and_gold_lines(judge, verbose=verbose)
        if verbose and judge.get("by_bloom"):
            for bloom, part in judge["by_bloom"].items():
                asr = ", ".join(f"{g} {rate_text(r)}" for g, r in part["asr"].items())
                yield f"  [{bloom}] ASR {asr}"
    nf = report["human_nf_position"]
    yield ""
    yield f"Human-NF position: {position_text(nf)} n={nf['n']}"
    found = [(name, sp) for name, sp in (report.get("self_preference") or {}).items() if sp["n_items"]]
    if found:
        yield ""
        yield "Self-preference (own family's answer vs other judges on the same items, a tie counts half):"
        for name, sp in found:
            yield (
                f"  {name} ({sp['family']}): own {rate_text(sp['own'])}, others {rate_text(sp['others'])}, "
                f"difference {pct(sp['difference'])}{interval(sp['difference_ci'])} over {sp['n_items']} items"
            )


def _cuts(measure: dict, rate: str, verbose: bool) -> Iterator[tuple[str, dict]]:
    """(" [subset]" or "", part) of a measure: the whole, then each subset when verbose; only
    parts whose `rate` has n > 0."""
    subsets = measure.get("by_subset") or {} if verbose else {}
    for subset in [None, *subsets]:
        part = measure if subset is None else subsets[subset]
        if part and part[rate]["n"]:
            yield ("" if subset is None else f" [{subset}]"), part


def _consistency_and_gold_lines(judge: dict, *, verbose: bool) -> Iterator[str]:
    """Accuracy against gold labels, position consistency and repetition stability, where the
    data has them (n > 0); by subset when verbose."""
    gold = judge.get("gold_accuracy") or {}
    consistency = judge.get("position_consistency") or {}
    for where, part in _cuts(gold, "average", verbose):
        yield (
            f"  gold accuracy{where}: A1 first {rate_text(part['a1_first'])}, A2 first {rate_text(part['a2_first'])}, "
            f"average {rate_text(part['average'])}, correct in both orders {rate_text(part['both'])}"
        )
    for where, part in _cuts(consistency, "consistency", verbose):
        yield (
            f"  position consistency{where}: {rate_text(part['consistency'])}; preference fairness "
            f"(recency - primacy) {pct(part['fairness'])}"
        )
    stability = judge.get("repetition_stability")
    if stability and stability["n"]:
        yield f"  repetition stability: {rate_text(stability)}"
