"""Importing and exporting whole studies: the published chen2024 files and our own format."""

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from annotations.models import Answer, ComparisonItem, Question, Study
from annotations.study_files import STUDY_FIELDS, StudyFileError, study_export, study_import
from biasstudy.datasets import dataset_path

CHEN = dataset_path("humans_llms_judgement_bias")
DEMO = Path(__file__).resolve().parents[1] / "fixtures" / "demo_study.json"

needs_chen = pytest.mark.dataset("humans_llms_judgement_bias")


def minimal_document(**study) -> dict:
    return {
        "format": "biasstudy",
        "version": 1,
        "study": {"slug": "mini", "title": "Mini", **study},
        "questions": [
            {
                "id": "q1",
                "bloom": "remembering",
                "text": "What colour is the sky on a clear day?",
                "answers": [
                    {"id": "q1-a1", "text": "Blue, because air scatters blue light most."},
                    {"id": "q1-a2", "text": "It looks blue: short wavelengths scatter more."},
                    {
                        "id": "q1-a1-fe",
                        "derived_from": "q1-a1",
                        "kind": "factual_error",
                        "text": "Green, because air scatters blue light most.",
                        "inserted_errors": [{"original": "Blue", "error": "Green", "explanation": "It is blue."}],
                    },
                    {"id": "q1-a2-ref", "derived_from": "q1-a2", "kind": "reference", "text": "It looks blue [1]."},
                ],
            }
        ],
    }


def write(tmp_path: Path, document: dict | str) -> Path:
    path = tmp_path / "study.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document, indent=2), encoding="utf-8")
    return path


@needs_chen
def test_the_published_files_give_142_questions_with_five_items_each(db):
    study = study_import(path=CHEN, fmt="chen2024")
    assert study.questions.count() == 142
    per_question = Counter(ComparisonItem.objects.filter(study=study).values_list("question_id", flat=True))
    assert set(per_question.values()) == {5}
    groups = Counter(ComparisonItem.objects.filter(study=study).values_list("kind__slug", flat=True))
    assert groups == {None: 142, "factual_error": 142, "reference": 142, "rich_content": 142, "gender": 142}


@needs_chen
def test_a_perturbed_answer_is_stored_as_a_variant_of_the_right_original(db):
    study = study_import(path=CHEN, fmt="chen2024")
    # In the published factual-error file the perturbed answer sits in either slot.
    for item in ComparisonItem.objects.filter(study=study, kind__slug="factual_error").select_related("answer_a2"):
        variant = item.answer_a2
        assert variant.derived_from.external_id == variant.external_id[:-4]
        assert variant.derived_from.derived_from_id is None
        assert item.answer_a1 != variant.derived_from
        assert item.answer_a1.derived_from_id is None
    slots = Counter(
        "a1" if item.answer_a2.derived_from_id == item.question.items.get(kind=None).answer_a1_id else "a2"
        for item in ComparisonItem.objects.filter(study=study, kind__slug="reference").select_related("question")
    )
    assert slots["a1"] > 0 and slots["a2"] > 0


@needs_chen
def test_factual_error_variants_keep_their_inserted_error_list(db):
    study = study_import(path=CHEN, fmt="chen2024")
    variants = Answer.objects.filter(question__study=study, kind__slug="factual_error")
    assert variants.count() == 142
    assert all(v.inserted_errors for v in variants)
    assert all("description" in e for v in variants for e in v.inserted_errors)


@needs_chen
def test_a_perturbed_answer_whose_original_is_missing_fails_the_whole_import(db, tmp_path):
    folder = tmp_path / "chen"
    shutil.copytree(CHEN, folder)
    lines = (folder / "reference.json").read_text().splitlines()
    row = json.loads(lines[3])
    slot = next(k for k, a in row["answers"].items() if a.get("perturb"))
    row["answers"][slot]["answer_id"] = "ZZZZZZZZ" + "abcd"
    lines[3] = json.dumps(row)
    (folder / "reference.json").write_text("\n".join(lines) + "\n")
    with pytest.raises(StudyFileError) as caught:
        study_import(path=folder, fmt="chen2024")
    message = str(caught.value)
    assert "reference.json" in message and "line 4" in message and "answer_id" in message
    assert not Study.objects.exists() and not Question.objects.exists() and not Answer.objects.exists()


@needs_chen
def test_a_malformed_line_names_file_and_line(db, tmp_path):
    folder = tmp_path / "chen"
    shutil.copytree(CHEN, folder)
    with open(folder / "rich_content.json", "a") as handle:
        handle.write("{not json\n")
    with pytest.raises(CommandError) as caught:
        call_command("import_study", str(folder), "--format", "chen2024")
    assert "rich_content.json, line 143" in str(caught.value)
    assert not Study.objects.exists()


@needs_chen
def test_an_unknown_bloom_level_is_refused(db, tmp_path):
    folder = tmp_path / "chen"
    shutil.copytree(CHEN, folder)
    raw = (folder / "raw.json").read_text().replace('"level": "Applying"', '"level": "Memorising"', 1)
    (folder / "raw.json").write_text(raw)
    with pytest.raises(StudyFileError, match=r"raw.json, line \d+: level: unknown Bloom level 'Memorising'"):
        study_import(path=folder, fmt="chen2024")


def test_our_format_imports_with_derived_items(db, tmp_path):
    study = study_import(path=write(tmp_path, minimal_document()), fmt="biasstudy")
    question = study.questions.get()
    control = question.items.get(kind=None)
    fe = question.items.get(kind__slug="factual_error")
    ref = question.items.get(kind__slug="reference")
    assert (control.answer_a1.external_id, control.answer_a2.external_id) == ("q1-a1", "q1-a2")
    # The factual error was put into the first original, so the kept answer is the second.
    assert (fe.answer_a1.external_id, fe.answer_a2.external_id) == ("q1-a2", "q1-a1-fe")
    assert (ref.answer_a1.external_id, ref.answer_a2.external_id) == ("q1-a1", "q1-a2-ref")


def test_export_then_import_round_trips_without_loss(db, tmp_path):
    study = study_import(
        path=write(tmp_path, minimal_document(votes_per_item=4, completion_code="X1")), fmt="biasstudy"
    )
    first = study_export(study=study)
    again = study_import(path=write(tmp_path, first), fmt="biasstudy", slug="mini-copy")
    second = study_export(study=again)
    first["study"].pop("slug")
    second["study"].pop("slug")
    assert first == second
    assert second["study"]["votes_per_item"] == 4


def test_every_setting_of_a_study_is_in_the_file_format(db):
    # A setting added to the model but not to the format would be lost by export then import.
    # data_version is no setting: how often the study's data changed in this database; the
    # instructions' stored render is made from the instructions on save.
    derived = {"id", "created_at", "data_version", "instructions_html", "instructions_html_key"}
    settings = {field.name for field in Study._meta.concrete_fields} - derived
    assert set(STUDY_FIELDS) == settings


def test_a_study_that_lets_mturk_frame_it_exports_and_imports_letting_it(db, tmp_path):
    study = study_import(path=write(tmp_path, minimal_document(allow_mturk_frame=True)), fmt="biasstudy")
    assert study.allow_mturk_frame is True
    exported = study_export(study=study)
    assert exported["study"]["allow_mturk_frame"] is True
    again = study_import(path=write(tmp_path, exported), fmt="biasstudy", slug="mini-copy")
    assert Study.objects.get(pk=again.pk).allow_mturk_frame is True


def test_the_other_platforms_completion_url_exports_and_imports(db, tmp_path):
    url = "https://panel.example.org/done?token={code}"
    document = minimal_document(completion_code="C1", platform_completion_url=url)
    study = study_import(path=write(tmp_path, document), fmt="biasstudy")
    assert study_export(study=study)["study"]["platform_completion_url"] == url


def test_a_file_that_does_not_name_the_mturk_frame_gets_a_study_that_cannot_be_framed(db, tmp_path):
    study = study_import(path=write(tmp_path, minimal_document()), fmt="biasstudy")
    assert Study.objects.get(pk=study.pk).allow_mturk_frame is False
    assert study_export(study=study)["study"]["allow_mturk_frame"] is False


def test_the_export_command_writes_a_file_the_import_command_reads(db, tmp_path):
    study_import(path=write(tmp_path, minimal_document()), fmt="biasstudy")
    out = tmp_path / "out.json"
    call_command("export_study", "--study", "mini", "-o", str(out), verbosity=0)
    call_command("import_study", str(out), "--format", "biasstudy", "--slug", "mini2", verbosity=0)
    assert Study.objects.get(slug="mini2").items.count() == 3


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["questions"][0].pop("text"), r"questions\[0\]\.text: required"),
        (lambda d: d["questions"][0].update(bloom="memorising"), r"questions\[0\]\.bloom: unknown Bloom level"),
        (lambda d: d["questions"][0]["answers"][2].update(derived_from="nope"), r"derived_from: the original 'nope'"),
        (lambda d: d["questions"][0]["answers"][3].update(id="q1-a1"), r"duplicate answer id 'q1-a1'"),
        (lambda d: d["questions"].append(dict(d["questions"][0])), r"duplicate question id 'q1'"),
        (lambda d: d["questions"][0]["answers"][2].update(kind="sarcasm"), r"unknown perturbation kind 'sarcasm'"),
        (lambda d: d["study"].update(votes_per_item="six"), r"study\.votes_per_item: must be a whole number"),
        (lambda d: d["study"].update(colour="red"), r"study\.colour: unknown setting"),
        (
            lambda d: d["study"].update(allow_mturk_frame="yes"),
            r"study\.allow_mturk_frame: must be true/false, got 'yes'",
        ),
        (lambda d: d["study"].update(allow_mturk_frame=1), r"study\.allow_mturk_frame: must be true/false, got 1"),
        (
            lambda d: d["study"].update(completion_code="C1", platform_completion_url="https://x.example/?c={code!r}"),
            r"study\.platform_completion_url: other platform's completion URL: \{code!r\} has a conversion",
        ),
        (lambda d: d["study"].update(title="t" * 201), r"study\.title: Ensure this value has at most 200"),
        (lambda d: d["study"].update(votes_per_item=0), r"study: votes_per_item must be at least 1"),
        (lambda d: d["study"].update(votes_per_item=2**70), r"study\.votes_per_item"),
        (lambda d: d["study"].update(gold_min_accuracy=1.5), r"study: gold_min_accuracy must be between 0 and 1"),
        (lambda d: d["questions"][0].update(id="q" * 121), r"questions\[0\]\.id: at most 120 characters"),
        (
            lambda d: d["questions"][0]["answers"].append({"id": "q1-a3", "text": "Blue."}),
            r"two original answers, found 3",
        ),
    ],
)
def test_bad_input_fails_as_a_whole_naming_the_field(db, tmp_path, mutate, expected):
    document = minimal_document()
    document["questions"].insert(0, json.loads(json.dumps(document["questions"][0])))
    document["questions"][0]["id"] = "q0"
    for answer in document["questions"][0]["answers"]:
        answer["id"] = answer["id"].replace("q1", "q0")
        if "derived_from" in answer:
            answer["derived_from"] = answer["derived_from"].replace("q1", "q0")
    document["questions"] = [document["questions"][1], document["questions"][0]]  # q1 first
    mutate(document)
    with pytest.raises(StudyFileError, match=expected) as caught:
        study_import(path=write(tmp_path, document), fmt="biasstudy")
    assert "study.json" in str(caught.value)
    assert not Study.objects.exists() and not Answer.objects.exists()


def test_errors_in_our_format_name_a_line(db, tmp_path):
    document = minimal_document()
    document["questions"][0]["bloom"] = "memorising"
    with pytest.raises(StudyFileError) as caught:
        study_import(path=write(tmp_path, document), fmt="biasstudy")
    assert caught.value.line is not None and caught.value.line > 1


def test_invalid_json_names_the_line(db, tmp_path):
    with pytest.raises(StudyFileError, match=r"line 3: not valid JSON"):
        study_import(path=write(tmp_path, '{\n  "format": "biasstudy",\n  oops\n}'), fmt="biasstudy")


def test_importing_over_an_existing_slug_writes_nothing(db, tmp_path):
    path = write(tmp_path, minimal_document())
    study_import(path=path, fmt="biasstudy")
    with pytest.raises(CommandError, match="exists already"):
        call_command("import_study", str(path), "--format", "biasstudy")
    assert Study.objects.count() == 1


def test_the_import_command_refuses_an_unknown_format():
    with pytest.raises(CommandError):
        call_command("import_study", "x", "--format", "yaml")


@pytest.mark.skipif(not DEMO.exists(), reason="demo study not written yet")
def test_the_demo_study_loads_with_six_questions_per_bloom_level(db):
    call_command("load_demo", verbosity=0)
    study = Study.objects.get(slug="demo")
    levels = Counter(study.questions.filter(is_gold=False).values_list("bloom_level", flat=True))
    assert len(levels) == 6 and min(levels.values()) >= 6
    for question in study.questions.filter(is_gold=False):
        groups = set(question.items.values_list("kind__slug", flat=True))
        answer_groups = {None, "factual_error", "reference", "rich_content"}
        # ...and, in turn over the questions, one context kind (their items keep A2's text) and
        # one of the catalogue's rule kinds that add to the answer.
        assert answer_groups < groups and len(groups - answer_groups) == 2
        assert len((groups - answer_groups) & {"bandwagon", "authority_source", "sycophancy"}) == 1
        assert len((groups - answer_groups) & {"distraction", "verbosity", "refinement", "identity"}) == 1
    assert all(a.inserted_errors for a in Answer.objects.filter(question__study=study, kind__slug="factual_error"))
    assert not Answer.objects.variants().filter(question__study=study, checks={}).exists()  # checked, for the review
    added = Answer.objects.filter(question__study=study, kind__slug__in=["distraction", "verbosity", "refinement"])
    # Every original word kept: at most the length is warned about (the point of verbosity).
    assert added.count() == 27 and all(w.startswith("length:") for a in added for w in a.checks["warnings"])
    context_items = study.items.exclude(answer_a2__context="")
    assert context_items.count() == 36 and all(item.answer_a2.checks["ok"] for item in context_items)
    call_command("load_demo", verbosity=0)  # a second call changes nothing
    assert Study.objects.filter(slug="demo").count() == 1
