"""The metric table: every figure of a report as one row, and the registry of what makes them.

A report (``analysis.compute.analyze``) is, at its core, a list of rows with ``COLUMNS``: the
dashboard's tables and figures (through ``analysis.tables``), the terminal text, the metrics CSV
and the API all read these rows, and none walks a structure of its own.

Each row is one figure of one judge:

- ``judge``, ``kind``: whose figure (a judge's name and kind; "random judge" / "chance level"
  for the exact chance level, "Human-NF" for people's not-familiar votes, "humans" for
  agreement among people).
- ``metric``: what it is, a name from the metric's registration (``asr``, ``position_first``,
  ``lc_winrate``; docs/STATISTICS.md defines each).
- ``group``, ``bloom``, ``subset``: the cut: a perturbation group (or a label scheme, a length
  bin, the other judge of a pair, a model family), a Bloom level, an item subset; "" for none.
- ``estimate``, ``ci_lo``, ``ci_hi``: the figure and its 95% interval (None where undefined:
  an empty base is ``estimate`` None with ``n`` 0, never 0).
- ``n``: the size of its base (votes, questions, items or pairs: the metric's docstring says
  which); ``clusters``: the questions the interval clusters over, where it does.
- ``p_value``, ``p_adjusted``: a test's p-value and its Holm adjustment over the report's family.
- ``convention``: the named choice the figure depends on where there is more than one
  (``conditional`` or ``marginal`` effects, the verbosity convention and length measure).
- ``note``: what a reader needs beside the figure: why it is missing (not identifiable), why a
  judge is flagged, which labels a scheme has.

A metric is registered with ``@judge_metric`` (a function of one judge's votes,
``analysis.judge_metrics.JudgeData``, yielding that judge's rows) or ``@study_metric`` (a
function of the whole study, ``analysis.study_metrics.StudyData``); the report runs every
registered function in registration order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

COLUMNS = (
    "judge",
    "kind",
    "metric",
    "group",
    "bloom",
    "subset",
    "estimate",
    "ci_lo",
    "ci_hi",
    "n",
    "clusters",
    "p_value",
    "p_adjusted",
    "convention",
    "note",
)

Row = dict[str, Any]
RowsOf = Callable[[Any], Iterable[Row]]

JUDGE_METRICS: dict[str, RowsOf] = {}
STUDY_METRICS: dict[str, RowsOf] = {}


def _register(registry: dict[str, RowsOf], name: str) -> Callable[[RowsOf], RowsOf]:
    def register(function: RowsOf) -> RowsOf:
        if name in registry:
            raise ValueError(f"a metric named {name!r} is registered already ({registry[name].__qualname__})")
        registry[name] = function
        return function

    return register


def judge_metric(name: str) -> Callable[[RowsOf], RowsOf]:
    """Registers a function of one judge's data that yields its rows (see the module's doc)."""
    return _register(JUDGE_METRICS, name)


def study_metric(name: str) -> Callable[[RowsOf], RowsOf]:
    """Registers a function of the whole study's data that yields rows of any judge."""
    return _register(STUDY_METRICS, name)


def row(
    judge: str,
    kind: str,
    metric: str,
    estimate: float | None,
    *,
    ci: Iterable[float | None] | None = None,
    n: int | None = None,
    clusters: int | None = None,
    group: str = "",
    bloom: str = "",
    subset: str = "",
    p_value: float | None = None,
    p_adjusted: float | None = None,
    convention: str = "",
    note: str = "",
) -> Row:
    """One row; numbers become plain Python numbers (JSON-ready)."""
    lo, hi = ci if ci is not None else (None, None)
    return {
        "judge": judge,
        "kind": kind,
        "metric": metric,
        "group": group,
        "bloom": bloom,
        "subset": subset,
        "estimate": _number(estimate),
        "ci_lo": _number(lo),
        "ci_hi": _number(hi),
        "n": None if n is None else int(n),
        "clusters": None if clusters is None else int(clusters),
        "p_value": _number(p_value),
        "p_adjusted": _number(p_adjusted),
        "convention": convention,
        "note": note,
    }


def rate_row(judge: str, kind: str, metric: str, rate: dict, **where: Any) -> Row:
    """A row from a rate as the estimators give it: ``{value, ci, n}`` and, where the interval
    clusters by question, ``clusters``."""
    return row(
        judge,
        kind,
        metric,
        rate.get("value"),
        ci=rate.get("ci"),
        n=rate.get("n"),
        clusters=rate.get("clusters"),
        **where,
    )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def select(rows: Iterable[Row], **where: Any) -> list[Row]:
    """The rows whose columns equal every value given (``metric`` may be a tuple: any of them)."""
    return list(_matching(rows, where))


def one(rows: Iterable[Row], **where: Any) -> Row | None:
    """The first row matching ``where`` (see ``select``), or None."""
    return next(_matching(rows, where), None)


def estimate(rows: Iterable[Row], **where: Any) -> float | None:
    """The estimate of the first row matching ``where``, or None."""
    found = one(rows, **where)
    return None if found is None else found["estimate"]


def _matching(rows: Iterable[Row], where: dict[str, Any]) -> Iterator[Row]:
    unknown = set(where) - set(COLUMNS)
    if unknown:
        raise KeyError(f"no column {', '.join(sorted(unknown))} in the metric table (columns: {', '.join(COLUMNS)})")
    for r in rows:
        if all(r[k] in v if isinstance(v, tuple) else r[k] == v for k, v in where.items()):
            yield r


def by_judge(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Each judge's rows, split in one pass: lookups in one judge's rows instead of the whole
    table (a study of 77 judges has thousands of rows)."""
    out: dict[str, list[Row]] = {}
    for r in rows:
        out.setdefault(r["judge"], []).append(r)
    return out


def as_rate(found: Row | None) -> dict:
    """A row back as the ``{value, ci, n}`` a table cell shows (empty where there is no row)."""
    if found is None:
        return {"value": None, "ci": [None, None], "n": 0, "clusters": None}
    return {
        "value": found["estimate"],
        "ci": [found["ci_lo"], found["ci_hi"]],
        "n": found["n"],
        "clusters": found["clusters"],
    }
