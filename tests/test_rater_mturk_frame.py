"""Who may frame which page: the rater pages of a study that allows MTurk's frame answer with
MTurk's sites as frame-ancestors, no X-Frame-Options and SameSite=None cookies; every other
study, and every staff page, stays DENY and frame-ancestors 'none'."""

import re

import pytest
from django.test import Client
from django.urls import reverse

from tests.factories import make_question, make_study, make_user

pytestmark = pytest.mark.django_db

MTURK_QUERY = {"assignmentId": "A7", "hitId": "H3", "workerId": "W9", "turkSubmitTo": "https://workersandbox.mturk.com"}
MTURK_SITES = "frame-ancestors https://worker.mturk.com https://workersandbox.mturk.com https://www.mturk.com"


def frame_ancestors(response) -> str:
    return re.search(r"frame-ancestors[^;]*", response["Content-Security-Policy"]).group(0)


def framed(response) -> bool:
    assert "X-Frame-Options" not in response
    assert frame_ancestors(response) == MTURK_SITES
    return True


def not_framed(response) -> bool:
    assert response["X-Frame-Options"] == "DENY"
    assert frame_ancestors(response) == "frame-ancestors 'none'"
    return True


def study_of(**kw):
    study = make_study(target_per_rater=1, votes_per_item=1, completion_code="C0DE", **kw)
    make_question(study)
    return study


def landing(study) -> str:
    return reverse("annotations:landing", args=[study.slug])


def enter_as_worker(client: Client, study, **extra):
    """The landing's cookie check, then entry; the response of the entry."""
    check = client.get(landing(study), MTURK_QUERY, **extra)
    assert check.status_code == 302 and "cookie_check=1" in check["Location"]
    page = client.get(check["Location"], **extra)
    assert page.status_code == 200 and b"Start rating" in page.content
    return client.post(check["Location"], {"consent": "on"}, **extra)


def test_a_study_without_the_setting_cannot_be_framed_anywhere():
    study = study_of()
    client = Client()
    assert not_framed(client.get(landing(study), MTURK_QUERY))
    entered = client.post(f"{landing(study)}?workerId=W9&assignmentId=A7", {"consent": "on"})
    assert entered.cookies[f"rater-{study.slug}"]["samesite"] == "Lax"
    task = client.get(reverse("annotations:task", args=[study.slug]))
    assert not_framed(task)
    assert not_framed(client.get(reverse("annotations:done", args=[study.slug])))


def test_every_rater_page_of_a_study_that_allows_it_may_be_framed_by_mturk_only():
    study = study_of(allow_mturk_frame=True)
    client = Client()
    entered = enter_as_worker(client, study, secure=True)
    assert framed(entered)
    task = client.get(entered["Location"], secure=True)
    assert task.status_code == 200 and framed(task)
    token = re.search(r'name="token" value="([^"]+)"', task.content.decode()).group(1)
    voted = client.post(entered["Location"], {"token": token, "choice": "tie"}, secure=True, HTTP_HX_REQUEST="true")
    assert framed(voted)
    done = client.get(reverse("annotations:done", args=[study.slug]), secure=True)
    assert b"Submit the HIT to MTurk" in done.content and framed(done)


def test_staff_pages_stay_unframeable_while_a_study_allows_mturk():
    study_of(allow_mturk_frame=True)
    client = Client()
    client.force_login(make_user(is_staff=True, is_superuser=True))
    for url in ("/admin/annotations/study/", "/dashboard/", "/api/v1/studies/"):
        assert not_framed(client.get(url)), url


@pytest.mark.parametrize(
    ("extra", "samesite", "secure"),
    [
        ({"secure": True}, "None", True),  # HTTPS
        ({"HTTP_HOST": "127.0.0.1"}, "None", True),  # loopback over http: Chromium keeps a Secure cookie
        ({"HTTP_HOST": "localhost:8000"}, "None", True),
        ({}, "", ""),  # plain http elsewhere: a Secure cookie would be dropped, so it is not made one
    ],
)
def test_the_cookies_of_a_framed_study_are_sent_from_inside_a_frame_where_a_browser_keeps_them(extra, samesite, secure):
    study = study_of(allow_mturk_frame=True)
    client = Client()
    entered = enter_as_worker(client, study, **extra)
    rater_cookie = entered.cookies[f"rater-{study.slug}"]
    assert (rater_cookie["samesite"], rater_cookie["secure"]) == (samesite or "Lax", secure)
    check = Client().get(landing(study), MTURK_QUERY, **extra).cookies["cookie_check"]
    assert (check["samesite"], check["secure"]) == (samesite, secure)


def test_a_browser_that_did_not_send_the_check_cookie_back_is_offered_a_new_tab_not_a_loop():
    study = study_of(allow_mturk_frame=True)
    url = f"{landing(study)}?{'&'.join(f'{k}={v}' for k, v in MTURK_QUERY.items())}&cookie_check=1"
    page = Client().get(url)  # a fresh client: no cookie came back
    html = page.content.decode()
    assert page.status_code == 200 and framed(page)
    assert "Start rating" not in html
    link = re.search(
        r'<a class="button primary" href="([^"]+)" target="_blank" rel="noopener">Open this task in a new tab', html
    )
    assert (
        link.group(1)
        == f"{landing(study)}?assignmentId=A7&amp;hitId=H3&amp;workerId=W9&amp;turkSubmitTo=https%3A%2F%2Fworkersandbox.mturk.com"
    )


def test_the_frame_ancestors_come_from_the_setting(settings):
    settings.BIASSTUDY_MTURK_FRAME_ANCESTORS = ["http://127.0.0.1:8123"]
    study = study_of(allow_mturk_frame=True)
    assert frame_ancestors(Client().get(landing(study), MTURK_QUERY)) == "frame-ancestors http://127.0.0.1:8123"
