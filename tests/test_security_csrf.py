"""CSRF is enforced on every POST form: rater entry and vote, admin login, admin actions, and
the API under a session (a token-authenticated API client is not a browser and needs none)."""

import re

import pytest
from django.test import Client

from annotations.models import Rater, Vote
from tests.factories import make_question, make_staff, make_study

_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
_TOKEN = re.compile(r'name="token" value="([^"]+)"')


@pytest.fixture
def strict() -> Client:
    return Client(enforce_csrf_checks=True)


@pytest.fixture
def open_study(db):
    study = make_study(slug="csrf", votes_per_item=2, target_per_rater=2)
    for _ in range(2):
        make_question(study)
    return study


def test_entering_a_study_without_the_token_is_refused_and_creates_no_rater(strict, open_study):
    strict.get("/s/csrf/")
    response = strict.post("/s/csrf/", {"participant_id": "C1", "consent": "on"})
    assert response.status_code == 403
    assert not Rater.objects.exists()


def test_a_vote_without_the_token_is_refused_and_stores_nothing(strict, open_study):
    landing = strict.get("/s/csrf/")
    csrf = _CSRF.search(landing.content.decode()).group(1)
    assert (
        strict.post("/s/csrf/", {"participant_id": "C2", "consent": "on", "csrfmiddlewaretoken": csrf}).status_code
        == 302
    )
    page = strict.get("/s/csrf/task/").content.decode()
    vote = {"token": _TOKEN.search(page).group(1), "choice": "first", "client_ms": "5000"}
    for headers in ({}, {"HTTP_HX_REQUEST": "true"}, {"HTTP_X_CSRFTOKEN": "not-the-token" * 3}):
        assert strict.post("/s/csrf/task/", vote, **headers).status_code == 403
    assert not Vote.objects.exists()
    # The page's own token (as htmx sends it from <body hx-headers>) is accepted.
    assert strict.post("/s/csrf/task/", vote, HTTP_X_CSRFTOKEN=strict.cookies["csrftoken"].value).status_code == 302
    assert Vote.objects.count() == 1


def test_the_admin_login_and_admin_actions_need_the_token(strict, open_study):
    make_staff(username="boss")
    assert strict.post("/admin/login/", {"username": "boss", "password": "pw-staff-12345"}).status_code == 403
    strict.force_login(make_staff())
    rater = Rater.objects.create(study=open_study, participant_id="R1", target=2)
    response = strict.post("/admin/annotations/rater/", {"action": "flag", "_selected_action": [rater.pk], "index": 0})
    assert response.status_code == 403
    rater.refresh_from_db()
    assert not rater.flagged
    response = strict.post("/admin/annotations/study/add/", {"title": "Sneaky", "slug": "sneaky"})
    assert response.status_code == 403


def test_the_api_under_a_staff_session_needs_the_token(strict, db):
    strict.force_login(make_staff())
    response = strict.post("/api/v1/studies/", data="{}", content_type="application/json")
    assert response.status_code == 403
    assert "CSRF" in response.json()["detail"]
