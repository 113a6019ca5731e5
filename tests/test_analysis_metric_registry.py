"""The metric registry is what every output reads: every row is a figure its function declares,
a metric registered with its name alone shows in the dashboard, the text, the CSV and the API
with no other change and may read any column of the votes, and the outputs' own lists of
figures name declared figures only."""

import csv
import io
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis import rows, simulated_judges, tables, text
from analysis.compute import analyze
from analysis.rows import FIGURES, JUDGE_METRICS, STUDY_METRICS, YIELDS, Figure, judge_metric
from analysis.simulate import JudgeParams
from tests.factories import make_question, make_study, make_variant
from tests.test_analysis_rows import simulated_study


@pytest.fixture
def registry():
    """The registries as they are, restored after the test (a test may register a metric)."""
    saved = [dict(d) for d in (JUDGE_METRICS, STUDY_METRICS, FIGURES, YIELDS)]
    yield
    for d, copy in zip((JUDGE_METRICS, STUDY_METRICS, FIGURES, YIELDS), saved, strict=True):
        d.clear()
        d.update(copy)


def test_every_row_is_a_figure_declared_by_the_function_that_yields_it(registry):
    made: dict[str, set] = {}
    for registry_of in (JUDGE_METRICS, STUDY_METRICS):
        for name, rows_of in list(registry_of.items()):

            def recording(data, rows_of=rows_of, name=name):
                found = list(rows_of(data))
                made.setdefault(name, set()).update(r["metric"] for r in found)
                return found

            registry_of[name] = recording
    result = analyze(simulated_study(), study="s", votes_per_item=4)
    for name, metrics in made.items():
        assert metrics <= set(YIELDS[name]), (name, metrics - set(YIELDS[name]))
    assert {r["metric"] for r in result["rows"]} <= set(FIGURES)
    # The report carries each figure's declaration for whoever reads its rows (the API).
    assert result["figures"]["items_tied"]["label"] == "Tied items"
    assert result["figures"]["votes_tied"]["section"] == "position"


def test_every_figure_has_a_label_a_definition_and_what_its_n_counts():
    for f in FIGURES.values():
        assert f.label and f.definition.endswith(".") and f.base, f.metric


def test_the_outputs_own_lists_name_declared_figures():
    assert set(FIGURES) >= tables.SHOWN_BY_TABLES, tables.SHOWN_BY_TABLES - set(FIGURES)
    assert set(FIGURES) >= text.PRINTED_ABOVE | text.CURVE_POINTS


def test_the_three_tie_figures_are_two_names_each_labelled_by_what_it_counts():
    tie_figures = {name for name in FIGURES if "tie" in name and not name.startswith(("mean_prob", "vote_pairs"))}
    assert tie_figures == {"items_tied", "votes_tied"}
    assert FIGURES["items_tied"].label == "Tied items" and FIGURES["items_tied"].base == "item preferences"
    assert FIGURES["votes_tied"].label == "Tied votes" and "votes" in FIGURES["votes_tied"].base


def test_a_declaration_names_a_known_section_and_format_and_a_name_once():
    with pytest.raises(ValueError, match="no section 'tabel1'"):
        Figure("x", section="tabel1")
    with pytest.raises(ValueError, match="no format 'percentage'"):
        Figure("x", format="percentage")
    with pytest.raises(ValueError, match="declared already, differently"):
        rows.declare(Figure("items_tied", label="Ties"))


@pytest.fixture
def voted_study(db):
    study = make_study(slug="registry-s", votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="short answer " * (i + 1), a2="a longer answer " * 6)
        make_variant(q, kind="reference", of="a2")
    simulated_judges.judge_simulate(study=study, name="sim-1", params=JudgeParams(position=0.5), seed=1)
    return study


def test_a_metric_registered_by_name_alone_shows_in_every_output(registry, voted_study, staff_client):
    # The call form of CONTRIBUTING's recipe with no declaration: the defaults. It reads a column
    # that no list of columns names (when a vote was received): a judge's metric sees every column.
    @judge_metric("fast_vote_share")
    def fast_vote_share(data):
        votes = data.votes
        share = float(votes["received_at"].notna().mean()) if len(votes) else None
        return [data.row("fast_vote_share", share, n=len(votes))]

    assert FIGURES["fast_vote_share"] == Figure("fast_vote_share", "fast_vote_share", rows.OTHER, rows.NUMBER)
    body = staff_client.get(reverse("analysis:study", args=["registry-s"])).content.decode()
    assert '<h2 id="other-figures">Other figures</h2>' in body and "<caption>Other figures</caption>" in body
    assert '<td class="name">fast_vote_share</td><td class="name"></td><td>1 n=' in body

    out = StringIO()
    call_command("analyze", "--study", "registry-s", stdout=out)
    assert "  fast_vote_share: 1 n=" in out.getvalue()

    csv_text = b"".join(
        staff_client.get(reverse("analysis:export", args=["registry-s", "metrics"])).streaming_content
    ).decode()
    assert any(line[3] == "fast_vote_share" for line in csv.reader(io.StringIO(csv_text)))

    api = json.loads(staff_client.get(reverse("api:study-metrics", args=["registry-s"])).content)
    assert any(r["metric"] == "fast_vote_share" for r in api["rows"])
    assert api["figures"]["fast_vote_share"] == {
        "label": "fast_vote_share",
        "section": "other",
        "format": "number",
        "definition": "",
        "base": "",
    }


def test_a_metric_declared_with_a_section_shows_in_that_sections_table(registry, voted_study, staff_client):
    @judge_metric(
        "slow_vote_share",
        label="Slow votes",
        section="position",
        format=rows.PERCENT,
        definition="The share of the judge's votes slower than a minute.",
        base="votes",
    )
    def slow_vote_share(data):
        votes = data.votes
        return [data.row("slow_vote_share", float(votes["received_at"].isna().mean()), n=len(votes))]

    body = staff_client.get(reverse("analysis:study", args=["registry-s"])).content.decode()
    assert "<caption>Positional preference (Table 2): further figures</caption>" in body
    assert '<abbr title="The share of the judge&#x27;s votes slower than a minute.">Slow votes</abbr>' in body
    assert '<dt id="glossary-slow_vote_share">Slow votes</dt>' in body
    assert 'id="other-figures"' not in body


@pytest.mark.parametrize(
    ("value", "fmt", "text"),
    [
        (0.1234, rows.PERCENT, "12.3%"),
        (-0.045, rows.POINTS, "-4.5 pt"),
        (1012.4, rows.RATING, "1012"),
        (0.4213, rows.NUMBER, "0.421"),
        (0.0004, rows.P_VALUE, "< 0.001"),
        (0.0213, rows.P_VALUE, "0.021"),
        (None, rows.PERCENT, "n/a"),
    ],
)
def test_each_format_reads_as_its_outputs_print_it(value, fmt, text):
    assert rows.formatted(value, fmt) == text


def test_a_row_as_text_carries_its_interval_n_test_convention_and_note():
    found = rows.row("J", "llm", "position_diff", 0.2, ci=(0.05, 0.35), n=40, p_value=0.01, p_adjusted=0.03, note="x")
    assert rows.figure_text(found) == "+20.0 pt [+5.0 pt, +35.0 pt] n=40, p 0.010 (adjusted 0.030); x"
