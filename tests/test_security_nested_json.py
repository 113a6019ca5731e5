"""JSON nested deep enough to exhaust recursion, nested deeper than a study document may be, or
holding numbers no column can store (1e400, 10**30) is a 400 naming where, in the study import
(body and file) and in every JSON body the API parses, such as a run's creation; never a 500."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from annotations.models import Answer, Study
from tests.factories import make_llm_judge, make_question, make_study
from tests.test_api_import import post_json
from tests.test_study_import import minimal_document, write


def nested(depth: int, leaf: str = "1") -> str:
    return '{"x": ' * depth + leaf + "}" * depth


def with_provenance(raw: str) -> str:
    """The minimal document as text, with `raw` (JSON text) as one variant's provenance."""
    document = minimal_document()
    document["questions"][0]["answers"][2]["provenance"] = "@@"
    return json.dumps(document).replace('"@@"', raw)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"format": ' + "[" * 5_000 + "]" * 5_000 + "}", "nested too deeply"),
        (with_provenance(nested(500)), "nested more than 32 levels deep"),
        (with_provenance(nested(40)), "nested more than 32 levels deep"),
        (with_provenance('{"temperature": 1e400}'), "inf is not a number that can be stored"),
        (with_provenance('{"temperature": -1e400}'), "-inf is not a number that can be stored"),
        (with_provenance('{"seed": 1' + "0" * 30 + "}"), "the number is too large to store"),
        (with_provenance('{"seed": 1' + "0" * 5_000 + "}"), "not valid JSON"),
        (with_provenance('{"temperature": NaN}'), "NaN is not a JSON number"),
        (with_provenance('{"temperature": Infinity}'), "Infinity is not a JSON number"),
    ],
)
def test_a_hostile_study_body_is_a_400_and_nothing_is_written(token_client, body, message):
    response = post_json(token_client, body)
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]
    assert not Study.objects.exists() and not Answer.objects.exists()


def test_the_deep_value_is_named_by_its_path(token_client):
    response = post_json(token_client, with_provenance('{"temperature": 1e400}'))
    assert response.json()["field"] == "questions[0].answers[2].provenance.temperature"


def test_the_command_gives_the_same_message(db, tmp_path):
    with pytest.raises(CommandError, match=r"study\.json: not readable: nested too deeply"):
        call_command("import_study", str(write(tmp_path, "[" * 100_000 + "]" * 100_000)), "--format", "biasstudy")
    with pytest.raises(CommandError, match=r"questions\[0\]\.answers\[2\]\.provenance\.temperature: inf is not"):
        call_command(
            "import_study", str(write(tmp_path, with_provenance('{"temperature": 1e400}'))), "--format", "biasstudy"
        )
    assert not Study.objects.exists()


def test_a_chen2024_line_nested_too_deeply_names_its_line(db, tmp_path):
    folder = tmp_path / "chen"
    folder.mkdir()
    (folder / "raw.json").write_text("\n" + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"raw\.json, line 2: not readable: nested too deeply"):
        call_command("import_study", str(folder), "--format", "chen2024")


@pytest.fixture
def run_target(db):
    study = make_study(slug="deep")
    make_question(study)
    return study, make_llm_judge()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"study": "deep", "judge": ' + nested(100) + "}", "nested more than 32 levels deep"),
        ('{"study": "deep", "judge": 1, "votes_per_item": 1e400}', "votes_per_item: inf is not a number"),
        ('{"study": "deep", "judge": 1, "votes_per_item": NaN}', "JSON parse error"),
    ],
)
def test_a_hostile_run_creation_body_is_a_400(token_client, run_target, body, message):
    response = token_client.generic("POST", reverse("api:runs"), body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert message in response.json()["detail"]


def test_an_ordinary_run_creation_body_still_parses(token_client, run_target):
    study, config = run_target
    body = json.dumps({"study": study.slug, "judge": config.judge.pk, "votes_per_item": 1})
    response = token_client.generic("POST", reverse("api:runs"), body, content_type="application/json")
    assert response.status_code == 201, response.content
