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
registered function in registration order. The registration declares each figure the function
yields (a ``Figure``: its row name, label, section of the outputs, format and one-line
definition), and every output reads those declarations: the dashboard's sections and glossary,
the terminal text, the metrics CSV and the API's ``figures``, and the metric list of
docs/STATISTICS.md (``manage.py metrics_doc --write``). ``@judge_metric("name")`` alone declares
one figure of that name with the defaults (section "Other figures", label the name, format a
number).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from analysis.stats import format_p

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

# How a figure's estimate reads (rows.formatted): a share as a percentage, a difference of shares
# in percentage points, a rating in rating points, a plain number, a p-value.
PERCENT, POINTS, RATING, NUMBER, P_VALUE = "percent", "points", "rating", "number", "p"
FORMATS = (PERCENT, POINTS, RATING, NUMBER, P_VALUE)

# The sections of the outputs, in the order the dashboard and the text show them: key → title.
OTHER = "other"
SECTIONS = {
    "table1": "Accuracy and attack success rate per judge (Table 1)",
    "position": "Positional preference (Table 2)",
    "agreement": "Agreement",
    "judges_against_people": "Judges against people",
    "consistency": "Position consistency and accuracy against gold labels",
    "self_preference": "Self-preference",
    "verbosity": "Verbosity",
    "length_controlled": "Length-controlled versus raw preference",
    "position_and_label": "Position and label preference",
    "systems": "Systems: ratings, plain and style-controlled",
    OTHER: "Other figures",
}


@dataclass(frozen=True)
class Figure:
    """What the outputs need to know of one figure (one ``metric`` name of the rows): its
    ``label`` (a table's header, the text's line; the name where none is given), the
    ``section`` of the outputs it belongs to (a key of ``SECTIONS``), its ``format`` (one of
    ``FORMATS``), a one-line ``definition`` (the glossary, the tooltips, docs/STATISTICS.md),
    and what its ``n`` counts (``base``: votes, items, questions, pairs...)."""

    metric: str
    label: str = ""
    section: str = OTHER
    format: str = NUMBER
    definition: str = ""
    base: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.metric)
        if self.section not in SECTIONS:
            raise ValueError(f"figure {self.metric!r}: no section {self.section!r} (sections: {', '.join(SECTIONS)})")
        if self.format not in FORMATS:
            raise ValueError(f"figure {self.metric!r}: no format {self.format!r} (formats: {', '.join(FORMATS)})")


# Every declared figure, by its row name, in declaration order; and which figures each
# registered function yields (its registration name → the row names).
FIGURES: dict[str, Figure] = {}
YIELDS: dict[str, tuple[str, ...]] = {}


def declare(*figures: Figure) -> tuple[str, ...]:
    """Declares figures (a name once: the same name declared again must be the same figure);
    returns their row names. The report's own figures (``position_dominated``) are declared so."""
    for f in figures:
        known = FIGURES.get(f.metric)
        if known is not None and known != f:
            raise ValueError(f"a figure named {f.metric!r} is declared already, differently: {known}")
        FIGURES[f.metric] = f
    return tuple(f.metric for f in figures)


def figure(metric: str) -> Figure:
    """The declaration of a row name; a row nobody declared reads with the defaults."""
    return FIGURES.get(metric) or Figure(metric)


def _register(
    registry: dict[str, RowsOf], name: str, figures: tuple[Figure | str, ...], one: dict
) -> Callable[[RowsOf], RowsOf]:
    if figures and any(v is not None for v in one.values()):
        raise ValueError(f"metric {name!r}: give either its figures or one figure's label, section..., not both")
    if not figures:
        figures = (Figure(name, **{k: v for k, v in one.items() if v is not None}),)
    yields = tuple(f if isinstance(f, str) else f.metric for f in figures)

    def register(function: RowsOf) -> RowsOf:
        if name in registry:
            raise ValueError(f"a metric named {name!r} is registered already ({registry[name].__qualname__})")
        reused = [f for f in figures if isinstance(f, str) and f not in FIGURES]
        if reused:
            raise ValueError(f"metric {name!r} yields {', '.join(reused)}, which no metric declares (declare a Figure)")
        declare(*(f for f in figures if isinstance(f, Figure)))
        registry[name] = function
        YIELDS[name] = yields
        return function

    return register


def judge_metric(
    name: str,
    *figures: Figure | str,
    label: str | None = None,
    section: str | None = None,
    format: str | None = None,  # the Figure's field
    definition: str | None = None,
    base: str | None = None,
) -> Callable[[RowsOf], RowsOf]:
    """Registers a function of one judge's data that yields its rows (see the module's doc).
    ``figures``: a ``Figure`` for each row name it yields (or the row name of a figure another
    metric declares); with none, it yields rows named ``name``, described by the keywords."""
    one = {"label": label, "section": section, "format": format, "definition": definition, "base": base}
    return _register(JUDGE_METRICS, name, figures, one)


def study_metric(
    name: str,
    *figures: Figure | str,
    label: str | None = None,
    section: str | None = None,
    format: str | None = None,  # the Figure's field
    definition: str | None = None,
    base: str | None = None,
) -> Callable[[RowsOf], RowsOf]:
    """Registers a function of the whole study's data that yields rows of any judge (as
    ``judge_metric``)."""
    one = {"label": label, "section": section, "format": format, "definition": definition, "base": base}
    return _register(STUDY_METRICS, name, figures, one)


def in_section(section: str) -> list[Figure]:
    """The figures declared in a section, in declaration order."""
    return [f for f in FIGURES.values() if f.section == section]


def formatted(value: float | None, fmt: str) -> str:
    """An estimate as its format reads: 12.3%, +4.5 pt, 1012 (rating), 0.42, p < 0.001; n/a
    where there is none."""
    if value is None:
        return "n/a"
    if fmt == PERCENT:
        return f"{100 * value:.1f}%"
    if fmt == POINTS:
        return f"{100 * value:+.1f} pt"
    if fmt == RATING:
        return f"{value:.0f}"
    if fmt == P_VALUE:
        return format_p(value)
    return f"{value:.3g}"


def figure_text(found: Row) -> str:
    """A row as one line of text: "value [lo, hi] n=…, p …; convention; note", in its
    figure's format."""
    fmt = figure(found["metric"]).format
    text = formatted(found["estimate"], fmt)
    if found["ci_lo"] is not None and found["ci_hi"] is not None:
        text += f" [{formatted(found['ci_lo'], fmt)}, {formatted(found['ci_hi'], fmt)}]"
    if found["n"] is not None:
        text += f" n={found['n']}"
    if found["p_value"] is not None:
        text += f", p {format_p(found['p_value'])}"
        if found["p_adjusted"] is not None:
            text += f" (adjusted {format_p(found['p_adjusted'])})"
    return "; ".join(t for t in (text, found["convention"], found["note"]) if t)


def cut(found: Row) -> str:
    """A row's cut as words: "REF", "REF, remembering", "subset S"; "" for the whole study."""
    parts = [found["group"], found["bloom"], f"subset {found['subset']}" if found["subset"] else ""]
    return ", ".join(p for p in parts if p)


def figures_of_report(table: Iterable[Row]) -> dict[str, dict]:
    """Each figure the report's rows name, as the API and the stored report carry it: row name →
    {label, section, format, definition, base}."""
    names = dict.fromkeys(r["metric"] for r in table)
    return {
        name: {k: getattr(f, k) for k in ("label", "section", "format", "definition", "base")}
        for name, f in ((name, figure(name)) for name in names)
    }


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
