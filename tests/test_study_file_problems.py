"""A study file with several problems is reported whole: every problem with its file, line and
field, the same list from `manage.py import_study`, the admin's upload report and the API (the
first 200, then "and N more")."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.models import Study
from annotations.study_files import MAX_PROBLEMS, StudyFileError, study_import
from tests.test_study_import import minimal_document

pytestmark = pytest.mark.django_db


def three_problems() -> tuple[str, list[tuple[int, str, str]]]:
    """A file with three different problems, and (line, field, message) of each, lines counted
    by hand from the text below."""
    document = minimal_document(status="open")
    second = json.loads(json.dumps(document["questions"][0]).replace("q1", "q2"))
    document["questions"][0]["bloom"] = "guessing"
    second["answers"][1]["text"] = ""
    document["questions"].append(second)
    text = json.dumps(document, indent=2)
    lines = text.splitlines()

    def line_of(needle: str) -> int:
        return next(n for n, line in enumerate(lines, start=1) if needle in line)

    return text, [
        (line_of('"status": "open"'), "study.status", "must be one of draft, collecting, closed"),
        (line_of('"id": "q1"'), "questions[0].bloom", "unknown Bloom level 'guessing'"),
        (line_of('"id": "q2-a2"'), "questions[1].answers[1].text", "required text"),
    ]


def test_the_command_names_every_problem_with_its_line_and_field(tmp_path):
    text, expected = three_problems()
    path = tmp_path / "three.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(path), "--format", "biasstudy")
    message = str(caught.value)
    assert message.splitlines()[0] == "import failed, nothing was written: 3 problems:"
    for line, field, problem in expected:
        assert f"{path}, line {line}: {field}: {problem}" in message
    assert not Study.objects.exists()


def test_the_admin_upload_report_shows_every_problem(staff_client, settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    text, expected = three_problems()
    upload = reverse("admin:annotations_study_upload")
    response = staff_client.post(upload, {"file": SimpleUploadedFile("three.json", text.encode())})
    report = staff_client.get(response["Location"])
    rows = report.context["problem"].problems
    assert [(p.path, p.line, p.field) for p in rows] == [("three.json", line, field) for line, field, _ in expected]
    html = report.content.decode()
    assert html.count('class="up-problem-row"') == 3 and "Fix these 3 problems" in html
    for _line, field, problem in expected:
        assert f"<code>{field}</code>" in html and problem.replace("'", "&#x27;") in html
    assert not Study.objects.exists()


def test_the_api_answers_with_every_problem(token_client):
    text, expected = three_problems()
    response = token_client.generic("POST", "/api/v1/studies/", text, content_type="application/json")
    body = response.json()
    assert response.status_code == 400
    assert [(p["line"], p["field"]) for p in body["problems"]] == [(line, field) for line, field, _ in expected]
    assert (body["field"], body["more"]) == ("study.status", 0)


def test_past_the_bound_the_first_problems_are_listed_and_the_rest_counted(tmp_path):
    document = minimal_document()
    question = document["questions"][0]
    document["questions"] = [{**question, "id": f"q{i}", "bloom": "guessing"} for i in range(MAX_PROBLEMS + 50)]
    path = tmp_path / "many.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StudyFileError) as caught:
        study_import(path=path, fmt="biasstudy")
    error = caught.value
    assert (len(error.problems), error.more) == (MAX_PROBLEMS, 50)
    assert error.problems[-1].field == f"questions[{MAX_PROBLEMS - 1}].bloom"
    message = str(error)
    assert message.startswith(f"{MAX_PROBLEMS + 50} problems:") and message.endswith("and 50 more")


def test_a_file_with_one_problem_reads_as_before(tmp_path):
    document = minimal_document()
    document["questions"][0]["bloom"] = "guessing"
    path = tmp_path / "one.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StudyFileError) as caught:
        study_import(path=path, fmt="biasstudy")
    assert caught.value.problems == [caught.value] and caught.value.more == 0
    assert str(caught.value).startswith(f"{path}, line 1: questions[0].bloom: unknown Bloom level 'guessing' (one of")


def test_every_bad_line_of_a_chen2024_folder_is_named(tmp_path):
    folder = tmp_path / "chen"
    folder.mkdir()
    good = {
        "question_id": "Q1",
        "question": "Why is the sky blue?",
        "level": "Remembering",
        "answers": {
            "answer1": {"answer_id": "A1xxxxxx", "answer": "Scattering."},
            "answer2": {"answer_id": "A2xxxxxx", "answer": "Rayleigh scattering."},
        },
    }
    bad_level = {**good, "question_id": "Q2", "level": "Guessing"}
    (folder / "raw.json").write_text("\n".join(json.dumps(row) for row in (good, bad_level, good)) + "\n")
    perturbed = {"question_id": "Q1-gender", "answers": {"answer1": {"answer_id": "A1xxxxxxabcd", "answer": "X"}}}
    (folder / "gender.json").write_text("{not json\n" + json.dumps(perturbed) + "\n")
    with pytest.raises(StudyFileError) as caught:
        study_import(path=folder, fmt="chen2024")
    found = [(p.path.rsplit("/", 1)[-1], p.line, p.field) for p in caught.value.problems]
    assert found == [
        ("raw.json", 2, "level"),
        ("raw.json", 3, "question_id"),  # the first line's question again
        ("gender.json", 1, None),  # not JSON
        ("gender.json", 2, "answers"),  # no answer marked as perturbed
    ]
    assert not Study.objects.exists()
