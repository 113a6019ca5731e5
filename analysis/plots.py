"""The dashboard's figures, drawn server-side with matplotlib (Agg; no JavaScript, no CDN).

Each plot is a pure function of the analysis report (``analysis.compute``), drawn from the same
shapes as the page's tables (``analysis.tables``): it returns the figure and the rows of the CSV
behind it, so the picture, its numbers and the table beside it cannot disagree.
``render`` writes SVG or PNG byte for byte the same for the same report (no date in the SVG,
a fixed hash salt for its ids), which lets tests compare outputs. Names are never cut:
legends sit outside the axes and every figure is saved with a tight bounding box around all
its text. A report with nothing to draw gives a figure that says so, not an error.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")  # set in code: never a display backend on a server

from matplotlib import rc_context  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402
from matplotlib.textpath import TextPath  # noqa: E402

from analysis import tables  # noqa: E402
from analysis.judge_metrics import POSITION_METRICS  # noqa: E402
from analysis.rows import figure, select  # noqa: E402

PALETTE = ("#0b57d0", "#b3261e", "#146c2e", "#8e4ec6", "#c05600", "#00696f", "#5f6368", "#a8326c")
FORMATS = {"svg": "image/svg+xml", "png": "image/png"}
# Text stays text in the SVG (searchable, readable by screen readers, a tenth of the size);
# the hash salt makes clip-path ids the same on every run.
_RC = {"svg.fonttype": "none", "svg.hashsalt": "biasstudy", "font.size": 9, "font.family": "DejaVu Sans"}

Rows = list[list]
# The forest plot's panels per row (one panel per ASR or accuracy column).
FOREST_PER_ROW = 4


@dataclass(frozen=True)
class Plot:
    title: str
    alt: str  # what the figure shows, for the img's alt text
    draw: Callable[[dict], tuple[Figure, Rows]]


def _none(v: float | None) -> float:
    return math.nan if v is None else float(v)


def _err(value: float | None, lo: float | None, hi: float | None) -> tuple[float, float]:
    """Error-bar lengths below and above a value; 0 where the interval is undefined."""
    if value is None or lo is None or hi is None:
        return (0.0, 0.0)
    return (max(0.0, value - lo), max(0.0, hi - value))


NO_VOTES = "No data yet: no counted votes match these filters."
NO_GROUPS = "No perturbed items: ASR and accuracy compare a perturbed item with its question's control item."


def empty_figure(title: str, message: str = NO_VOTES) -> Figure:
    fig = Figure(figsize=(6.4, 1.6))
    fig.suptitle(title, fontsize=11, x=0.02, ha="left")
    fig.text(0.5, 0.4, message, ha="center", va="center", color="#5f6368")
    return fig


def _no_rates(result: dict, cols: list) -> str:
    """Why a figure of ASR and accuracy is empty: a study of votes on unperturbed pairs only
    (imported MT-bench, PRD or LLMBar data) has votes but nothing to compute them on."""
    return NO_GROUPS if result["filters"].get("n_votes_counted") and not cols else NO_VOTES


def _height(rows: int, per_row: float = 0.32, minimum: float = 2.2) -> float:
    return max(minimum, 1.2 + per_row * rows)


def _text_inches(labels: list[str], size: float = _RC["font.size"]) -> float:
    """Width in inches of the widest label as drawn, so a figure can grow by its names instead
    of the layout squeezing the drawing to make room for them."""
    widths = [TextPath((0, 0), label, size=size, prop=FontProperties(family=_RC["font.family"])) for label in labels]
    return max((w.get_extents().width for w in widths), default=0.0) / 72


# ---------------------------------------------------------------------------- forest plot


def forest(result: dict) -> tuple[Figure, Rows]:
    """Table 1 as a picture: one panel per column (ASR per perturbation, accuracy per degrading
    one), one row per judge, the point and its 95% interval; the random judge as a dashed line."""
    table = tables.table1(result)
    cols = table["columns"]
    judges = [r for r in table["rows"] if not r.get("chance")]
    chance = next(r for r in table["rows"] if r.get("chance"))
    rows: Rows = [["judge", "metric", "group", "value", "ci_lo", "ci_hi", "n", "random_judge"]]
    for row in judges:
        for c, cell in zip(cols, row["cells"], strict=True):
            rows.append([row["judge"], c["metric"], c["group"], cell["value"], cell["lo"], cell["hi"], cell["n"], ""])
    for c, cell in zip(cols, chance["cells"], strict=True):
        rows.append(["random judge", c["metric"], c["group"], cell["value"], "", "", "", "chance level"])
    title = "Attack success rate (ASR) and accuracy per judge, 95% intervals"
    if not cols or not judges or all(cell["value"] is None for r in judges for cell in r["cells"]):
        return empty_figure(title, _no_rates(result, cols)), rows
    # Panels wrap after FOREST_PER_ROW, so that a study of many kinds (the catalogue has over
    # ten) is a few rows of legible panels, not one strip shrunk to the page's width.
    per_row = min(len(cols), FOREST_PER_ROW)
    n_rows = math.ceil(len(cols) / per_row)
    # A position-dominated judge's ASR says nothing about robustness: named so, as it is unranked.
    names = [f"{r['judge']}\n(position-dominated)" if r.get("position_dominated") else r["judge"] for r in judges]
    width = max(6.4, 2.3 * per_row + _text_inches([n for name in names for n in name.split("\n")]) + 0.6)
    height = n_rows * (_height(len(judges)) - 0.6) + 0.6
    fig = Figure(figsize=(width, height), layout="constrained")
    grid = fig.subplots(n_rows, per_row, sharey=True, squeeze=False)
    axes = [ax for row in grid for ax in row]
    for spare in axes[len(cols) :]:
        spare.remove()
    axes = axes[: len(cols)]
    ys = list(range(len(judges)))[::-1]
    for ax, (i, c) in zip(axes, enumerate(cols), strict=True):
        for y, row in zip(ys, judges, strict=True):
            cell = row["cells"][i]
            if cell["value"] is None:
                ax.text(0.5, y, "n/a", ha="center", va="center", color="#5f6368", fontsize=8)
                continue
            lo, hi = _err(cell["value"], cell["lo"], cell["hi"])
            ax.errorbar(cell["value"], y, xerr=[[lo], [hi]], fmt="o", color=PALETTE[0], capsize=3, ms=5)
        rnd = chance["cells"][i]["value"]
        if rnd is not None:
            ax.axvline(rnd, color="#5f6368", linestyle="--", linewidth=1, label="random judge")
        ax.set_xlim(-0.02, 1.02)
        ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
        ax.set_title(f"{c['label']}\n({c['better']} is better)", fontsize=9)
        ax.grid(axis="x", color="#e0e0e0")
    axes[0].set_yticks(ys, names)
    axes[0].set_ylim(-0.7, len(judges) - 0.3)
    fig.suptitle(title, fontsize=11)
    fig.supxlabel("share of questions (ASR) or of items (accuracy)")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles[:1], labels[:1], loc="outside lower right", frameon=False)
    return fig, rows


# ---------------------------------------------------------------------------- position bars


def position(result: dict) -> tuple[Figure, Rows]:
    """Table 2 as a picture: shares of first / tie / second votes per judge, Human-NF and the
    random judge included, with 95% intervals."""
    table = tables.table2(result)
    shares = ("first", "tie", "second")
    rows: Rows = [["judge", "kind", *[f"{s}{x}" for s in (*shares, "diff") for x in ("", "_lo", "_hi")], "n", "p"]]
    for r in table:
        ci = r.get("ci") or {}
        cells = []
        for s in (*shares, "diff"):
            lo, hi = ci.get(s) or (None, None)
            cells += [r[s], lo, hi]
        rows.append([r["judge"], r["kind"], *cells, r["n"], r.get("p_value")])
    title = "Which position wins: share of votes for the answer shown first, a tie, or the second"
    # Every row is drawn, Human-NF included when it has no votes (it then says so).
    drawn = table
    if all(r["first"] is None for r in drawn if not r.get("chance")):
        return empty_figure(title), rows
    fig = Figure(figsize=(7.2, _height(len(drawn), 0.55)), layout="constrained")
    ax = fig.subplots()
    height = 0.26
    for k, (s, colour) in enumerate(zip(shares, (PALETTE[0], "#9aa0a6", PALETTE[1]), strict=True)):
        ys = [len(drawn) - 1 - i + (1 - k) * height for i in range(len(drawn))]
        values = [0.0 if r[s] is None else r[s] for r in drawn]
        errs = list(zip(*[_err(r[s], *((r.get("ci") or {}).get(s) or (None, None))) for r in drawn], strict=True))
        label = figure(POSITION_METRICS[s]).label  # as Table 2's headers name them
        ax.barh(ys, values, height=height, color=colour, label=label, xerr=errs, capsize=2, ecolor="#202124")
    for i, r in enumerate(drawn):
        if r["first"] is None:
            ax.text(0.02, len(drawn) - 1 - i, "no votes", va="center", color="#5f6368")
    ax.set_yticks(range(len(drawn))[::-1], [_row_label(r) for r in drawn])
    ax.set_xlim(0, 1)
    ax.axvline(0.5, color="#5f6368", linestyle=":", linewidth=1)
    ax.set_xlabel("share of votes, 95% intervals\n(a position-blind judge: first = second)")
    ax.grid(axis="x", color="#e0e0e0")
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncols=3, frameon=False)
    return fig, rows


def _row_label(row: dict) -> str:
    if row.get("chance"):
        return "random judge (chance level)"
    return f"{row['judge']} (n={row['n'] or 0})"


# ---------------------------------------------------------------------------- verbosity curve


def verbosity(result: dict) -> tuple[Figure, Rows]:
    """Share of votes for the longer answer by how much longer it is, per judge, with intervals."""
    rows: Rows = [["judge", "measure", "bin_lo", "bin_hi", "value", "ci_lo", "ci_hi", "n"]]
    bin_width = result["conventions"]["verbosity_bin_width"]
    series = []
    for judge in tables.verbosity_rows(result):
        points = []
        for b in judge["bins"]:
            lo, hi = b["ci"]
            rows.append([judge["judge"], result["measure"], b["lo"], b["hi"], b["value"], lo, hi, b["n"]])
            if b["value"] is not None and b["n"]:
                mid = (b["lo"] + (b["hi"] if b["hi"] is not None else b["lo"] + bin_width)) / 2
                points.append((mid, b["value"], lo, hi))
        if points:
            series.append((judge["judge"], points))
    title = "Preference for the longer answer by length difference, 95% intervals"
    if not series:
        return empty_figure(title), rows
    # The legend sits below the axes in two columns: the figure grows by its rows and by the
    # longest name, so that many judges (LLMBar has 77) do not squash the axes to nothing.
    legend_rows = math.ceil((len(series) + 1) / 2)
    width = max(7.2, 2 * (_text_inches([name for name, _ in series]) + 0.8))
    fig = Figure(figsize=(width, 3.8 + 0.2 * legend_rows), layout="constrained")
    ax = fig.subplots()
    for k, (name, points) in enumerate(series):
        colour = PALETTE[k % len(PALETTE)]
        xs = [p[0] for p in points]
        ax.plot(xs, [p[1] for p in points], marker="o", color=colour, label=name)
        if all(p[2] is not None for p in points):
            ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color=colour, alpha=0.12)
    ax.axhline(0.5, color="#5f6368", linestyle="--", linewidth=1, label="length-blind judge (0.5)")
    ax.set_ylim(0, 1)
    ax.set_xlabel(f"|Δ length| in {result['measure']} (bins of {bin_width}; last bin open)")
    ax.set_ylabel("share of votes for the longer answer")
    ax.grid(color="#e0e0e0")
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig, rows


# ---------------------------------------------------------------------------- LC vs raw


def lc(result: dict) -> tuple[Figure, Rows]:
    """Raw and length-controlled (LC) win rates of A2 / A2p per judge and group."""
    found = tables.lc_rows(result)
    rows: Rows = [["judge", "group", "raw", "raw_lo", "raw_hi", "lc", "lc_lo", "lc_hi", "n"]]
    for r in found:
        rows.append(
            [r["judge"], r["group"], r["raw"], r["raw_lo"], r["raw_hi"], r["lc"], r["lc_lo"], r["lc_hi"], r["n"]]
        )
    title = "Win rate of A2 / A2p over A1: raw and length-controlled (LC), 95% intervals"
    drawn = [r for r in found if r["raw"] is not None or r["lc"] is not None]
    if not drawn:
        return empty_figure(title), rows
    fig = Figure(figsize=(7.2, _height(len(drawn), 0.42)), layout="constrained")
    ax = fig.subplots()
    for k, (key, label, marker) in enumerate((("raw", "raw", "o"), ("lc", "length-controlled (LC)", "D"))):
        ys = [len(drawn) - 1 - i + (0.15 if k == 0 else -0.15) for i in range(len(drawn))]
        values = [_none(r[key]) for r in drawn]
        errs = list(zip(*[_err(r[key], r[f"{key}_lo"], r[f"{key}_hi"]) for r in drawn], strict=True))
        ax.errorbar(values, ys, xerr=errs, fmt=marker, color=PALETTE[k], capsize=3, ms=5, label=label)
    ax.set_yticks(range(len(drawn))[::-1], [f"{r['judge']} · {r['group']} (n={r['n']})" for r in drawn])
    ax.axvline(0.5, color="#5f6368", linestyle="--", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("win rate of A2 or A2p over A1,\na tie counting half")
    ax.grid(axis="x", color="#e0e0e0")
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig, rows


# ---------------------------------------------------------------------------- Bloom heat map


def bloom(result: dict) -> tuple[Figure, Rows]:
    """ASR and accuracy per Bloom level: one row per (judge, column), each cell with its own n."""
    cols = tables.columns(result)
    levels = tables.blooms(result)
    rows: Rows = [["judge", "metric", "group", "bloom", "value", "ci_lo", "ci_hi", "n"]]
    labels, grid, counts = [], [], []
    for line in tables.bloom_rates(result):
        for cell in line["cells"]:
            rows.append(
                [line["judge"], line["metric"], line["group"], cell["bloom"], cell["value"], *cell["ci"], cell["n"]]
            )
        labels.append(f"{line['judge']} · {line['label']}")
        grid.append([_none(cell["value"]) for cell in line["cells"]])
        counts.append([cell["n"] for cell in line["cells"]])
    title = "ASR and accuracy by Bloom level (cell: rate and its own n)"
    if not levels or all(math.isnan(v) for line in grid for v in line):
        return empty_figure(title, _no_rates(result, cols)), rows
    fig = Figure(figsize=(max(6.4, 1.3 * len(levels) + 3), _height(len(labels), 0.4)), layout="constrained")
    ax = fig.subplots()
    image = ax.imshow(grid, cmap="viridis", vmin=0, vmax=1, aspect="auto")
    for i, line in enumerate(grid):
        for k, v in enumerate(line):
            text = "n/a" if math.isnan(v) else f"{v:.0%}"
            colour = "white" if not math.isnan(v) and v < 0.55 else "black"
            ax.text(k, i, f"{text}\nn={counts[i][k]}", ha="center", va="center", fontsize=7, color=colour)
    ax.set_xticks(range(len(levels)), levels, rotation=30, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    fig.colorbar(image, ax=ax, label="rate (ASR: lower is better; accuracy: higher)")
    fig.suptitle(title, fontsize=11)
    return fig, rows


# ---------------------------------------------------------------------------- agreement


MATRIX_NUMBERS = 12


def agreement(result: dict) -> tuple[Figure, Rows]:
    """Spearman's ρ between every two judges' item scores (the agreement matrix)."""
    pairs = tables.spearman_pairs(result)
    rows: Rows = [["judge_a", "judge_b", "spearman_rho", "n_items"]]
    rows += [[p["a"], p["b"], p["rho"], p["n"]] for p in pairs]
    names = sorted({p["a"] for p in pairs} | {p["b"] for p in pairs})
    title = "Agreement between judges: Spearman's ρ of their item scores"
    if not names:
        return empty_figure(title, "No two judges have scored the same items yet."), rows
    index = {n: i for i, n in enumerate(names)}
    grid = [[1.0 if a == b else math.nan for b in names] for a in names]
    ns: dict[tuple[int, int], int] = {}
    for p in pairs:
        i, k = index[p["a"]], index[p["b"]]
        grid[i][k] = grid[k][i] = _none(p["rho"])
        ns[(i, k)] = ns[(k, i)] = p["n"]
    # Each cell keeps 0.8 in, room for its two lines of numbers, however long the names
    # down the side are: the figure grows by their width (beside the matrix: the colour bar).
    # Beyond MATRIX_NUMBERS judges the cells are colour only, a name's line high: LLMBar's 77
    # judges in numbered cells made a 66-inch figure that took minutes to draw. The numbers are
    # in the figure's CSV.
    labels = [f"{i + 1}. {n}" for i, n in enumerate(names)]
    numbered = len(names) <= MATRIX_NUMBERS
    side = max(2.0, (0.8 if numbered else 0.2) * len(names))
    fig = Figure(figsize=(max(6.4, _text_inches(labels) + side + 2.4), side + 1.4), layout="constrained")
    ax = fig.subplots()
    # "auto": the matrix fills the room the layout leaves it (a square one would be fitted to
    # the height and push the names off the canvas).
    image = ax.imshow(grid, cmap="RdBu", vmin=-1, vmax=1, aspect="auto")
    for i in range(len(names) if numbered else 0):
        for k in range(len(names)):
            v = grid[i][k]
            text = "" if i == k else ("n/a" if math.isnan(v) else f"{v:.2f}\nn={ns[(i, k)]}")
            ax.text(k, i, text, ha="center", va="center", fontsize=8, color="white" if abs(v) > 0.6 else "black")
    # Names once, in full, down the side; the columns carry their numbers (long names slanted
    # under the columns would run off the canvas).
    ax.set_xticks(range(len(names)), [str(i + 1) for i in range(len(names))], fontsize=None if numbered else 6)
    ax.set_yticks(range(len(names)), labels)
    fig.colorbar(image, ax=ax, shrink=0.7, label="Spearman's ρ (1: same ranking of items)")
    fig.suptitle(title, fontsize=11)
    return fig, rows


# ---------------------------------------------------------------------------- calibration


def reliability(result: dict) -> tuple[Figure, Rows]:
    """The reliability curve of each judge's confidence: per bin of confidence, the share of
    votes right against the mean confidence (``calibration_bin_*`` rows); on the diagonal, a
    judge that is right as often as it says."""
    rows: Rows = [["judge", "convention", "bin_lo", "bin_hi", "confidence", "accuracy", "n"]]
    by_judge: dict[str, list] = {}
    confidences = {(r["judge"], r["group"]): r for r in select(result["rows"], metric="calibration_bin_confidence")}
    for found in select(result["rows"], metric="calibration_bin_accuracy"):
        confidence = confidences[found["judge"], found["group"]]
        lo, hi = (float(x) for x in found["group"].split("-"))
        rows.append(
            [found["judge"], found["convention"], lo, hi, confidence["estimate"], found["estimate"], found["n"]]
        )
        by_judge.setdefault(found["judge"], []).append((confidence["estimate"], found["estimate"], found["n"]))
    title = "Calibration: share right by the judge's confidence"
    if not by_judge:
        return empty_figure(
            title, "No data yet: no judge with option probabilities or repeated votes on items with a reference."
        ), rows
    legend_rows = math.ceil((len(by_judge) + 1) / 2)
    width = max(6.4, 2 * (_text_inches(list(by_judge)) + 0.8))
    fig = Figure(figsize=(width, 4.4 + 0.2 * legend_rows), layout="constrained")
    ax = fig.subplots()
    ax.plot([0, 1], [0, 1], color="#5f6368", linestyle="--", linewidth=1, label="calibrated judge")
    for k, (name, points) in enumerate(by_judge.items()):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", color=PALETTE[k % len(PALETTE)], label=name)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("confidence in its choice (mean per bin of 0.1)")
    ax.set_ylabel("share of votes right")
    ax.grid(color="#e0e0e0")
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig, rows


# ---------------------------------------------------------------------------- systems


def ratings(result: dict) -> tuple[Figure, Rows]:
    """A forest plot of the systems' ratings per judge (people first), plain and
    style-controlled side by side, with their 95% intervals (``tables.systems``)."""
    found = tables.systems(result)
    rows: Rows = [["judge", "system", "fit", "rating", "ci_lo", "ci_hi", "n"]]
    title = "Ratings of systems: plain and style-controlled (Chatbot Arena's scale)"
    if found is None:
        return empty_figure(title, "No data yet: no votes between answers that name their systems."), rows
    judges = found["judges"]
    per_row = min(len(judges), FOREST_PER_ROW)
    n_rows = math.ceil(len(judges) / per_row)
    n_systems = max(len(j["systems"]) for j in judges)
    names = [s["system"] for j in judges for s in j["systems"]]
    # Each panel as wide as its title (a judge's name) or 2.4 in, plus its systems' names.
    panel = max(2.4, _text_inches([j["judge"] for j in judges]) + 0.3) + _text_inches(names) + 0.3
    fig = Figure(figsize=(max(6.4, per_row * panel), n_rows * _height(n_systems, 0.35) + 0.6), layout="constrained")
    axes = fig.subplots(n_rows, per_row, squeeze=False)
    for k, judge in enumerate(judges):
        ax = axes[k // per_row][k % per_row]
        cells = judge["systems"]
        for offset, fit, colour in ((-0.15, "plain", PALETTE[0]), (0.15, "style", PALETTE[1])):
            ys, xs, errs = [], [], ([], [])
            for i, cell in enumerate(cells):
                rate = cell.get(fit)
                if rate is None:
                    continue
                rows.append([judge["judge"], cell["system"], fit, rate["value"], *rate["ci"], rate["n"]])
                lo, hi = _err(rate["value"], *rate["ci"])
                ys.append(i + offset)
                xs.append(_none(rate["value"]))
                errs[0].append(lo)
                errs[1].append(hi)
            label = "plain" if fit == "plain" else "style-controlled"
            ax.errorbar(
                xs, ys, xerr=errs, fmt="o", color=colour, markersize=4, capsize=2, label=label if k == 0 else None
            )
        ax.set_yticks(range(len(cells)), [c["system"] for c in cells])
        ax.invert_yaxis()
        ax.set_title(judge["judge"], fontsize=9)
        ax.grid(axis="x", color="#e0e0e0")
    for k in range(len(judges), n_rows * per_row):
        axes[k // per_row][k % per_row].set_visible(False)
    fig.suptitle(title, fontsize=11)
    fig.legend(loc="outside lower center", ncols=2, frameon=False)
    return fig, rows


PLOTS: dict[str, Plot] = {
    "forest": Plot("ASR and accuracy per judge", "Forest plot of ASR and accuracy per judge with intervals", forest),
    "position": Plot("Position preference", "Bars of first, tie and second shares per judge", position),
    "verbosity": Plot("Verbosity", "Share of votes for the longer answer by length difference", verbosity),
    "lc": Plot("Length-controlled vs raw", "Raw and length-controlled win rates per judge and group", lc),
    "bloom": Plot("By Bloom level", "Heat map of ASR and accuracy per Bloom level", bloom),
    "agreement": Plot("Agreement matrix", "Matrix of Spearman correlations between judges", agreement),
    "reliability": Plot(
        "Calibration",
        "Share of votes right against the judge's confidence, per judge, beside the diagonal",
        reliability,
    ),
    "ratings": Plot(
        "Ratings of systems",
        "Forest plot of each system's rating per judge, plain and style-controlled, with intervals",
        ratings,
    ),
}
# Shown only where answers name their systems (the dashboard's "Systems" section).
SYSTEMS_PLOTS = ("ratings",)


def render(fig: Figure, fmt: str) -> bytes:
    """The figure as SVG or PNG bytes, the same bytes for the same figure."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown plot format {fmt!r}; expected one of {', '.join(FORMATS)}")
    out = io.BytesIO()
    metadata = {"Date": None} if fmt == "svg" else {"Software": None}
    with rc_context(_RC):
        fig.savefig(out, format=fmt, dpi=150, bbox_inches="tight", pad_inches=0.15, metadata=metadata)
    return out.getvalue()


def draw(name: str, result: dict) -> tuple[Figure, Rows]:
    """The named plot of ``result`` (KeyError for an unknown name)."""
    with rc_context(_RC):
        return PLOTS[name].draw(result)
