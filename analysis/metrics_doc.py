"""The metric list of docs/STATISTICS.md, written from the registry (``analysis.rows``): the
block between ``<!-- metrics:start -->`` and ``<!-- metrics:end -->`` is rewritten by
``python manage.py metrics_doc --write``; ``tests/test_metrics_doc.py`` fails while the page
is out of date."""

from __future__ import annotations

import re

from analysis import compute  # noqa: F401 (imports every module that registers or declares a figure)
from analysis.rows import FIGURES, JUDGE_METRICS, SECTIONS, STUDY_METRICS, YIELDS

START, END = "<!-- metrics:start -->", "<!-- metrics:end -->"
COMMAND = "python manage.py metrics_doc --write"


def _made_by() -> dict[str, str]:
    """Each figure's row name → the registrations that yield it ("the report" for its own)."""
    out: dict[str, list[str]] = {}
    for name, yields in YIELDS.items():
        kind = "judge" if name in JUDGE_METRICS else "study"
        for metric in yields:
            out.setdefault(metric, []).append(f"`{name}` ({kind})")
    return {metric: ", ".join(out.get(metric, ["the report"])) for metric in FIGURES}


def _place() -> dict[str, tuple]:
    """Each figure's place in the page, whatever order the modules were imported in (which sets
    the registries' order): the judge's metrics, then the study's, then the other modules by
    name, the report's own last; within a module, by the registration's line and the figure's
    place in it."""
    first = {"analysis.judge_metrics": 0, "analysis.study_metrics": 1}
    place: dict[str, tuple] = {}
    for registry in (JUDGE_METRICS, STUDY_METRICS):
        for name, function in registry.items():
            module = function.__module__
            line = function.__code__.co_firstlineno
            for i, metric in enumerate(YIELDS[name]):
                key = (first.get(module, 2), module, line, i)
                place[metric] = min(place.get(metric, key), key)
    return {metric: place.get(metric, (3, "", 0, 0)) for metric in FIGURES}


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def metric_list() -> str:
    """The block's text: one table per section of the outputs, a figure per line."""
    made_by, place = _made_by(), _place()
    lines = [START, f"<!-- written by `{COMMAND}` from the declarations in analysis/ (do not edit here) -->"]
    for key, title in SECTIONS.items():
        figures = sorted((f for f in FIGURES.values() if f.section == key), key=lambda f: place[f.metric])
        if not figures:
            continue
        lines += ["", f"**{title}** (section `{key}`)", ""]
        lines += ["| metric | label | format | n counts | what it is | made by |", "|---|---|---|---|---|---|"]
        for f in figures:
            lines.append(
                f"| `{f.metric}` | {_cell(f.label)} | {f.format} | {_cell(f.base)} | {_cell(f.definition)} | "
                f"{made_by[f.metric]} |"
            )
    lines.append(END)
    return "\n".join(lines)


def rewritten(text: str) -> str:
    """``text`` (the page) with its block written afresh; a page without the two markers, in
    order, is an error naming them."""
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.DOTALL)
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"the page needs one block from {START} to {END}, in that order")
    return pattern.sub(lambda _: metric_list(), text)
