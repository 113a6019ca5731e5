"""A vote file with several problems is reported whole, as a study file is: every problem with
its file, line and field, the same list from `manage.py import_votes`, the admin's progress page
and the API (the first 200, then "and N more"), and nothing is written."""

import csv
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from annotations.models import Judge, Question, Study, Vote
from annotations.study_files import MAX_PROBLEMS
from tests.factories import make_study
from tests.test_analysis_import import (
    GOOD_ROWS,
    mtbench_subset,  # noqa: F401 - a fixture
    needs_mtbench,
    write_csv,
)
from tests.test_import_llmbar import ROWS, write_llmbar
from tests.test_import_prd import FILES, PRD, prd_subset, rows  # noqa: F401 - a fixture
from vote_imports import importers, vote_import

pytestmark = pytest.mark.django_db

# (line, field, message) of each problem three_problems() puts in, lines counting the header as 1.
EXPECTED = [
    (2, "winner", "'both' is not a1, a2 or tie"),
    (3, "bloom", "'guessing' is not one of remembering, understanding, applying, analyzing, evaluating, creating"),
    (5, "response_ms", "'soon' is not a whole number of milliseconds (at most 2147483647)"),
]


def three_problems() -> list[list[str]]:
    """GOOD_ROWS (four votes) with three different problems on three lines (EXPECTED)."""
    rows = [list(r) for r in GOOD_ROWS]
    rows[0][5] = "both"  # winner
    rows[1][12] = "guessing"  # bloom
    rows[3][11] = "soon"  # response_ms
    return rows


def nothing_written() -> bool:
    return not Question.objects.exists() and not Vote.objects.exists() and not Judge.objects.exists()


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"


def test_the_command_names_every_problem_with_its_line_and_field(tmp_path):
    make_study(slug="votes")
    path = write_csv(tmp_path / "three.csv", three_problems())
    with pytest.raises(CommandError) as caught:
        call_command("import_votes", str(path), "--format", "csv", "--study", "votes", verbosity=0)
    lines = str(caught.value).splitlines()
    assert lines[0] == "import failed, nothing was written: 3 problems:"
    assert lines[1:] == [f"{path}, line {line}, field {field!r}: {message}" for line, field, message in EXPECTED]
    assert nothing_written()


def test_the_admin_progress_page_shows_every_problem(staff_client, tmp_path, django_capture_on_commit_callbacks):
    path = write_csv(tmp_path / "three.csv", three_problems())
    data = {"file": SimpleUploadedFile("mine.csv", path.read_bytes()), "format": "csv", "study": "new", "create": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(reverse("vote_imports:votes-import"), data)
    page = staff_client.get(response["Location"])
    progress = page.context["progress"]
    assert progress["state"] == "failed" and progress["more"] == 0
    assert progress["problems"] == [
        {"path": "mine.csv", "line": line, "field": field, "message": message} for line, field, message in EXPECTED
    ]
    html = page.content.decode()
    assert html.count('class="up-problem-row"') == 3 and "Fix these 3 problems" in html
    for line, field, _ in EXPECTED:
        assert f"<td>mine.csv</td><td>{line}</td>" in html and f"<code>{field}</code>" in html
    assert not Study.objects.filter(slug="new").exists() and nothing_written()


def test_the_api_answers_with_every_problem(token_client, tmp_path, django_capture_on_commit_callbacks):
    path = write_csv(tmp_path / "three.csv", three_problems())
    data = {"file": SimpleUploadedFile("mine.csv", path.read_bytes()), "study": "new", "create": "true"}
    with django_capture_on_commit_callbacks(execute=True):
        accepted = token_client.post(reverse("api:votes-import"), data, format="multipart")
    body = token_client.get(accepted["Location"]).json()
    assert body["state"] == "failed" and body["more"] == 0
    assert [(p["path"], p["line"], p["field"], p["detail"]) for p in body["problems"]] == [
        ("mine.csv", line, field, message) for line, field, message in EXPECTED
    ]
    assert (body["line"], body["field"]) == (2, "winner")  # the first at the top, as before
    assert not Study.objects.filter(slug="new").exists() and nothing_written()


def test_past_the_bound_the_first_problems_are_listed_and_the_rest_counted(tmp_path):
    study = make_study(slug="votes")
    bad = [list(GOOD_ROWS[0][:5]) + ["both"] + list(GOOD_ROWS[0][6:]) for _ in range(MAX_PROBLEMS + 50)]
    path = write_csv(tmp_path / "many.csv", bad)
    with pytest.raises(importers.ImportProblem) as caught:
        vote_import.votes_import_path(slug=study.slug, fmt="csv", path=path)
    error = caught.value
    assert (len(error.problems), error.more) == (MAX_PROBLEMS, 50)
    assert error.problems[-1].line == MAX_PROBLEMS + 1  # the header is line 1
    assert str(error).startswith(f"{MAX_PROBLEMS + 50} problems:") and str(error).endswith("and 50 more")
    assert nothing_written()


def test_a_file_with_one_problem_reads_as_before(tmp_path):
    study = make_study(slug="votes")
    rows = [list(r) for r in GOOD_ROWS]
    rows[2][5] = "both"
    path = write_csv(tmp_path / "one.csv", rows)
    with pytest.raises(importers.ImportProblem) as caught:
        vote_import.votes_import_path(slug=study.slug, fmt="csv", path=path)
    assert caught.value.problems == [caught.value] and caught.value.more == 0
    assert str(caught.value) == f"{path}, line 4, field 'winner': 'both' is not a1, a2 or tie"


@needs_mtbench
def test_every_problem_of_a_folder_format_is_named_across_its_files(mtbench_subset):  # noqa: F811
    """MT-bench: two bad lines in the human votes, one in GPT-4's; the good ones are not written either."""
    changes = {"human.csv": {3: ("winner", "nobody"), 5: ("turn", "3")}, "gpt4_pair.csv": {2: ("model_a", "nobody")}}
    for name, lines in changes.items():
        with (mtbench_subset / name).open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            header, rows = reader.fieldnames, list(reader)
        for line, (column, value) in lines.items():
            rows[line - 2][column] = value
        with (mtbench_subset / name).open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, header)
            writer.writeheader()
            writer.writerows(rows)
    study = make_study(slug="mt")
    with pytest.raises(importers.ImportProblem) as caught:
        vote_import.votes_import_path(slug=study.slug, fmt="mtbench", path=mtbench_subset)
    found = [(p.path.rsplit("/", 1)[1], p.line, p.field) for p in caught.value.problems]
    assert found == [("human.csv", 3, "winner"), ("human.csv", 5, "turn"), ("gpt4_pair.csv", 2, "model_a")]
    assert nothing_written()


def test_every_bad_row_of_an_llmbar_folder_is_named(tmp_path):
    rows = [list(r) for r in ROWS]
    rows[1][4] = 1  # line 3: the label differs from the item's
    rows[2][7] = "first"  # line 4: a verdict that is not 1, 2 or empty
    rows[3][6] = 2  # line 5: final is not 0 or 1
    write_llmbar(tmp_path, rows)
    study = make_study(slug="llmbar")
    with pytest.raises(importers.ImportProblem) as caught:
        vote_import.votes_import_path(slug=study.slug, fmt="llmbar", path=tmp_path)
    found = [(Path(p.path).name, p.line, p.field) for p in caught.value.problems]
    expected = [(3, "label"), (4, "winner_swap_false"), (5, "final")]
    assert found == [("evaluator_votes.csv.gz", line, field) for line, field in expected]
    assert nothing_written()


@pytest.mark.dataset("prd_vicuna80_lfqa")
def test_every_bad_line_of_a_prd_folder_is_named_across_its_files(prd_subset):  # noqa: F811
    """Two bad lines in GPT-4's ratings, one in the human ratings (read first)."""
    other_answer = rows(FILES[10])[0]["answer1_id"]  # the other system's answer, given as the second's
    changes = {FILES[10]: {3: {"score": 7}, 4: {"answer2_id": other_answer}}, FILES[8]: {2: {"question_id": 99}}}
    for rel, lines in changes.items():
        text = (prd_subset / rel).read_text(encoding="utf-8").splitlines()
        for line, change in lines.items():
            text[line - 1] = json.dumps({**json.loads(text[line - 1]), **change})
        (prd_subset / rel).write_text("\n".join(text) + "\n", encoding="utf-8")
    study = make_study(slug="prd")
    with pytest.raises(importers.ImportProblem) as caught:
        vote_import.votes_import_path(slug=study.slug, fmt="prd", path=prd_subset)
    found = [(Path(p.path).name, p.line, p.field) for p in caught.value.problems]
    assert found[0] == (Path(FILES[8]).name, 2, "question_id")
    assert found[1:] == [(Path(FILES[10]).name, 3, "score"), (Path(FILES[10]).name, 4, "answer2_id")]
    assert nothing_written()
