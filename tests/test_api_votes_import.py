"""POST /api/v1/votes/import/: `import_votes FILE --format csv --study S [--create]` over HTTP,
through the same service; staff only; a bad file is a 400 naming file, line and field, and
leaves nothing behind (not even the study `create` would have made)."""

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from annotations.models import Judge, Question, Study, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv

URL = reverse("api:votes-import")


def upload(tmp_path, rows=GOOD_ROWS, name="votes.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, write_csv(tmp_path / name, rows).read_bytes(), content_type="text/csv")


def test_it_imports_a_vote_file_into_a_study_as_the_command_does(token_client, tmp_path):
    study = make_study(slug="there")
    response = token_client.post(URL, {"file": upload(tmp_path), "study": "there"}, format="multipart")
    assert response.status_code == 201, response.json()
    assert response.json()["votes"] == 4 and response.json()["study"] == "there"
    assert response["Location"] == reverse("api:study-detail", kwargs={"slug": "there"})
    assert Vote.objects.filter(item__study=study).count() == 4


def test_create_makes_the_study_with_its_title(token_client, tmp_path):
    data = {"file": upload(tmp_path), "study": "elsewhere", "create": "true", "title": "From elsewhere"}
    assert token_client.post(URL, data, format="multipart").status_code == 201
    study = Study.objects.get(slug="elsewhere")
    assert study.title == "From elsewhere" and Vote.objects.filter(item__study=study).count() == 4


def test_a_bad_row_is_a_400_naming_file_line_and_field_and_nothing_is_written(token_client, tmp_path):
    rows = [list(r) for r in GOOD_ROWS]
    rows[2][5] = "winner-unknown"  # the third data row: line 4 of the file
    data = {"file": upload(tmp_path, rows, name="mine.csv"), "study": "fresh", "create": "true"}
    response = token_client.post(URL, data, format="multipart")
    assert response.status_code == 400
    body = response.json()
    assert body["path"] == "mine.csv" and body["line"] == 4 and body["field"] == "winner", body
    assert "winner-unknown" in body["detail"]
    assert not Study.objects.filter(slug="fresh").exists()
    assert (
        not Question.objects.exists() and not Vote.objects.exists() and not Judge.objects.filter(name="crowd").exists()
    )


def test_an_unknown_study_without_create_is_a_400(token_client, tmp_path):
    response = token_client.post(URL, {"file": upload(tmp_path), "study": "nowhere"}, format="multipart")
    assert response.status_code == 400 and response.json()["field"] == "study"
    assert "nowhere" in response.json()["detail"] and not Vote.objects.exists()


def test_a_folder_format_sent_as_a_plain_file_is_a_400_asking_for_a_zip_of_the_folder(token_client, tmp_path):
    make_study(slug="there")
    response = token_client.post(
        URL, {"file": upload(tmp_path), "study": "there", "format": "llmbar"}, format="multipart"
    )
    assert response.status_code == 400 and response.json()["field"] == "file"
    assert "llmbar is uploaded as a zip of its folder: not a zip archive" in response.json()["detail"]
    assert not Vote.objects.exists()


def test_only_staff_may_import(client, db, tmp_path):
    make_study(slug="there")
    response = client.post(URL, {"file": upload(tmp_path), "study": "there"})
    assert response.status_code in (401, 403)
    assert not Vote.objects.exists()
