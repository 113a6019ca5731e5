"""POST /api/v1/votes/import/: `import_votes FILE --format csv --study S [--create]` over HTTP, in
the task worker, through the same service; staff only. The answer is a 202 with the URL of the
import's state; a bad file's state names file, line and field, and the import leaves nothing
behind (not even the study `create` would have made)."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.models import Judge, Question, Study, Vote
from tests.factories import make_staff, make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv
from vote_imports import uploads, vote_import

URL = reverse("api:votes-import")


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    return settings.STUDY_UPLOAD_DIR


def upload(tmp_path, rows=GOOD_ROWS, name="votes.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, write_csv(tmp_path / name, rows).read_bytes(), content_type="text/csv")


def post_and_run(client, capture, data):
    """Post the import; the task worker (the test settings' immediate backend) runs it once the
    request's work commits. Returns the 202 and the state at its URL afterwards."""
    with capture(execute=True):
        accepted = client.post(URL, data, format="multipart")
    assert accepted.status_code == 202, accepted.json()
    return accepted, client.get(accepted["Location"])


def test_it_accepts_the_file_and_its_url_tells_the_worker_s_counts(
    token_client, tmp_path, django_capture_on_commit_callbacks
):
    study = make_study(status="draft", slug="there")
    data = {"file": upload(tmp_path), "study": "there"}
    accepted, state = post_and_run(token_client, django_capture_on_commit_callbacks, data)
    body = accepted.json()
    assert body["state"] == "queued" and body["url"] == accepted["Location"]
    assert body["url"].startswith("http://testserver/api/v1/votes/import/")
    assert state.status_code == 200
    done = state.json()
    assert done["state"] == "done" and done["study"] == "there" and done["percent"] == 100.0
    assert done["study_url"] == "http://testserver" + reverse("api:study-detail", kwargs={"slug": "there"})
    assert done["counts"]["votes"] == 4 == Vote.objects.filter(item__study=study).count()
    assert done["steps"] == list(vote_import.VOTES_IMPORT_STEPS)


def test_create_makes_the_study_with_its_title(token_client, tmp_path, django_capture_on_commit_callbacks):
    data = {"file": upload(tmp_path), "study": "elsewhere", "create": "true", "title": "From elsewhere"}
    _, state = post_and_run(token_client, django_capture_on_commit_callbacks, data)
    assert state.json()["state"] == "done"
    study = Study.objects.get(slug="elsewhere")
    assert study.title == "From elsewhere" and Vote.objects.filter(item__study=study).count() == 4


def test_a_bad_row_fails_the_import_naming_file_line_and_field_and_nothing_is_written(
    token_client, tmp_path, django_capture_on_commit_callbacks
):
    rows = [list(r) for r in GOOD_ROWS]
    rows[2][5] = "winner-unknown"  # the third data row: line 4 of the file
    data = {"file": upload(tmp_path, rows, name="mine.csv"), "study": "fresh", "create": "true"}
    _, state = post_and_run(token_client, django_capture_on_commit_callbacks, data)
    body = state.json()
    assert body["state"] == "failed"
    assert body["path"] == "mine.csv" and body["line"] == 4 and body["field"] == "winner", body
    assert "winner-unknown" in body["detail"]
    assert body["problems"] == [{key: body[key] for key in ("detail", "path", "line", "field")}]
    assert not Study.objects.filter(slug="fresh").exists()
    assert (
        not Question.objects.exists() and not Vote.objects.exists() and not Judge.objects.filter(name="crowd").exists()
    )


def test_before_the_worker_runs_the_state_is_queued(token_client, tmp_path):
    make_study(status="draft", slug="there")
    accepted = token_client.post(URL, {"file": upload(tmp_path), "study": "there"}, format="multipart")
    assert accepted.status_code == 202  # the worker is asked only once the request's work commits
    state = token_client.get(accepted["Location"]).json()
    assert {key: state[key] for key in ("state", "done", "total", "percent")} == {
        "state": "queued",
        "done": 0,
        "total": 3,
        "percent": 0.0,
    }
    assert not Vote.objects.exists()


def test_an_unknown_study_without_create_is_a_400_at_once(token_client, tmp_path, upload_dir):
    response = token_client.post(URL, {"file": upload(tmp_path), "study": "nowhere"}, format="multipart")
    assert response.status_code == 400 and response.json()["field"] == "study"
    assert "nowhere" in response.json()["detail"] and not Vote.objects.exists()
    assert not upload_dir.exists() or not list(upload_dir.iterdir())


def test_a_folder_format_sent_as_a_plain_file_is_a_400_asking_for_a_zip_of_the_folder(token_client, tmp_path):
    make_study(status="draft", slug="there")
    response = token_client.post(
        URL, {"file": upload(tmp_path), "study": "there", "format": "llmbar"}, format="multipart"
    )
    assert response.status_code == 400 and response.json()["field"] == "file"
    assert "llmbar is uploaded as a zip of its folder: not a zip archive" in response.json()["detail"]
    assert not Vote.objects.exists()


def test_a_forged_or_unknown_token_is_a_404(token_client):
    make_study(status="draft", slug="there")
    upload_ = uploads.votes_upload_store(chunks=[b"x\n"], name="v.csv", fmt="csv", slug="there", user=make_staff())
    url = reverse("api:votes-import-job", kwargs={"token": upload_.token[:-2] + "xx"})
    response = token_client.get(url)
    assert response.status_code == 404 and "not valid" in response.json()["detail"]


def test_only_staff_may_import_or_read_an_import_s_state(client, db, tmp_path):
    make_study(status="draft", slug="there")
    response = client.post(URL, {"file": upload(tmp_path), "study": "there"})
    assert response.status_code in (401, 403)
    upload_ = uploads.votes_upload_store(chunks=[b"x\n"], name="v.csv", fmt="csv", slug="there", user=make_staff())
    state = client.get(reverse("api:votes-import-job", kwargs={"token": upload_.token}))
    assert state.status_code in (401, 403) and "state" not in state.json()
    assert not Vote.objects.exists()
