"""A vote import that makes questions, answers, items, judges or raters needs the permissions to
add them, held by the user who sent the file when they sent it: "add vote" alone imports votes,
nothing raters are shown. The admin page, the API and the task worker meet one check
(vote_import.votes_import_check); refused, nothing is written and the reason names what is
missing and what would have been made. And a vote import adds items to a study collecting votes
from people only when told to, and hands the items it adds to raters only when told to."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Slot, Vote
from tests.factories import make_question, make_staff, make_staff_with, make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv
from vote_imports import importers, uploads, vote_import

pytestmark = pytest.mark.django_db

NEEDED = [
    "annotations.add_answer",
    "annotations.add_comparisonitem",
    "annotations.add_judge",
    "annotations.add_question",
    "annotations.add_rater",
]
MODELS = (Question, Answer, ComparisonItem, Slot, Judge, Rater, Vote)


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"


@pytest.fixture
def live():
    """A study collecting votes from people, with one question of its own."""
    study = make_study(slug="live", votes_per_item=2, target_per_rater=3)
    make_question(study, text="What is the study's own question?")
    return study


def rows_written() -> dict[str, int]:
    return {model.__name__: model.objects.count() for model in MODELS}


def csv_file(tmp_path, rows=GOOD_ROWS) -> SimpleUploadedFile:
    return SimpleUploadedFile("votes.csv", write_csv(tmp_path / "votes.csv", rows).read_bytes(), "text/csv")


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def a_new_rater_s_page(study) -> str:
    client = Client()
    client.post(reverse("annotations:landing", args=[study.slug]), {"participant_id": "new-p", "consent": "on"})
    return client.get(reverse("annotations:task", args=[study.slug])).content.decode()


def test_the_admin_page_refuses_add_vote_alone_a_file_that_makes_questions(
    live, tmp_path, django_capture_on_commit_callbacks
):
    before = rows_written()
    client = logged_in(make_staff_with("annotations.add_vote"))
    data = {"file": csv_file(tmp_path), "format": "csv", "study": "live", "add_to_collecting": "on"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("vote_imports:votes-import"), data)
    assert response.status_code == 302
    progress = client.get(response["Location"]).context["progress"]
    assert progress["state"] == "failed"
    (problem,) = progress["problems"]
    assert problem["field"] == "permissions"
    assert "1 question, 3 answers, 2 items, 2 judges and 2 raters" in problem["message"]
    assert ", ".join(NEEDED) in problem["message"]
    assert rows_written() == before
    assert "Why is the sky blue?" not in a_new_rater_s_page(live)


def test_the_api_refuses_add_vote_alone_a_file_that_makes_questions(live, tmp_path, django_capture_on_commit_callbacks):
    before = rows_written()
    client = APIClient()
    client.credentials(
        HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=make_staff_with('annotations.add_vote')).key}"
    )
    data = {"file": csv_file(tmp_path), "study": "live", "add_to_collecting": "true", "for_raters": "true"}
    with django_capture_on_commit_callbacks(execute=True):
        accepted = client.post(reverse("api:votes-import"), data, format="multipart")
    assert accepted.status_code == 202, accepted.json()
    state = client.get(accepted["Location"]).json()
    assert state["state"] == "failed" and state["field"] == "permissions"
    assert "1 question, 3 answers, 2 items, 2 judges and 2 raters" in state["detail"]
    assert all(perm in state["detail"] for perm in NEEDED)
    assert rows_written() == before


def test_the_permissions_are_the_sender_s_when_the_file_was_sent(live, tmp_path):
    """Granted after sending, they do not count for the file already sent: the worker checks
    the permissions the request had."""
    sender = make_staff_with("annotations.add_vote")
    upload = uploads.votes_upload_store(
        chunks=[csv_file(tmp_path).read()], name="votes.csv", fmt="csv", slug="live", user=sender,
        add_to_collecting=True,
    )  # fmt: skip
    for perm in NEEDED:
        sender.user_permissions.add(Permission.objects.get(codename=perm.split(".")[1]))
    with pytest.raises(importers.ImportProblem, match="needs the permission"):
        uploads.votes_upload_import(upload=upload)
    assert not Question.objects.filter(external_id="q1").exists()


def test_with_the_permissions_to_add_them_the_same_file_is_imported(live, tmp_path):
    sender = make_staff_with("annotations.add_vote", *NEEDED)
    upload = uploads.votes_upload_store(
        chunks=[csv_file(tmp_path).read()], name="votes.csv", fmt="csv", slug="live", user=sender,
        add_to_collecting=True,
    )  # fmt: skip
    _, counts = uploads.votes_upload_import(upload=upload)
    assert counts["questions"] == 1 and counts["votes"] == 4


def test_add_vote_alone_imports_votes_on_what_the_study_has(live, tmp_path):
    """Votes of a judge the study has, on its questions and items: nothing new but votes."""
    call_command("import_votes", str(write_csv(tmp_path / "first.csv", GOOD_ROWS[:3])), "--format", "csv",
                 "--study", "live", "--add-to-collecting", verbosity=0)  # fmt: skip
    Judge.objects.create(study=live, name="gpt-x", kind=Judge.Kind.IMPORTED)
    upload = uploads.votes_upload_store(
        chunks=[csv_file(tmp_path, GOOD_ROWS[3:]).read()], name="votes.csv", fmt="csv", slug="live",
        user=make_staff_with("annotations.add_vote"),
    )  # fmt: skip
    _, counts = uploads.votes_upload_import(upload=upload)
    assert counts["votes"] == 1 and not any(counts[name] for name in vote_import.CREATES)


def test_a_study_collecting_from_people_gets_no_new_items_unless_told(live, tmp_path):
    before = rows_written()
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    with pytest.raises(CommandError, match="'live' is collecting votes from people .* 2 item.* 'q1'"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "live", verbosity=0)
    assert rows_written() == before
    upload = uploads.votes_upload_store(
        chunks=[path.read_bytes()], name="votes.csv", fmt="csv", slug="live", user=make_staff()
    )
    with pytest.raises(importers.ImportProblem, match="add_to_collecting=true"):
        uploads.votes_upload_import(upload=upload)
    assert rows_written() == before


def test_items_an_import_adds_are_not_handed_to_raters_unless_told(live, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "live", "--add-to-collecting", verbosity=0)
    added = ComparisonItem.objects.filter(question__external_id="q1")
    assert added.count() == 2 and not added.filter(offered_to_raters=True).exists()
    assert not Slot.objects.filter(item__in=added).exists()
    assert not live.items.approved().filter(question__external_id="q1").exists()
    live.votes_per_item = 3
    live.save()  # the quota's change gives every item its slots again: not these
    assert not Slot.objects.filter(item__in=added).exists()
    assert "Why is the sky blue?" not in a_new_rater_s_page(live)


def test_told_to_the_items_an_import_adds_are_handed_to_raters(live, tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "live", "--add-to-collecting",
                 "--for-raters", verbosity=0)  # fmt: skip
    added = ComparisonItem.objects.filter(question__external_id="q1")
    assert all(Slot.objects.filter(item=item).count() == live.votes_per_item for item in added)
