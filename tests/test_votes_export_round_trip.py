"""The votes export imports back: a study's votes (people and LLM judges; labels swapped, ties,
not-familiar and too-fast votes, option probabilities, an unreadable verdict, a judge's run,
questions that share a prompt key)
exported with ``export_votes`` and imported with ``import_votes --format csv`` into a copy of
the study (its study file imported) give the same analysis report, and every column of the
export is either imported or listed, with why, as not imported. A column the import does not
know is refused by name."""

import json
import random
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from analysis import exports, stored_reports
from annotations.models import Judge, Question, Vote
from annotations.study_files import study_export, study_import
from judges.models import JudgeRun
from tests.factories import human_pool, make_llm_judge, make_question, make_rater, make_study, make_variant
from tests.test_analysis_import import GOOD_ROWS, write_csv
from vote_imports import importers, vote_import


def source_study():
    """Six questions (control, a reference on A2, a factual error on A1 for half of them; the
    first four two by two of one prompt key), three raters (one flagged), an LLM judge's run and
    a simulated judge, with every kind of vote."""
    rng = random.Random(7)
    study = make_study(slug="source", min_response_ms=2000, votes_per_item=4)
    for n in range(6):
        question = make_question(
            study,
            a1="Short answer. " * (n + 1),
            a2="A longer answer, with more words. " * 3,
            prompt_key=f"prompt-{n // 2}" if n < 4 else "",
        )
        make_variant(question, kind="reference")
        if n % 2:
            make_variant(question, kind="factual_error", of="a1", text="A wrong answer. " * (n + 2))
    items = list(study.items.order_by("id"))
    people = human_pool(study)
    raters = [make_rater(study), make_rater(study), make_rater(study, flagged=True, flag_reason="by hand")]
    for r, rater in enumerate(raters):
        for i, item in enumerate(items):
            Vote.objects.create(
                item=item,
                judge=people,
                rater=rater,
                shown_first="a1" if (i + r) % 2 else "a2",
                choice_shown=rng.choice(["first", "second", "tie"]),
                not_familiar=(i + r) % 7 == 0,
                client_ms=rng.choice([800, 4000, 9000]),  # 800 ms is too fast for the study
                server_ms=rng.choice([700, 12000]),  # the server's time caps the browser's
            )
    llm = Judge.objects.get(pk=make_llm_judge(name="gpt-judge").judge_id)
    run = JudgeRun.objects.create(study=study, judge=llm, status="done", config={"votes_per_item": 4})
    simulated = Judge.objects.create(name="simulated", kind=Judge.Kind.SIMULATED, params={"model": "sim-1"})
    for judge, vote_run in ((llm, run), (simulated, None)):
        for item in items:
            for k, (shown_first, swapped) in enumerate([("a1", False), ("a1", True), ("a2", False), ("a2", True)]):
                probs = [rng.random() for _ in range(3)]
                unreadable = judge == llm and item.pk == items[2].pk and k == 3
                Vote.objects.create(
                    item=item,
                    judge=judge,
                    run_id=vote_run.pk if vote_run else None,
                    round=k,
                    shown_first=shown_first,
                    choice_shown=None if unreadable else rng.choice(["first", "second", "second", "tie"]),
                    parse_status=Vote.Parse.INVALID if unreadable else Vote.Parse.OK,
                    raw_output="I cannot decide." if unreadable else "Answer 2",
                    label_scheme="ab",
                    labels_swapped=swapped,
                    option_probs={o: p / sum(probs) for o, p in zip(("first", "second", "tie"), probs, strict=True)},
                )
    return study


def copy_of(study, tmp_path, slug: str):
    """The study's questions, answers and items (its study file) in a new study, no votes."""
    document = study_export(study=study)
    path = tmp_path / f"{slug}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return study_import(path=path, fmt="biasstudy", slug=slug)


def exported_votes(study, tmp_path):
    path = tmp_path / "votes.csv"
    path.write_text("".join(exports.csv_lines(exports.votes_rows(study))), encoding="utf-8")
    return path


@pytest.mark.django_db
def test_the_exported_votes_imported_into_a_copy_give_the_same_report(tmp_path):
    study = source_study()
    copy = copy_of(study, tmp_path, "copy")
    path = exported_votes(study, tmp_path)
    _, result = vote_import.votes_import_path(slug="copy", fmt="csv", path=path)
    assert result["votes"] == Vote.objects.filter(item__study=study).count()
    keys = sorted(Question.objects.filter(study=copy).values_list("external_id", "prompt_key"))
    assert keys == sorted(Question.objects.filter(study=study).values_list("external_id", "prompt_key"))
    assert [key for _, key in keys].count("prompt-0") == 2
    swapped = Vote.objects.filter(labels_swapped=True)
    assert swapped.filter(item__study=copy).count() == swapped.filter(item__study=study).count() == 2 * 15 * 2
    original, imported = stored_reports.study_report(study=study), stored_reports.study_report(study=copy)
    original.pop("study"), imported.pop("study")
    # A judge's runs are the source database's own (JudgeRun ids): the import makes none and
    # keeps each vote's run id in its meta instead.
    assert [j.pop("runs") for j in original["judges"]] == [[], [run_id(study)], []]
    assert [j.pop("runs") for j in imported["judges"]] == [[], [], []]
    assert {v.meta.get("exported_run_id") for v in Vote.objects.filter(item__study=copy, judge__name="gpt-judge")} == {
        str(run_id(study))
    }
    assert differences(imported, original) == []


def run_id(study) -> int:
    return JudgeRun.objects.get(study=study).pk


def differences(a, b, where: str = "") -> list[str]:
    """Where two reports differ, by path (a plain == would show two pages of JSON)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for key in sorted(a.keys() | b.keys(), key=str)
            for d in differences(a.get(key), b.get(key), f"{where}.{key}")
        ]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for n, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{where}[{n}]")]
    same = a == b or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)  # NaN is NaN
    return [] if same else [f"{where}: {a!r} != {b!r}"]


@pytest.mark.django_db
def test_every_exported_column_is_imported_or_listed_with_why(tmp_path):
    study = source_study()
    copy_of(study, tmp_path, "copy")
    out = StringIO()
    call_command("import_votes", str(exported_votes(study, tmp_path)), "--format", "csv", "--study", "copy", stdout=out)
    copy_of(study, tmp_path, "copy2")
    _, result = vote_import.votes_import_path(slug="copy2", fmt="csv", path=exported_votes(study, tmp_path))
    ignored = result[vote_import.IGNORED_COLUMNS]
    assert set(exports.VOTE_COLUMNS) <= set(importers.COLUMNS) | set(ignored)
    assert sorted(ignored) == ["counted", "excluded_because", "item_id", "semantics", "study"]
    assert "columns not imported: study (" in out.getvalue() and "counted (computed by the analysis)" in out.getvalue()


@pytest.mark.django_db
def test_the_export_into_a_study_without_its_questions_is_refused_naming_one(tmp_path):
    """The export names questions and answers by id and length, without their texts: the study
    file makes them first."""
    study = source_study()
    with pytest.raises(CommandError, match=r"question 'q\d+' is not in the study.*import the study file first"):
        call_command(
            "import_votes", str(exported_votes(study, tmp_path)), "--format", "csv", "--study", "new", "--create"
        )
    assert not Vote.objects.exclude(item__study=study).exists()


def assert_refused_and_nothing_written(tmp_path, csv_text: str, match: str) -> None:
    """Import `csv_text` into a new study: refused with `match`, and no vote written."""
    study = make_study(status="draft", slug="refused")
    path = tmp_path / "v.csv"
    path.write_text(csv_text, encoding="utf-8")
    with pytest.raises(CommandError, match=match):
        call_command("import_votes", str(path), "--format", "csv", "--study", "refused")
    assert not Vote.objects.filter(item__study=study).exists()


@pytest.mark.django_db
def test_an_unknown_column_is_refused_by_name_and_nothing_is_written(tmp_path):
    assert_refused_and_nothing_written(
        tmp_path,
        "question_id,question,answer_a1,answer_a2,judge,winner,labels_swaped,notes\n"
        "q1,Why?,Because.,No idea.,crowd,a1,1,hello\n",
        r"line 1, field 'labels_swaped': unknown column\(s\): labels_swaped, notes",
    )


@pytest.mark.django_db
def test_a_judge_s_votes_from_two_runs_are_refused(tmp_path):
    """The import makes no judge runs, so the analysis could not keep only the latest one."""
    assert_refused_and_nothing_written(
        tmp_path,
        "question_id,question,answer_a1,answer_a2,judge,winner,run_id,round\n"
        "q1,Why?,Because.,No idea.,gpt,a1,3,0\nq1,Why?,Because.,No idea.,gpt,a2,5,0\n",
        r"line 3, field 'run_id': judge 'gpt' had votes of another run before",
    )


def with_computed_columns(tmp_path):
    """The generic CSV's good rows with the votes export's two computed columns added."""
    lines = write_csv(tmp_path / "votes.csv", GOOD_ROWS).read_text(encoding="utf-8").splitlines()
    return "\n".join([lines[0] + ",counted,excluded_because", *(line + ",True," for line in lines[1:])]) + "\n"


def test_the_api_and_the_admin_page_list_the_columns_not_imported(
    token_client, staff_client, tmp_path, settings, django_capture_on_commit_callbacks
):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    make_study(status="draft", slug="api"), make_study(status="draft", slug="page")
    expected = {"counted": "computed by the analysis", "excluded_because": "computed by the analysis"}
    for client, url, data in (
        (token_client, reverse("api:votes-import"), {"format": "multipart"}),
        (staff_client, reverse("vote_imports:votes-import"), {}),
    ):
        slug = "api" if client is token_client else "page"
        upload = SimpleUploadedFile("votes.csv", with_computed_columns(tmp_path).encode(), content_type="text/csv")
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(url, {"file": upload, "format": "csv", "study": slug}, **data)
        state = client.get(response["Location"])
        if client is token_client:
            assert state.json()["ignored_columns"] == expected and "counted" not in state.json()["counts"]
        else:
            page = state.content.decode()
            assert "Columns not imported" in page and "<code>excluded_because</code>: computed by the analysis" in page


def test_the_api_and_the_admin_page_list_the_warnings_naming_the_uploaded_file(
    token_client, staff_client, tmp_path, settings, django_capture_on_commit_callbacks
):
    """A quoted field that holds a row is imported with a warning; the worker's result names the
    file as it was uploaded, not by its place on the server."""
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    make_study(status="draft", slug="api"), make_study(status="draft", slug="page")
    text = (
        "question_id,question,answer_a1,answer_a2,judge,winner\n"
        'q1,"What is 2+2?,Four,Five,judge,a1\nq2,What is 3+3?",Six,Seven,judge,a1\n'
    )
    for client, url, data in (
        (token_client, reverse("api:votes-import"), {"format": "multipart"}),
        (staff_client, reverse("vote_imports:votes-import"), {}),
    ):
        slug = "api" if client is token_client else "page"
        upload = SimpleUploadedFile("mine.csv", text.encode(), content_type="text/csv")
        with django_capture_on_commit_callbacks(execute=True):
            response = client.post(url, {"file": upload, "format": "csv", "study": slug}, **data)
        state = client.get(response["Location"])
        if client is token_client:
            [warning] = state.json()["warnings"]
            assert (warning["path"], warning["line"], warning["field"]) == ("mine.csv", 2, "question")
            assert warning["message"].startswith("a quoted field spans lines 2-3 and holds 5 commas")
            assert "warnings" not in state.json()["counts"]
        else:
            page = state.content.decode()
            assert "Warnings:" in page and "mine.csv, line 2, field <code>question</code>: a quoted field spans" in page
            assert str(settings.STUDY_UPLOAD_DIR) not in page
