"""The admin's "Import votes" page (the Study admin's action leads to it): the file is kept and
imported by the task worker through the service behind `import_votes` and the API, and a
progress page, for staff only, follows it to the counts and the study's dashboard, or to every
problem with its file, line and field; nothing is written then."""

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import resolve, reverse

from annotations.models import Question, Study, Vote
from annotations.uploads import upload_progress_write
from tests.factories import make_staff, make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv
from vote_imports import uploads, vote_import
from vote_imports.tasks import import_votes_upload

URL = reverse("vote_imports:votes-import")


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    return settings.STUDY_UPLOAD_DIR


def upload(tmp_path, rows=GOOD_ROWS, name="votes.csv") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, write_csv(tmp_path / name, rows).read_bytes(), content_type="text/csv")


def post_and_run(client, capture, data):
    """Post the form; the task worker (the test settings' immediate backend) runs the import
    queued when the request's work commits."""
    with capture(execute=True) as callbacks:
        response = client.post(URL, data)
    return response, callbacks


def progress_url(token: str) -> str:
    return reverse("vote_imports:votes-import-progress", args=[token])


def test_the_study_action_opens_the_page_for_the_selected_study(staff_client):
    study = make_study(status="draft", slug="there")
    changelist = reverse("admin:annotations_study_changelist")
    response = staff_client.post(changelist, {"action": "import_votes", "_selected_action": [study.pk]})
    assert response.status_code == 302 and response["Location"] == f"{URL}?study=there"
    page = staff_client.get(response["Location"]).content.decode()
    assert 'value="there"' in page and 'enctype="multipart/form-data"' in page


def test_the_worker_imports_the_file_and_the_progress_page_shows_the_counts_and_the_dashboard(
    staff_client, tmp_path, django_capture_on_commit_callbacks
):
    study = make_study(status="draft", slug="there")
    data = {"file": upload(tmp_path), "format": "csv", "study": "there"}
    response, callbacks = post_and_run(staff_client, django_capture_on_commit_callbacks, data)
    # enqueue_or_undo(partial(import_votes_upload.enqueue, ...), undo=..., what=...)
    queued = [
        c
        for c in callbacks
        if getattr(c.args[0] if getattr(c, "args", None) else c, "func", None) == import_votes_upload.enqueue
    ]
    assert len(queued) == 1  # once, for the worker (other callbacks are not jobs)
    assert response.status_code == 302 and resolve(response["Location"]).url_name == "votes-import-progress"
    page = staff_client.get(response["Location"])
    progress = page.context["progress"]
    assert progress["state"] == "done" and progress["study"] == "there" and progress["percent"] == 100.0
    assert progress["counts"]["votes"] == 4 == Vote.objects.filter(item__study=study).count()
    assert progress["counts"]["questions"] == Question.objects.filter(study=study).count() > 0
    html = page.content.decode()
    assert reverse("analysis:study", args=["there"]) in html and "4 votes" in html
    assert "hx-trigger" not in html  # finished: the page stops polling


def test_the_uploaded_file_is_kept_under_a_random_name_and_removed_after_the_import(
    staff_client, tmp_path, upload_dir, django_capture_on_commit_callbacks
):
    make_study(status="draft", slug="there")
    sneaky = SimpleUploadedFile("../../etc/votes.csv", upload(tmp_path).read(), content_type="text/csv")
    data = {"file": sneaky, "format": "csv", "study": "there"}
    post_and_run(staff_client, django_capture_on_commit_callbacks, data)
    (folder,) = list(upload_dir.iterdir())
    assert len(folder.name) == 32 and not (folder / uploads.DATA_NAME).exists()
    assert [p.name for p in folder.iterdir()] == ["progress.json"]


def test_create_makes_the_study(staff_client, tmp_path, django_capture_on_commit_callbacks):
    data = {"file": upload(tmp_path), "format": "csv", "study": "new-one", "create": "on", "title": "New one"}
    response, _ = post_and_run(staff_client, django_capture_on_commit_callbacks, data)
    assert response.status_code == 302
    assert Study.objects.get(slug="new-one").title == "New one"


def test_a_bad_file_shows_its_file_line_and_field_on_the_progress_page_and_nothing_is_written(
    staff_client, tmp_path, django_capture_on_commit_callbacks
):
    rows = [list(r) for r in GOOD_ROWS]
    rows[1][5] = "both"
    data = {"file": upload(tmp_path, rows, name="mine.csv"), "format": "csv", "study": "fresh", "create": "on"}
    response, _ = post_and_run(staff_client, django_capture_on_commit_callbacks, data)
    assert response.status_code == 302
    page = staff_client.get(response["Location"])
    assert page.context["progress"]["state"] == "failed"
    assert page.context["progress"]["problems"] == [
        {"path": "mine.csv", "line": 3, "field": "winner", "message": "'both' is not a1, a2 or tie"}
    ]
    html = page.content.decode()
    assert "Import failed" in html and "Nothing was written" in html
    assert "<td>mine.csv</td><td>3</td>" in html and "<code>winner</code>" in html
    assert f"{URL}?study=fresh" in html  # upload it again
    assert not Study.objects.filter(slug="fresh").exists() and not Question.objects.exists()
    assert not Vote.objects.exists()


def test_an_unknown_study_without_create_is_refused_at_once(staff_client, tmp_path, upload_dir):
    response = staff_client.post(URL, {"file": upload(tmp_path), "format": "csv", "study": "nowhere"})
    assert response.status_code == 400 and "nowhere" in " ".join(response.context["form"].errors["study"])
    assert not upload_dir.exists() or not list(upload_dir.iterdir())  # nothing kept, nothing queued


def test_while_the_worker_runs_the_page_shows_each_step_and_polls(staff_client, tmp_path):
    make_study(status="draft", slug="there")
    upload_ = uploads.votes_upload_store(
        chunks=[b"question_id\n"], name="v.csv", fmt="csv", slug="there", user=make_staff()
    )
    url = progress_url(upload_.token)
    uploads.votes_upload_queued(upload=upload_)
    assert "Waiting for the task worker" in staff_client.get(url).content.decode()

    upload_progress_write(upload_.folder, state="running", step=vote_import.VOTES_IMPORT_STEPS[1], done=1, total=3)
    fragment = staff_client.get(url, headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in fragment and 'hx-trigger="every 2s"' in fragment
    assert "<h2>Preparing questions, answers, items and votes</h2>" in fragment
    assert "Reading the votes: done" in fragment
    assert '<li aria-current="step">Preparing questions, answers, items and votes: under way</li>' in fragment
    assert "1 of 3 steps done (33.3%)" in fragment


def test_a_tampered_token_sends_staff_back_to_the_form(staff_client):
    make_study(status="draft", slug="there")
    upload_ = uploads.votes_upload_store(chunks=[b"x\n"], name="v.csv", fmt="csv", slug="there", user=make_staff())
    response = staff_client.get(progress_url(upload_.token[:-2] + "xx"), follow=True)
    assert response.redirect_chain[-1][0] == URL
    assert "not valid" in response.content.decode()


def test_people_who_are_not_staff_are_sent_to_the_login(client, db, tmp_path, upload_dir):
    make_study(status="draft", slug="there")
    response = client.post(URL, {"file": upload(tmp_path), "format": "csv", "study": "there"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Vote.objects.exists() and not upload_dir.exists()


def test_only_staff_see_the_progress_page(client, user_client, staff_client):
    make_study(status="draft", slug="there")
    upload_ = uploads.votes_upload_store(chunks=[b"x\n"], name="v.csv", fmt="csv", slug="there", user=make_staff())
    url = progress_url(upload_.token)
    for visitor in (client, user_client):
        response = visitor.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
        assert "progress" not in (response.context or {})
    assert staff_client.get(url).status_code == 200
