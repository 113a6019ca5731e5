"""A study made with nothing but a slug and a title (by file, by upload, or in the admin: see
tests/test_admin_study_forms.py) follows the protocol: the too-fast filter is on, attention
checks come when the study has some, and a target nobody can reach is lowered to what one rater
can get, with a warning where the study is made, instead of failing a later save."""

import io
import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotations.assignment import lease_next, vote_record
from annotations.completion import rater_enter
from annotations.models import Study
from tests.test_study_import import minimal_document, write

pytestmark = pytest.mark.django_db

UPLOAD = reverse("admin:annotations_study_upload")


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"


def with_gold(document: dict, questions: int, gold: int) -> dict:
    first = document["questions"][0]
    document["questions"] = [
        {**first, "id": f"q{n}", "answers": [{**a, "id": a["id"].replace("q1", f"q{n}"), **(
            {"derived_from": a["derived_from"].replace("q1", f"q{n}")} if a.get("derived_from") else {})}
            for a in first["answers"]]}
        for n in range(1, questions + 1)
    ]  # fmt: skip
    document["gold_items"] = [
        {"id": f"g{n}", "bloom": "remembering", "text": f"Check {n}?", "better": "Right.", "worse": "Wrong."}
        for n in range(gold)
    ]
    return document


def test_the_command_imports_the_protocols_defaults_and_warns_of_a_lowered_target(tmp_path):
    path = write(tmp_path, with_gold(minimal_document(), questions=12, gold=2))
    out, err = io.StringIO(), io.StringIO()
    call_command("import_study", str(path), "--format", "biasstudy", stdout=out, stderr=err)
    study = Study.objects.get(slug="mini")
    assert (study.min_response_ms, study.gold_every) == (3000, 10)
    # 12 questions and 2 attention checks, one after every 10 items: 10 + 1 + 2 = 13.
    assert study.most_items_per_rater() == 13 and study.target_per_rater == 13
    assert "Warning: The target per rater was lowered from 45 to 13" in err.getvalue()
    study.full_clean()  # the next save has nothing to fail on
    # A rater meets an attention check as their 11th item.
    study.status = Study.Status.COLLECTING
    study.save()
    rater = rater_enter(study=study, participant_id="p1")
    gold = []
    while (lease := lease_next(rater=rater)) is not None:
        gold.append(lease.is_gold)
        vote_record(rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="first", client_ms=9000)
    assert len(gold) == 13 and [n for n, is_gold in enumerate(gold, start=1) if is_gold] == [11]


def test_a_reachable_target_in_the_file_is_kept_without_a_warning(tmp_path):
    path = write(tmp_path, minimal_document(target_per_rater=1, min_response_ms=0))
    err = io.StringIO()
    call_command("import_study", str(path), "--format", "biasstudy", stdout=io.StringIO(), stderr=err)
    study = Study.objects.get(slug="mini")
    assert (study.target_per_rater, study.min_response_ms) == (1, 0) and err.getvalue() == ""


def test_the_upload_warns_in_its_preview_and_its_result(staff_client):
    content = json.dumps(minimal_document()).encode()
    response = staff_client.post(UPLOAD, {"file": SimpleUploadedFile("mini.json", content)})
    preview = staff_client.get(response["Location"]).content.decode()
    warning = "The target per rater was lowered from 45 to 1: one rater can get at most 1 item in"
    assert warning in preview
    assert not Study.objects.filter(slug="mini").exists()
    result = staff_client.post(response["Location"], follow=True).content.decode()
    assert warning in result
    assert Study.objects.get(slug="mini").target_per_rater == 1
