"""Uploading a study file in the admin: the report, the preview, the import (in the request or
in the task worker), and what the upload may and may not do with the server's files."""

import io
import json
import zipfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from annotations import uploads
from annotations.models import ComparisonItem, Study
from annotations.study_files import study_import
from tests.test_study_import import CHEN, DEMO, minimal_document, needs_chen

UPLOAD = reverse("admin:annotations_study_upload")


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    return settings.STUDY_UPLOAD_DIR


def post_file(client, name: str, content: bytes, **options):
    return client.post(UPLOAD, {"file": SimpleUploadedFile(name, content), **options})


def chen_zip(folder: Path, prefix: str = "humans_llms_judgement_bias/") -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        for path in sorted(folder.glob("*.json")):
            zipped.write(path, prefix + path.name)
    return buffer.getvalue()


def test_the_study_list_links_to_the_upload_page(staff_client):
    page = staff_client.get(reverse("admin:annotations_study_changelist"))
    assert UPLOAD in page.content.decode()


def test_visitors_and_non_staff_are_sent_to_the_login(anon_client, user_client):
    for client in (anon_client, user_client):
        response = client.get(UPLOAD)
        assert response.status_code == 302 and "/login/" in response["Location"]


def test_a_valid_file_shows_a_preview_and_writes_nothing_before_the_confirmation(staff_client):
    response = post_file(staff_client, "mini.json", json.dumps(minimal_document()).encode())
    assert response.status_code == 302
    preview = staff_client.get(response["Location"])
    html = preview.content.decode()
    assert "no problems found" in html
    assert "q1-a1-fe" in html and "factual_error of <code>q1-a1</code>" in html
    # lengths of each answer: "Blue, because air scatters blue light most." has 7 words, 44 characters
    assert "7 words, 44 characters" in html
    assert "control: <code>q1-a1</code> vs <code>q1-a2</code>" in html
    assert preview.context["preview"].totals == {
        "questions": 1,
        "answers": 4,
        "variants": 2,
        "items": 3,
        "attention checks": 0,
    }
    assert not Study.objects.filter(slug="mini").exists()

    imported = staff_client.post(response["Location"])
    study = Study.objects.get(slug="mini")
    assert imported["Location"] == reverse("admin:annotations_study_change", args=[study.pk])
    assert ComparisonItem.objects.filter(study=study).count() == 3


def test_the_overrides_chosen_with_the_file_are_the_ones_imported(staff_client):
    response = post_file(
        staff_client, "mini.json", json.dumps(minimal_document()).encode(), slug="other", title="Another"
    )
    staff_client.post(response["Location"])
    assert Study.objects.get(slug="other").title == "Another"
    assert not Study.objects.filter(slug="mini").exists()


def test_a_bad_file_gets_a_report_naming_file_line_and_field_and_nothing_is_written(staff_client):
    document = minimal_document()
    document["questions"][0]["bloom"] = "memorising"
    text = json.dumps(document, indent=2)
    response = post_file(staff_client, "mini.json", text.encode())
    report = staff_client.get(response["Location"])
    problem = report.context["problem"]
    assert (problem.path, problem.field) == ("mini.json", "questions[0].bloom")
    assert problem.line == text[: text.index('"q1"')].count("\n") + 1
    html = report.content.decode()
    assert "cannot be imported" in html and "questions[0].bloom" in html and "memorising" in html
    assert "Import this study" not in html
    # Confirming anyway writes nothing.
    staff_client.post(response["Location"])
    assert not Study.objects.exists()


def test_a_file_that_is_not_json_is_reported_with_its_line(staff_client):
    response = post_file(staff_client, "broken.json", b'{\n  "format": "biasstudy",\n  oops\n}')
    problem = staff_client.get(response["Location"]).context["problem"]
    assert problem.line == 3 and "not valid JSON" in problem.message


def test_a_tampered_token_is_refused(staff_client):
    response = post_file(staff_client, "mini.json", json.dumps(minimal_document()).encode())
    token = response["Location"].rstrip("/").rsplit("/", 1)[1]
    forged = reverse("admin:annotations_study_upload_preview", args=[token[:-2] + "xx"])
    answer = staff_client.post(forged, follow=True)
    assert "not valid" in answer.content.decode()
    assert not Study.objects.exists()


def test_an_upload_is_kept_under_a_random_name_and_removed_after_the_import(staff_client, upload_dir):
    response = post_file(staff_client, "../../etc/passwd.json", json.dumps(minimal_document()).encode())
    (folder,) = list(upload_dir.iterdir())
    assert (folder / uploads.JSON_NAME).exists() and len(folder.name) == 32
    staff_client.post(response["Location"])
    assert not (folder / uploads.JSON_NAME).exists()


def test_a_file_over_the_size_limit_is_refused_and_not_kept(staff_client, settings, upload_dir):
    settings.API_IMPORT_MAX_MB = 0
    response = post_file(staff_client, "mini.json", json.dumps(minimal_document()).encode())
    assert response.status_code == 200
    assert "larger than the limit" in response.content.decode()
    assert list(upload_dir.iterdir()) == []


def test_a_zip_without_raw_json_is_refused(staff_client):
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zipped:
        zipped.writestr("gender.json", "{}")
    response = post_file(staff_client, "chen.zip", buffer.getvalue())
    assert "no raw.json" in response.content.decode()


def test_a_zip_bomb_is_stopped_at_the_limit(staff_client, settings, upload_dir):
    settings.API_IMPORT_MAX_MB = 1
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("raw.json", b" " * 10_000_000)
    assert len(buffer.getvalue()) < 1_000_000
    response = post_file(staff_client, "chen.zip", buffer.getvalue())
    assert "unpacked files are larger" in response.content.decode()
    assert list(upload_dir.iterdir()) == []


@needs_chen
def test_the_chen2024_folder_as_a_zip_imports_like_the_command(staff_client):
    response = post_file(staff_client, "humans_llms_judgement_bias.zip", chen_zip(CHEN))
    preview = staff_client.get(response["Location"])
    assert preview.context["upload"].fmt == "chen2024"
    assert preview.context["preview"].totals["questions"] == 142
    assert len(preview.context["preview"].questions) == uploads.PREVIEW_QUESTIONS
    staff_client.post(response["Location"])
    assert ComparisonItem.objects.filter(study__slug="chen2024").count() == 142 * 5


def test_a_large_study_is_imported_by_the_task_worker_with_progress(
    staff_client, settings, django_capture_on_commit_callbacks
):
    settings.STUDY_UPLOAD_BACKGROUND_QUESTIONS = 2  # the demo study has more questions than that
    response = post_file(staff_client, "demo.json", DEMO.read_bytes())
    with django_capture_on_commit_callbacks(execute=True):
        queued = staff_client.post(response["Location"])
    progress_url = reverse(
        "admin:annotations_study_upload_progress", args=[response["Location"].rstrip("/").rsplit("/", 1)[1]]
    )
    assert queued["Location"] == progress_url
    page = staff_client.get(progress_url)
    study = Study.objects.get()
    assert page.context["progress"] == {"state": "done", "study": "demo", "study_id": study.pk, "percent": 100.0}
    assert reverse("admin:annotations_study_change", args=[study.pk]) in page.content.decode()
    assert study.questions.filter(is_gold=False).count() == len(json.loads(DEMO.read_text())["questions"])


def test_the_import_reports_each_question_written(db):
    seen = []
    study_import(path=DEMO, fmt="biasstudy", progress=lambda done, total: seen.append((done, total)))
    total = len(json.loads(DEMO.read_text())["questions"])
    assert seen == [(n, total) for n in range(1, total + 1)]


def test_the_progress_page_shows_the_questions_written_so_far(staff_client):
    upload = uploads.study_upload_store(name="demo.json", chunks=[DEMO.read_bytes()])
    uploads._progress(upload, state="running", done=3, total=12)
    url = reverse("admin:annotations_study_upload_progress", args=[upload.token])
    page = staff_client.get(url, headers={"HX-Request": "true"})
    html = page.content.decode()
    assert "3 of 12 questions written (25.0%)" in html and 'hx-trigger="every 2s"' in html
    assert "<html" not in html  # the fragment only


def test_a_failed_background_import_says_why_on_the_progress_page(staff_client, django_capture_on_commit_callbacks):
    Study.objects.create(slug="demo", title="taken")
    upload = uploads.study_upload_store(name="demo.json", chunks=[DEMO.read_bytes()])
    from annotations.tasks import study_upload_import_queue

    with django_capture_on_commit_callbacks(execute=True):
        study_upload_import_queue(upload=upload)
    page = staff_client.get(reverse("admin:annotations_study_upload_progress", args=[upload.token]))
    assert page.context["progress"]["state"] == "failed"
    assert "exists already" in page.content.decode()


def test_a_file_named_zip_that_is_not_one_is_refused_and_not_kept(staff_client, upload_dir):
    response = post_file(staff_client, "chen.zip", b"PK\x03\x04 not really a zip")
    assert "not a zip archive" in response.content.decode()
    assert list(upload_dir.iterdir()) == []


@needs_chen
def test_a_problem_in_a_zipped_file_names_the_file_inside_the_zip_not_the_server_path(staff_client, tmp_path):
    folder = tmp_path / "chen"
    folder.mkdir()
    for path in CHEN.glob("*.json"):
        (folder / path.name).write_bytes(path.read_bytes())
    lines = (folder / "gender.json").read_text(encoding="utf-8").splitlines()
    lines[1] = lines[1].replace('"question_id": "', '"question_id": "nowhere-', 1)
    (folder / "gender.json").write_text("\n".join(lines), encoding="utf-8")
    response = post_file(staff_client, "chen.zip", chen_zip(folder))
    problem = staff_client.get(response["Location"]).context["problem"]
    assert (problem.path, problem.line, problem.field) == ("chen.zip: gender.json", 2, "question_id")
    assert str(tmp_path) not in str(problem)


def test_confirming_twice_imports_once_and_then_shows_the_study(staff_client):
    response = post_file(staff_client, "mini.json", json.dumps(minimal_document()).encode())
    staff_client.post(response["Location"])
    again = staff_client.post(response["Location"])
    token = response["Location"].rstrip("/").rsplit("/", 1)[1]
    assert again["Location"] == reverse("admin:annotations_study_upload_progress", args=[token])
    page = staff_client.get(again["Location"]).content.decode()
    study = Study.objects.get()
    assert reverse("admin:annotations_study_change", args=[study.pk]) in page


def reads_the_file(queries: CaptureQueriesContext) -> bool:
    """Whether a request ran the file's checks: they look up the perturbation kinds the file may
    name and whether its slug is taken."""
    return any(
        "perturbationkind" in query["sql"] or 'FROM "annotations_study"' in query["sql"]
        for query in queries.captured_queries
    )


def test_the_report_is_made_once_and_a_second_view_shows_it_without_reading_the_file(staff_client, upload_dir):
    response = post_file(staff_client, "mini.json", json.dumps(minimal_document()).encode())
    with CaptureQueriesContext(connection) as first_queries:
        first = staff_client.get(response["Location"])
    assert reads_the_file(first_queries)
    # The file on the server changes under the upload: a view that read it again would say so.
    (folder,) = list(upload_dir.iterdir())
    (folder / uploads.JSON_NAME).write_text("not JSON at all", encoding="utf-8")
    with CaptureQueriesContext(connection) as second_queries:
        second = staff_client.get(response["Location"])
    assert not reads_the_file(second_queries)
    assert len(second_queries) < len(first_queries)
    assert second.context["preview"] == first.context["preview"]
    assert second.context["preview"].totals["items"] == 3 and "no problems found" in second.content.decode()
    # The import reads the file for itself, so it is refused as it now is, and nothing is written.
    refused = staff_client.post(response["Location"])
    assert "not valid JSON" in refused.context["problem"].message
    assert not Study.objects.exists()


def test_a_report_of_problems_is_kept_too_with_every_file_line_and_field(staff_client):
    document = minimal_document(colour="red")
    document["questions"][0]["bloom"] = "memorising"
    response = post_file(staff_client, "mini.json", json.dumps(document, indent=2).encode())
    first = staff_client.get(response["Location"]).context["problem"]
    with CaptureQueriesContext(connection) as queries:
        second = staff_client.get(response["Location"]).context["problem"]
    assert not reads_the_file(queries)
    shown = [(p.path, p.line, p.field, p.message) for p in second.problems]
    assert shown == [(p.path, p.line, p.field, p.message) for p in first.problems]
    assert [field for _path, _line, field, _message in shown] == ["study.colour", "questions[0].bloom"]
    assert all(line and line > 1 for _path, line, _field, _message in shown)
