"""The dashboard's figures: staff only, valid SVG and PNG, the same bytes twice, names never cut,
the CSV behind each holds the report's numbers, and an empty study draws a "no data" figure."""

import csv
import io
import struct
import xml.etree.ElementTree as ET

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from analysis import current_report, plots, rows, simulated_judges
from analysis.simulate import JudgeParams
from tests.factories import make_question, make_study, make_variant

LONG = "SmolLM2 local (vote-only, constrained)"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def plot_study(db):
    study = make_study(slug="plot-s", votes_per_item=2, gold_min_accuracy=0.8)
    for i in range(6):
        q = make_question(
            study, a1="word " * (5 + 7 * i), a2="a longer answer " * 4, bloom_level=("applying", "creating")[i % 2]
        )
        make_variant(q, kind="factual_error", text="wrong " * 10)
        make_variant(q, kind="reference", of="a1" if i % 2 else "a2")
    simulated_judges.judge_simulate(study=study, name=LONG, params=JudgeParams(position=1.0), seed=5)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), votes_per_item=2, seed=6)
    return study


def url(slug, name, fmt):
    return reverse("analysis:plot", args=[slug, name, fmt])


def png_size(body: bytes) -> tuple[int, int]:
    assert body[:8] == PNG_SIGNATURE
    assert body[12:16] == b"IHDR"
    return struct.unpack(">II", body[16:24])


def read_csv(response) -> list[dict]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_each_plot_is_valid_svg_and_png_and_the_same_bytes_every_time(plot_study, staff_client, name):
    svg = staff_client.get(url("plot-s", name, "svg"))
    assert svg.status_code == 200 and svg["Content-Type"] == "image/svg+xml"
    root = ET.fromstring(svg.content)  # noqa: S314 (our own output)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert b"<dc:date>" not in svg.content  # no date: the same report gives the same file
    # Drawn again (the view's second answer would come from the cache): the same bytes.
    result = current_report.study_analyze(study=plot_study)
    assert plots.render(plots.draw(name, result)[0], "svg") == svg.content
    png = staff_client.get(url("plot-s", name, "png"))
    assert png.status_code == 200 and png["Content-Type"] == "image/png"
    width, height = png_size(png.content)
    assert width > 300 and height > 100
    assert plots.render(plots.draw(name, result)[0], "png") == png.content


def test_a_download_link_names_the_file(plot_study, staff_client):
    response = staff_client.get(url("plot-s", "forest", "png"), {"download": "1"})
    assert response["Content-Disposition"] == 'attachment; filename="plot-s-forest.png"'


@pytest.mark.parametrize("name", list(plots.PLOTS))
def test_no_text_falls_outside_the_figure_so_long_judge_names_are_whole(plot_study, name):
    result = current_report.study_analyze(study=plot_study)
    fig, _ = plots.draw(name, result)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # lays the figure out, as saving it does
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    # The agreement matrix numbers its judges; this study's answers name no systems, so the
    # ratings' figure says it has nothing to draw (tests/test_ratings_dashboard.py draws one).
    assert any(LONG in t for t in texts) or name in ("agreement", *plots.SYSTEMS_PLOTS)
    # Everything drawn (what bbox_inches="tight" measures) lies on the figure's own canvas:
    # the layout made room for every name; a tick label may overhang by half a digit.
    drawn = fig.get_tightbbox(canvas.get_renderer())
    width, height = fig.get_size_inches()
    slack = 0.06
    assert drawn.x0 >= -slack and drawn.y0 >= -slack, name
    assert drawn.x1 <= width + slack and drawn.y1 <= height + slack, (name, drawn, (width, height))


def test_the_long_judge_name_is_text_in_the_svg(plot_study, staff_client):
    body = staff_client.get(url("plot-s", "position", "svg")).content.decode()
    assert LONG in body  # text stays text: searchable and read out by screen readers


def test_the_forest_csv_holds_table_one(plot_study, staff_client):
    drawn = read_csv(staff_client.get(url("plot-s", "forest", "csv")))
    table = current_report.study_analyze(study=plot_study)["rows"]
    row = next(r for r in drawn if r["judge"] == LONG and r["metric"] == "asr" and r["group"] == "factual_error")
    expected = rows.one(table, judge=LONG, metric="asr", group="factual_error", bloom="")
    assert float(row["value"]) == pytest.approx(expected["estimate"])
    assert float(row["ci_lo"]) == pytest.approx(expected["ci_lo"]) and float(row["ci_hi"]) == pytest.approx(
        expected["ci_hi"]
    )
    assert int(row["n"]) == expected["n"]
    acc = next(r for r in drawn if r["judge"] == LONG and r["metric"] == "accuracy")
    expected = rows.estimate(table, judge=LONG, metric="accuracy", group="factual_error", bloom="")
    assert float(acc["value"]) == pytest.approx(expected)
    assert any(r["judge"] == "random judge" for r in drawn)


def test_the_position_csv_has_every_judge_human_nf_and_chance(plot_study, staff_client):
    drawn = read_csv(staff_client.get(url("plot-s", "position", "csv")))
    result = current_report.study_analyze(study=plot_study)
    assert [r["judge"] for r in drawn] == [*(j["judge"] for j in result["judges"]), "Human-NF", "random judge"]
    first = rows.one(result["rows"], judge=LONG, metric="position_first", bloom="")
    row = next(r for r in drawn if r["judge"] == LONG)
    assert float(row["first"]) == pytest.approx(first["estimate"]) and int(row["n"]) == first["n"]
    diff = rows.one(result["rows"], judge=LONG, metric="position_diff", bloom="")
    assert float(row["diff_lo"]) == pytest.approx(diff["ci_lo"])


def test_the_verbosity_lc_bloom_and_agreement_csvs_hold_the_report(plot_study, staff_client):
    table = current_report.study_analyze(study=plot_study)["rows"]
    verbosity = read_csv(staff_client.get(url("plot-s", "verbosity", "csv")))
    mine = [r for r in verbosity if r["judge"] == LONG]
    assert [int(r["n"]) for r in mine] == [b["n"] for b in rows.select(table, judge=LONG, metric="verbosity_bin")]
    lc = read_csv(staff_client.get(url("plot-s", "lc", "csv")))
    control = next(r for r in lc if r["judge"] == LONG and r["group"] == "control")
    expected = rows.one(table, judge=LONG, metric="lc_winrate", group="control")
    assert float(control["lc"]) == pytest.approx(expected["estimate"])
    assert float(control["lc_lo"]) == pytest.approx(expected["ci_lo"])
    assert int(control["n"]) == expected["n"]
    bloom = read_csv(staff_client.get(url("plot-s", "bloom", "csv")))
    cell = next(
        r
        for r in bloom
        if r["judge"] == LONG and r["metric"] == "asr" and r["group"] == "reference" and r["bloom"] == "creating"
    )
    assert int(cell["n"]) == rows.one(table, judge=LONG, metric="asr", group="reference", bloom="creating")["n"]
    assert {r["bloom"] for r in bloom} == {"applying", "creating"}
    agreement = read_csv(staff_client.get(url("plot-s", "agreement", "csv")))
    assert [(r["judge_a"], r["judge_b"]) for r in agreement] == [
        (s["judge"], s["group"]) for s in rows.select(table, metric="spearman_rho")
    ]


def test_a_plot_follows_the_dashboard_filters(plot_study, staff_client):
    drawn = read_csv(staff_client.get(url("plot-s", "bloom", "csv"), {"bloom": "creating"}))
    assert {r["bloom"] for r in drawn} == {"creating"}
    assert staff_client.get(url("plot-s", "bloom", "svg"), {"min_ms": "-1"}).status_code == 400


def test_an_empty_study_draws_a_no_data_figure_not_an_error(db, staff_client):
    make_study(slug="empty-s")
    for name in plots.PLOTS:
        svg = staff_client.get(url("empty-s", name, "svg"))
        assert svg.status_code == 200, name
        assert "No " in svg.content.decode() and ("No data yet" in svg.content.decode() or name == "agreement")
        png_size(staff_client.get(url("empty-s", name, "png")).content)
        drawn = read_csv(staff_client.get(url("empty-s", name, "csv")))
        assert all(r.get("value", "") in ("", None) for r in drawn if r.get("judge") != "random judge"), name


def test_unknown_plots_and_formats_are_not_found(plot_study, staff_client):
    assert staff_client.get(url("plot-s", "pie", "svg")).status_code == 404
    assert staff_client.get(url("plot-s", "forest", "gif")).status_code == 404


def test_anonymous_visitors_and_non_staff_users_get_no_plot(plot_study, anon_client):
    member = Client()
    member.force_login(get_user_model().objects.create_user("someone", password="pw-123456789"))
    for client in (anon_client, member):
        for fmt in ("svg", "png", "csv"):
            response = client.get(url("plot-s", "forest", fmt))
            assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_the_agreement_matrix_keeps_its_cells_readable_beside_a_long_judge_name():
    # Three judges, one with a long name: the names down the side once squeezed the matrix to
    # a corner of the figure, its cells' numbers printed over each other.
    names = [
        "GPT-4 / Metrics_Reference",
        "Humans",
        "SmolLM2 local (vote-only, answer12 labels, a very long judge name)",
    ]
    pairs = [rows.row(a, "", "spearman_rho", 0.25, n=710, group=b) for i, a in enumerate(names) for b in names[i + 1 :]]
    fig, _ = plots.draw("agreement", {"rows": pairs})
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    cells = [t.get_window_extent(renderer) for t in fig.axes[0].texts if t.get_text()]
    assert len(cells) == 6
    assert not [(a, b) for i, a in enumerate(cells) for b in cells[i + 1 :] if a.overlaps(b)]
    matrix = fig.axes[0].get_window_extent(renderer)
    assert matrix.width / fig.dpi >= 0.8 * len(names) - 0.01  # each cell at least 0.8 in wide
    assert any(names[2] in t.get_text() for t in fig.axes[0].get_yticklabels())


def test_votes_on_unperturbed_pairs_only_say_there_are_no_perturbed_items_not_no_data(db, staff_client):
    # Imported MT-bench, PRD or LLMBar data: thousands of counted votes, no perturbation group.
    study = make_study(slug="pairs-s", votes_per_item=2)
    make_question(study)
    simulated_judges.judge_simulate(study=study, name="judge", params=JudgeParams(), seed=1)
    for name in ("forest", "bloom"):
        body = staff_client.get(url("pairs-s", name, "svg")).content.decode()
        assert "No perturbed items" in body and "No data yet" not in body, name
    assert "No data yet" not in staff_client.get(url("pairs-s", "position", "svg")).content.decode()


def many_judges(n: int) -> dict:
    """A report of ``n`` judges (LLMBar has 77) with one verbosity bin each and every pair ranked."""
    names = [f"Evaluator {i} / Strategy_with_a_name" for i in range(n)]
    bins = [rows.row(name, "llm", "verbosity_bin", 0.5, ci=(0.4, 0.6), n=10, group="0-10") for name in names]
    spearman = [
        rows.row(a, "llm", "spearman_rho", 0.5, n=9, group=b) for i, a in enumerate(names) for b in names[i + 1 :]
    ]
    return {
        "measure": "words",
        "conventions": {"verbosity_bin_width": 10},
        "judges": [{"judge": name, "kind": "llm"} for name in names],
        "rows": [*bins, *spearman],
    }


def laid_out(fig):
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def test_forty_judges_leave_the_verbosity_curve_its_axes_and_their_legend_on_the_canvas():
    fig, _ = plots.draw("verbosity", many_judges(40))
    renderer = laid_out(fig)
    assert fig.axes[0].get_window_extent(renderer).height / fig.dpi > 2  # once squashed to nothing
    drawn, (width, height) = fig.get_tightbbox(renderer), fig.get_size_inches()
    assert drawn.x0 >= -0.06 and drawn.y0 >= -0.06 and drawn.x1 <= width + 0.06 and drawn.y1 <= height + 0.06


def test_a_matrix_of_many_judges_is_drawn_in_colour_only_and_its_numbers_are_in_the_csv():
    fig, numbers = plots.draw("agreement", many_judges(40))
    laid_out(fig)
    # 0.8 in per numbered cell made LLMBar's matrix 66 inches wide and minutes to draw.
    assert fig.get_size_inches()[1] <= 0.2 * 40 + 1.5
    assert not [t for t in fig.axes[0].texts if t.get_text()]
    assert len(numbers) == 1 + 40 * 39 // 2


def test_a_study_of_many_kinds_wraps_the_forest_plot_into_rows_of_legible_panels(db):
    # The demo has eleven ASR and accuracy columns: drawn in one strip, each panel was a few
    # millimetres wide once the dashboard scaled the figure to its width.
    study = make_study(slug="kinds-s", votes_per_item=2)
    kinds = ["factual_error", "reference", "rich_content", "distraction", "verbosity", "refinement", "identity"]
    for i in range(4):
        q = make_question(study, a1="word " * (5 + i), a2="another answer " * 3)
        for kind in kinds:
            make_variant(q, kind=kind, text=f"{kind} " * 8)
    simulated_judges.judge_simulate(study=study, name=LONG, params=JudgeParams(), seed=3)
    fig, _ = plots.draw("forest", current_report.study_analyze(study=study))
    renderer = laid_out(fig)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == len(kinds) + 1  # an ASR panel per kind and factual errors' accuracy
    width, height = fig.get_size_inches()
    assert width <= 15 and width / height < 4  # rows of panels, not one long strip
    assert len({round(ax.get_position().y0, 3) for ax in panels}) == 2  # four and four
    for ax in panels:
        assert ax.get_window_extent(renderer).width / fig.dpi > 1.5, ax.get_title()
    # Every row names the judges on its first panel.
    for ax in panels:
        if ax.get_subplotspec().is_first_col():
            assert [t.get_text() for t in ax.get_yticklabels() if t.get_visible()] == [LONG]
