"""Every field of both study formats is type-checked before anything is written: a value of the
wrong type is refused naming file, line and field (400 from the API, a CommandError from the
command), never imported to break a page later, and never a 500 or a traceback."""

import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Answer, PerturbationKind, Question, Study
from tests.test_api_import import URL, chen_rows, jsonl, post_json, zipped
from tests.test_study_import import minimal_document, write


def variant(document: dict) -> dict:
    return document["questions"][0]["answers"][2]


def nothing_written() -> bool:
    return not Study.objects.exists() and not Question.objects.exists() and not Answer.objects.exists()


WRONG_TYPES = [
    (lambda d: variant(d).update(checks=[1, 2]), r"questions\[0\]\.answers\[2\]\.checks: must be an object"),
    (lambda d: variant(d).update(checks={"warnings": 5}), r"answers\[2\]\.checks\.warnings: must be a list of text"),
    (lambda d: variant(d).update(checks={"ok": "yes"}), r"answers\[2\]\.checks\.ok: must be true or false"),
    (lambda d: variant(d).update(kind=["factual_error"]), r"answers\[2\]\.kind: must be an answer id or a kind slug"),
    (lambda d: variant(d).update(kind={"slug": "x"}), r"answers\[2\]\.kind: must be"),
    (lambda d: variant(d).update(derived_from=["q1-a1"]), r"answers\[2\]\.derived_from: must be"),
    (lambda d: variant(d).update(derived_from=7), r"answers\[2\]\.derived_from: must be"),
    (lambda d: variant(d).update(inserted_errors=[3]), r"answers\[2\]\.inserted_errors\[0\]: must be an object"),
    (lambda d: variant(d).update(inserted_errors=[{"error": 3}]), r"inserted_errors\[0\]\.error: must be text"),
    (lambda d: variant(d).update(inserted_errors=[{"colour": "x"}]), r"inserted_errors\[0\]: unknown field"),
    (lambda d: variant(d).update(provenance={"edits": 3}), r"answers\[2\]\.provenance\.edits: must be a list"),
    (lambda d: variant(d).update(review_status=["approved"]), r"answers\[2\]\.review_status: must be one of"),
    (lambda d: variant(d).update(text=["a"]), r"answers\[2\]\.text: required text"),
    (lambda d: d["questions"][0].update(id=["q1"]), r"questions\[0\]\.id: required text"),
    (lambda d: d["questions"][0].update(bloom=["remembering"]), r"questions\[0\]\.bloom: unknown Bloom level"),
    (lambda d: d["questions"][0].update(items=[{"kind": None, "a1": ["q1-a1"], "a2": "q1-a2"}]), r"items\[0\]\.a1"),
    (lambda d: d["questions"][0].update(items=[{"kind": None, "a1": {"x": 1}, "a2": "q1-a2"}]), r"items\[0\]\.a1"),
    (
        lambda d: d["questions"][0].update(items=[{"kind": 5, "a1": "q1-a1", "a2": "q1-a2"}]),
        r"items\[0\]\.kind: must be",
    ),
    (
        lambda d: d.update(perturbation_kinds=[{"slug": ["x"], "semantics": "degrading"}]),
        r"perturbation_kinds\[0\]\.slug",
    ),
    (lambda d: d.update(perturbation_kinds=[{"slug": 5, "semantics": "degrading"}]), r"perturbation_kinds\[0\]\.slug"),
    (
        lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": "degrading", "name": 5}]),
        r"\[0\]\.name: must be text",
    ),
    (
        lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": "degrading", "description": []}]),
        r"description",
    ),
    (
        lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": "degrading", "steps": "ab"}]),
        r"\[0\]\.steps: must",
    ),
    (
        lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": "degrading", "steps": [1]}]),
        r"\[0\]\.steps: must",
    ),
    (lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": "degrading", "colour": 1}]), r"unknown field"),
    (lambda d: d.update(perturbation_kinds=[{"slug": "x", "semantics": ["degrading"]}]), r"\[0\]\.semantics"),
    (lambda d: d["study"].update(instructions=["read"]), r"study\.instructions: must be text"),
    (
        lambda d: d.update(
            gold_items=[{"id": ["g"], "bloom": "remembering", "text": "t", "better": "b", "worse": "w"}]
        ),
        r"gold_items\[0\]\.id",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), WRONG_TYPES)
def test_a_value_of_the_wrong_type_is_refused_naming_its_field_and_nothing_is_written(db, tmp_path, mutate, expected):
    document = minimal_document()
    mutate(document)
    with pytest.raises(CommandError, match=expected) as caught:
        call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy")
    assert "nothing was written: " in str(caught.value) and "study.json" in str(caught.value)
    assert nothing_written()


@pytest.mark.parametrize(("mutate", "expected"), WRONG_TYPES[:4])
def test_the_api_answers_400_naming_the_field(token_client, mutate, expected):
    document = minimal_document()
    mutate(document)
    response = post_json(token_client, document)
    assert response.status_code == 400, response.content
    assert response.json()["field"].startswith("questions[0].answers[2].")
    assert nothing_written()


def test_a_circle_of_variants_is_refused_instead_of_looping(db, tmp_path):
    document = minimal_document()
    answers = document["questions"][0]["answers"]
    answers[2]["derived_from"], answers[3]["derived_from"] = "q1-a2-ref", "q1-a1-fe"
    with pytest.raises(CommandError, match=r"derived_from: derived through more than 8 variants, or in a circle"):
        call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy")
    assert nothing_written()


def test_a_study_with_well_typed_checks_still_shows_on_the_variant_page(db, tmp_path, staff_client):
    document = minimal_document()
    variant(document)["checks"] = {"ok": False, "warnings": ["length: 1.4 times the original"]}
    call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy", verbosity=0)
    response = staff_client.get("/admin/perturbations/variant/")
    assert response.status_code == 200
    assert b"q1-a1-fe" in response.content


def test_a_kind_declared_with_all_its_fields_imports(db, tmp_path):
    document = minimal_document()
    document["perturbation_kinds"] = [
        {"slug": "sarcasm", "name": "Sarcasm", "semantics": "non_semantic", "description": "Snide.", "steps": []}
    ]
    variant(document)["kind"] = "sarcasm"
    call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy", verbosity=0)
    assert PerturbationKind.objects.get(slug="sarcasm").name == "Sarcasm"


# --------------------------------------------------------------------------- chen2024


def chen_folder(tmp_path, mutate_raw=None, mutate_reference=None):
    raw, reference = chen_rows()
    if mutate_raw:
        mutate_raw(raw)
    if mutate_reference:
        mutate_reference(reference)
    folder = tmp_path / "chen"
    folder.mkdir()
    (folder / "raw.json").write_text(jsonl(raw), encoding="utf-8")
    (folder / "reference.json").write_text(jsonl(reference), encoding="utf-8")
    return folder, raw, reference


CHEN_WRONG_TYPES = [
    (
        None,
        lambda rows: rows[1]["answers"]["answer1"].update(raw_answer=["x"]),
        "reference.json, line 2: answers.answer1.raw_answer: must be text",
    ),
    (
        None,
        lambda rows: rows[0]["answers"]["answer1"].update(raw_answer={"a": 1}),
        "reference.json, line 1: answers.answer1.raw_answer",
    ),
    (
        None,
        lambda rows: rows[0]["answers"]["answer1"].update(answer_id=["x"]),
        "reference.json, line 1: answers.answer1.answer_id",
    ),
    (
        None,
        lambda rows: rows[0]["answers"]["answer1"].update(answer=5),
        "reference.json, line 1: answers.answer1.answer",
    ),
    (
        None,
        lambda rows: rows[0].update(question_id=["Applying_0"]),
        "reference.json, line 1: question_id: must be a string",
    ),
    (lambda rows: rows[1].update(question_id={"a": 1}), None, "raw.json, line 2: question_id"),
    (lambda rows: rows[0]["answers"]["answer2"].update(answer_id=3), None, "raw.json, line 1: answers.answer2"),
    (lambda rows: rows[0].update(question=["q"]), None, "questions[0].text: required text"),
    (lambda rows: rows[0].update(answers=[1, 2]), None, "raw.json, line 1: answers.answer1"),
]


@pytest.mark.parametrize(("mutate_raw", "mutate_reference", "expected"), CHEN_WRONG_TYPES)
def test_chen2024_values_of_the_wrong_type_are_refused_naming_line_and_field(
    db, tmp_path, mutate_raw, mutate_reference, expected
):
    folder, _, _ = chen_folder(tmp_path, mutate_raw, mutate_reference)
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(folder), "--format", "chen2024")
    assert expected in str(caught.value)
    assert nothing_written()


def test_chen2024_raw_answer_of_the_wrong_type_is_a_400_from_the_api(token_client):
    raw, reference = chen_rows()
    reference[0]["answers"]["answer1"]["raw_answer"] = [1, 2]
    upload = zipped({"raw.json": jsonl(raw), "reference.json": jsonl(reference)})
    response = token_client.post(URL, {"file": upload, "format": "chen2024"}, format="multipart")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "answers.answer1.raw_answer"
    assert nothing_written()


def test_a_text_over_the_storage_limit_is_refused(db, tmp_path):
    document = minimal_document()
    variant(document)["text"] = "word " * 10_001
    with pytest.raises(CommandError, match=r"answers\[2\]\.text: at most 50,000 characters, got 50,005"):
        call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy")
    assert nothing_written()


def test_every_written_json_is_what_the_file_said(db, tmp_path):
    document = minimal_document()
    variant(document)["checks"] = {"ok": True, "warnings": []}
    call_command("import_study", str(write(tmp_path, json.dumps(document))), "--format", "biasstudy", verbosity=0)
    assert Answer.objects.get(external_id="q1-a1-fe").checks == {"ok": True, "warnings": []}
