"""The folder formats (mtbench, prd, llmbar) through the admin's "Import votes" page and
POST /api/v1/votes/import/: a zip of the data set's folder, unpacked by the one zip routine
(annotations.archives.archive_unpack) when it is uploaded and imported by the task worker
through the service the command calls. A zip that cannot be unpacked is a 400 at once with the
archive's reason, and nothing is kept or written."""

import io
import zipfile
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.archives import ArchiveLimits, archive_unpack
from annotations.models import Judge, Question, Study, Vote
from tests import test_analysis_import, test_import_prd
from tests.factories import make_study
from tests.test_import_prd import PRD
from tests.test_reproduce_llmbar import LLMBAR
from vote_imports import vote_import

# The slices of the real MT-bench and PRD files the command's own tests import.
mtbench_subset = test_analysis_import.mtbench_subset
prd_subset = test_import_prd.prd_subset

API = reverse("api:votes-import")
ADMIN = reverse("vote_imports:votes-import")
needs_data = pytest.mark.dataset("mtbench_human_judgments", "prd_vicuna80_lfqa")


def zip_folder(folder: Path, *, inside: str = "") -> bytes:
    """The files under `folder` as a zip, at its top or (`inside`) in one folder of that name."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            zf.write(path, f"{inside}/{path.relative_to(folder).as_posix()}" if inside else path.relative_to(folder))
    return buffer.getvalue()


def upload(data: bytes, name: str = "folder.zip") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, data, content_type="application/zip")


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    return settings.STUDY_UPLOAD_DIR


def nothing_written(slug: str) -> bool:
    return not Study.objects.filter(slug=slug).exists() and not Vote.objects.exists() and not Question.objects.exists()


def api_import(client, capture, data) -> dict:
    """The API's import run by the task worker (the test settings' immediate backend): its state."""
    with capture(execute=True):
        accepted = client.post(API, data, format="multipart")
    assert accepted.status_code == 202, accepted.json()
    return client.get(accepted["Location"]).json()


@needs_data
def test_the_api_imports_a_zipped_mtbench_folder_whose_files_sit_in_one_folder(
    token_client, mtbench_subset, django_capture_on_commit_callbacks
):
    data = {"file": upload(zip_folder(mtbench_subset, inside="mtbench")), "format": "mtbench", "study": "mt"}
    state = api_import(token_client, django_capture_on_commit_callbacks, {**data, "create": "true"})
    assert state["state"] == "done", state
    assert state["counts"]["votes"] == 450  # 300 human and 150 GPT-4 votes, as the command imports them
    study = Study.objects.get(slug="mt")
    assert Vote.objects.filter(item__study=study).count() == 450
    assert set(Judge.objects.filter(study=study).values_list("name", flat=True)) == {
        "mtbench-human",
        "mtbench-gpt4-pair",
    }


@needs_data
def test_the_admin_imports_a_zipped_prd_folder_three_levels_deep(
    staff_client, prd_subset, django_capture_on_commit_callbacks
):
    study = make_study(status="draft", slug="prd")
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(ADMIN, {"file": upload(zip_folder(prd_subset)), "format": "prd", "study": "prd"})
    assert response.status_code == 302, response.content.decode()[-2000:]
    page = staff_client.get(response["Location"])
    assert page.context["progress"]["state"] == "done", page.context["progress"]
    assert reverse("analysis:study", args=["prd"]) in page.content.decode()
    votes = Vote.objects.filter(item__study=study)
    assert votes.count() > 0
    assert {"human", "gpt4", "gpt35"} <= {name.split("-")[-1] for name in votes.values_list("judge__name", flat=True)}


@needs_data
def test_a_problem_in_a_zipped_file_names_the_upload_the_file_inside_and_its_line(
    token_client, mtbench_subset, django_capture_on_commit_callbacks
):
    lines = (mtbench_subset / "human.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[3] = "not,a,vote\n"
    (mtbench_subset / "human.csv").write_text("".join(lines), encoding="utf-8")
    data = {"file": upload(zip_folder(mtbench_subset), "mt.zip"), "format": "mtbench", "study": "mt", "create": "true"}
    state = api_import(token_client, django_capture_on_commit_callbacks, data)
    assert state["state"] == "failed"
    assert state["path"] == "mt.zip: human.csv" and state["line"] == 4, state
    assert nothing_written("mt")


def traversal() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        zf.writestr("question.jsonl", "")
        zf.writestr("../../escaped.jsonl", '{"question_id": 1}\n')
    return buffer.getvalue()


def broken() -> bytes:
    data = bytearray(zip_folder_of({"question.jsonl": '{"question_id": 1, "category": "x", "turns": ["q"]}\n'}))
    data[30 + len("question.jsonl") + 5] ^= 0x01  # a stored member's byte: its CRC no longer matches
    return bytes(data)


def zip_folder_of(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return buffer.getvalue()


BAD_ZIPS = {
    "a member leaving the folder": (traversal, "unexpected path '../../escaped.jsonl'"),
    "a corrupt member": (broken, "the archive cannot be read: a member is corrupt (Bad CRC-32"),
    "a file that is no zip": (lambda: b"question_id,question\n", "not a zip archive"),
    "a zip without the data set": (lambda: zip_folder_of({"other/x.json": "{}"}), "no vicuna80 at the top"),
}


@pytest.mark.parametrize("make, reason", BAD_ZIPS.values(), ids=BAD_ZIPS.keys())
def test_a_zip_that_cannot_be_unpacked_is_a_400_with_its_reason_through_the_api(token_client, upload_dir, make, reason):
    data = {"file": upload(make(), "bad.zip"), "format": "prd", "study": "fresh", "create": "true"}
    response = token_client.post(API, data, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["path"] == "bad.zip" and body["field"] == "file" and reason in body["detail"], body
    assert "zip of its folder" in body["detail"]
    assert nothing_written("fresh") and not list(upload_dir.iterdir())


@pytest.mark.parametrize("make, reason", BAD_ZIPS.values(), ids=BAD_ZIPS.keys())
def test_a_zip_that_cannot_be_unpacked_is_shown_with_its_reason_on_the_admin_page(staff_client, make, reason):
    data = {"file": upload(make(), "bad.zip"), "format": "prd", "study": "fresh", "create": "on"}
    response = staff_client.post(ADMIN, data)
    assert response.status_code == 400
    page = response.content.decode()
    assert "nothing was imported" in page and reason.replace("'", "&#x27;") in page
    assert nothing_written("fresh")


@pytest.mark.dataset("prd_vicuna80_lfqa", "llmbar")
@pytest.mark.parametrize("folder, marker", [(PRD, "vicuna80"), (LLMBAR, "evaluator_votes.csv.gz")])
def test_the_real_prd_and_llmbar_folders_zipped_whole_fit_the_upload_limits(tmp_path, folder, marker):
    archive = tmp_path / "folder.zip"
    archive.write_bytes(zip_folder(folder, inside=folder.name))
    assert archive.stat().st_size < settings.API_IMPORT_MAX_MB << 20
    limits = ArchiveLimits(
        total_bytes=settings.API_IMPORT_MAX_MB << 20, members=vote_import.ZIP_MEMBERS, depth=vote_import.ZIP_DEPTH
    )
    written = archive_unpack(archive=archive, target=tmp_path / "out", limits=limits, suffixes=vote_import.ZIP_SUFFIXES)
    expected = [p for p in folder.rglob("*") if p.is_file() and p.name.endswith(vote_import.ZIP_SUFFIXES)]
    assert len(written) == len(expected) and (tmp_path / "out" / folder.name / marker).exists()
