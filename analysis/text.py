"""A plain-text rendering of an analysis report, for the terminal."""

from __future__ import annotations

from collections.abc import Iterator


def pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def rate_text(rate: dict) -> str:
    if rate.get("value") is None:
        return "n/a (n=0)"
    lo, hi = rate["ci"]
    interval = f" [{pct(lo)}, {pct(hi)}]" if lo is not None else ""
    return f"{pct(rate['value'])}{interval} n={rate['n']}"


def report_lines(report: dict, *, verbose: bool = False) -> Iterator[str]:
    f = report["filters"]
    yield f"Study {report['study']}: {f['n_votes_counted']} of {f['n_votes_total']} votes counted"
    excluded = ", ".join(f"{k} {v}" for k, v in f["excluded"].items() if v)
    yield f"  excluded: {excluded or 'none'}"
    groups = [g["group"] for g in report["groups"]]
    for judge in [*report["judges"], report["random_judge"]]:
        yield ""
        yield f"{judge['judge']} ({judge['kind']}), {judge.get('n_votes', '-')} votes"
        for g in groups:
            yield f"  ASR {g}: {rate_text(judge['asr'][g])}"
            if g in judge["accuracy"]:
                yield f"  Acc {g}: {rate_text(judge['accuracy'][g])}"
        pos = judge["position"]
        yield f"  position: first {pct(pos['first'])} tie {pct(pos['tie'])} second {pct(pos['second'])} diff {pct(pos['diff'])}"
        if "verbosity" in judge:
            yield f"  longer answer wins ({judge['verbosity']['measure']}): {pct(judge['verbosity']['longer_wins'])}"
        if judge.get("lc_winrate"):
            lc = ", ".join(f"{g} {pct(v)}" for g, v in judge["lc_winrate"].items())
            yield f"  length-controlled win rate of A2/A2p: {lc}"
        if verbose and judge.get("by_bloom"):
            for bloom, part in judge["by_bloom"].items():
                asr = ", ".join(f"{g} {rate_text(r)}" for g, r in part["asr"].items())
                yield f"  [{bloom}] ASR {asr}"
    nf = report["human_nf_position"]
    yield ""
    yield f"Human-NF position: first {pct(nf['first'])} tie {pct(nf['tie'])} second {pct(nf['second'])} n={nf['n']}"
