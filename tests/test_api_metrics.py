"""Metrics and CSV exports through the API: the very output of `analyze --json` and the
export_* commands, with the same filters, and bad filters named in a 400."""

import json
from datetime import datetime
from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from analysis import rows, simulated_judges
from analysis.simulate import JudgeParams
from annotations.models import Vote
from tests.factories import make_question, make_study, make_variant


@pytest.fixture
def analysed_study(db):
    study = make_study(slug="metrics-s", votes_per_item=2)
    for i in range(6):
        q = make_question(
            study,
            a1="short answer " * (i + 1),
            a2="a longer answer " * 6,
            bloom_level="remembering" if i % 2 else "applying",
        )
        make_variant(q, kind="reference", of="a2" if i % 2 else "a1")
        make_variant(q, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.judge_simulate(study=study, name="sim-1", params=JudgeParams(position=0.5), seed=1)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), seed=2, flag_share=0.25)
    return study


def command_json(*args: str) -> dict:
    out = StringIO()
    call_command("analyze", "--study", "metrics-s", "--json", *args, stdout=out)
    return json.loads(out.getvalue())


def report_of(body: dict) -> dict:
    """The metrics without when and from how many votes they were computed (the command prints
    the report alone)."""
    return {key: value for key, value in body.items() if key not in ("computed_at", "n_votes", "updating")}


def command_csv(name: str, *args: str) -> str:
    out = StringIO()
    call_command(f"export_{name}", "--study", "metrics-s", "-o", "-", *args, stdout=out)
    return out.getvalue()


METRICS = reverse("api:study-metrics", args=["metrics-s"])

# The same filters, as the command's options and as the API's query string.
FILTERED = (
    [
        "--bootstrap",
        "50",
        "--seed",
        "3",
        "--include-flagged",
        "--min-ms",
        "2500",
        "--bloom",
        "remembering",
        "--group",
        "reference",
        "--since",
        "2000-01-01T00:00:00Z",
        "--measure",
        "chars",
        "--bin-width",
        "25",
    ],
    {
        "bootstrap": 50,
        "seed": 3,
        "include_flagged": "true",
        "min_ms": 2500,
        "bloom": "remembering",
        "group": "reference",
        "since": "2000-01-01T00:00:00Z",
        "measure": "chars",
        "bin_width": 25,
    },
)


def test_the_metrics_are_the_analyze_command_s_json(analysed_study, token_client):
    response = token_client.get(METRICS, {"bootstrap": 50})
    assert response.status_code == 200
    body = response.json()
    assert report_of(body) == command_json("--bootstrap", "50")
    assert body["n_votes"] == Vote.objects.filter(item__study=analysed_study).count()
    assert body["updating"] is False and datetime.fromisoformat(body["computed_at"]) <= timezone.now()
    assert {j["judge"] for j in body["judges"]} == {"sim-1", "Humans"}
    asr = rows.select(body["rows"], judge=body["judges"][0]["judge"], metric="asr", bloom="")
    assert {r["group"] for r in asr} == {"reference", "factual_error"}


def test_filters_and_options_give_what_the_command_gives_with_the_same_ones(analysed_study, token_client):
    args, params = FILTERED
    response = token_client.get(METRICS, params)
    assert response.status_code == 200, response.json()
    body = response.json()
    assert report_of(body) == command_json(*args)
    assert body["filters"]["include_flagged"] is True
    assert body != token_client.get(METRICS, {"bootstrap": 50}).json()  # the filters did change something


def test_the_runs_parameter_is_the_commands_runs_option(analysed_study, token_client):
    body = token_client.get(METRICS, {"bootstrap": 20, "runs": "all"}).json()
    assert report_of(body) == command_json("--bootstrap", "20", "--runs", "all")
    assert body["filters"]["runs"] == "all" and body["conventions"]["runs"] == "all"


def test_repeated_parameters_select_several_bloom_levels_and_groups(analysed_study, token_client):
    query = "?bootstrap=20&bloom=remembering&bloom=applying&group=reference&group=factual_error"
    body = token_client.get(METRICS + query).json()
    expected = command_json(
        "--bootstrap",
        "20",
        "--bloom",
        "remembering",
        "--bloom",
        "applying",
        "--group",
        "reference",
        "--group",
        "factual_error",
    )
    assert report_of(body) == expected


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"min_ms": "-1"}, "min_ms"),
        ({"min_ms": "fast"}, "min_ms"),
        ({"bloom": "guessing"}, "bloom"),
        ({"group": "gender"}, "group"),  # a built-in kind, but not in this study
        ({"measure": "syllables"}, "measure"),
        ({"bin_width": "0"}, "bin_width"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2025-02-01T00:00:00Z", "until": "2025-01-01T00:00:00Z"}, "non_field_errors"),
        ({"bootstrap": "-5"}, "bootstrap"),
        ({"seed": "x"}, "seed"),
        ({"runs": "newest"}, "runs"),
        ({"runs": "12345"}, "runs"),  # no such run in this study
        ({"ratings_anchor": "model-nine"}, "ratings_anchor"),  # this study's answers name no systems
        ({"ratings_bootstrap": "rows"}, "ratings_bootstrap"),
    ],
)
def test_a_bad_filter_is_a_400_naming_it(analysed_study, token_client, params, field):
    response = token_client.get(METRICS, params)
    assert response.status_code == 400
    body = response.json()
    assert list(body) == ["detail", field], body
    assert body[field][0] and body["detail"].startswith(f"{field}: ")


@pytest.mark.parametrize("name", ["votes", "items", "metrics"])
def test_the_csv_exports_are_the_commands_output(analysed_study, token_client, name):
    response = token_client.get(reverse(f"api:study-export-{name}", args=["metrics-s"]))
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == f'attachment; filename="metrics-s-{name}.csv"'
    assert response.streaming
    text = b"".join(response.streaming_content).decode()
    assert text == command_csv(name)
    assert text.count("\n") > 10


@pytest.mark.parametrize("name", ["items", "metrics"])
def test_the_filtered_exports_take_the_analysis_filters(analysed_study, token_client, name):
    args = ["--include-flagged", "--bloom", "remembering", "--measure", "chars"]
    params = {"include_flagged": "true", "bloom": "remembering", "measure": "chars"}
    response = token_client.get(reverse(f"api:study-export-{name}", args=["metrics-s"]), params)
    text = b"".join(response.streaming_content).decode()
    assert text == command_csv(name, *args)
    assert text != command_csv(name)


def test_a_bad_export_filter_is_a_json_400_whatever_the_client_accepts(analysed_study, token_client):
    url = reverse("api:study-export-items", args=["metrics-s"])
    response = token_client.get(url, {"bloom": "guessing"}, HTTP_ACCEPT="text/csv")
    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert "bloom" in response.json()


@pytest.mark.parametrize(
    "name", ["api:study-metrics", "api:study-export-votes", "api:study-export-items", "api:study-export-metrics"]
)
def test_a_missing_study_is_a_404(db, token_client, name):
    response = token_client.get(reverse(name, args=["no-such-study"]))
    assert response.status_code == 404
    assert response.json()["detail"]


@pytest.mark.parametrize(
    ("persona", "status"), [("anon_client", 401), ("rater_session_client", 401), ("user_client", 403)]
)
def test_only_staff_read_metrics_and_exports(analysed_study, rater, persona, status, request):
    client = request.getfixturevalue(persona)
    for name in ["api:study-metrics", "api:study-export-votes", "api:study-export-items", "api:study-export-metrics"]:
        response = client.get(reverse(name, args=["metrics-s"]))
        assert response.status_code == status, name
        assert response.json()["detail"]


def test_an_empty_study_has_metrics_too(db, token_client):
    make_question(make_study(slug="metrics-s"))
    response = token_client.get(METRICS)
    assert response.status_code == 200
    assert report_of(response.json()) == command_json()
