"""The study's Prolific page in the admin, against the loopback Prolific: who may open it, the
draft made from its form, Prolific's 4xx named on the page, a rejection breaking Prolific's rules
refused before any call, a double click on "pay" paying once, and the rater monitor's Prolific
column."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse

from analysis import exports
from prolific import services
from prolific.models import ProlificStudy
from tests.factories import make_staff, make_staff_with
from tests.prolific_helpers import REJECTION, draft, prolific, prolific_rater, study_for_prolific, vote_all

__all__ = ["prolific"]  # the fixture

pytestmark = pytest.mark.django_db


def _page(study) -> str:
    return reverse("prolific:study", args=[study.pk])


def test_only_staff_who_may_change_studies_and_see_raters_open_it(prolific, anon_client, user_client):
    study = study_for_prolific()
    assert anon_client.get(_page(study)).status_code == 302
    assert user_client.get(_page(study)).status_code == 302
    for perms, status in [
        (("annotations.change_study",), 403),
        (("annotations.change_study", "annotations.view_rater"), 200),
    ]:
        client = Client()
        client.force_login(make_staff_with(*perms))
        assert client.get(_page(study)).status_code == status
        assert client.post(_page(study), {"action": "sync"}).status_code in {status, 302}
    assert not prolific.log  # nobody called Prolific
    admin = Client()
    admin.force_login(make_staff())
    change = admin.get(reverse("admin:annotations_study_change", args=[study.pk])).content.decode()
    assert _page(study) in change


def test_the_draft_is_made_from_the_pages_form(prolific, staff_client):
    study = study_for_prolific()
    page = staff_client.get(_page(study)).content.decode()
    assert "Create the draft" in page and "assumed: no timed vote yet" in page
    form = {
        "action": "create",
        "name": "Which answer is better?",
        "description": "Compare two answers.",
        "reward_cents": "120",
        "places": "3",
        "estimated_minutes": "4",
        "devices": ["desktop", "mobile"],
    }
    response = staff_client.post(_page(study), form, follow=True)
    link = ProlificStudy.objects.get(study=study)
    assert "created on Prolific" in response.content.decode()
    sent = prolific.studies[link.prolific_id]
    assert sent["external_study_url"].startswith(f"http://testserver/s/{study.slug}/?PROLIFIC_PID=")
    assert (sent["reward"], sent["total_available_places"], sent["device_compatibility"]) == (
        120,
        3,
        ["desktop", "mobile"],
    )  # noqa: E501
    response = staff_client.post(_page(study), {"action": "cost"}, follow=True)
    assert "4.80 in all" in response.content.decode()  # 120 x 3 x 4/3


def test_prolifics_4xx_is_named_on_the_page(prolific, staff_client):
    study = study_for_prolific()
    draft(study)
    response = staff_client.post(_page(study), {"action": "transition", "study_action": "PAUSE"}, follow=True)
    page = response.content.decode()
    assert "Prolific answered 400" in page and "cannot be transitioned with PAUSE" in page
    assert ProlificStudy.objects.get(study=study).status == "UNPUBLISHED"


def awaiting_review(prolific):
    """A study on Prolific with one rater whose submission awaits review, synced."""
    study = study_for_prolific()
    _, sub = prolific_rater(study, prolific, draft(study))
    prolific.submission_set(sub, status="AWAITING REVIEW")
    services.prolific_submissions_sync(study=study)
    return study, sub


def test_a_rejection_with_too_short_a_message_is_refused_before_any_call(prolific, staff_client):
    study, sub = awaiting_review(prolific)
    before = len(prolific.log)
    response = staff_client.post(
        _page(study), {"action": "reject", "submission": sub, "category": "LOW_EFFORT", "message": "Too quick."}
    )
    assert response.status_code == 400
    assert "at least 100 characters" in response.content.decode()
    assert len(prolific.log) == before
    response = staff_client.post(
        _page(study),
        {"action": "reject", "submission": sub, "category": "LOW_EFFORT", "message": REJECTION},
        follow=True,
    )
    assert "1 submission rejected" in response.content.decode()
    assert prolific.submissions[sub]["status"] == "REJECTED"


def test_a_double_click_on_pay_pays_once(prolific, staff_client):
    study = study_for_prolific()
    link = draft(study)
    rater, _ = prolific_rater(study, prolific, link)
    vote_all(rater)
    services.prolific_submissions_sync(study=study)
    preview = staff_client.get(_page(study), {"per_vote": "0.10"}).content.decode()
    assert "<strong>1</strong> bonus to pay, <strong>0.30</strong> in all" in preview
    first = staff_client.post(_page(study), {"action": "pay", "per_vote": "0.10"}, follow=True)
    second = staff_client.post(_page(study), {"action": "pay", "per_vote": "0.10"}, follow=True)
    assert "Bonuses paid: 1 raters" in first.content.decode()
    assert "Nothing to pay" in second.content.decode()
    assert prolific.amount_paid(rater.participant_id) == Decimal("0.30") and len(prolific.paid) == 1
    assert "nothing more" in staff_client.get(_page(study), {"per_vote": "0.10"}).content.decode()


def test_the_rater_monitor_shows_each_raters_prolific_status(prolific, staff_client):
    study = study_for_prolific()
    link = draft(study)
    rater, sub = prolific_rater(study, prolific, link)
    prolific.submission_set(sub, status="RETURNED")
    services.prolific_submissions_sync(study=study)
    page = staff_client.get(reverse("analysis:raters", args=[study.slug])).content.decode()
    assert '<th title="Their submission on Prolific, as last synced">Prolific</th>' in page
    assert ">RETURNED</td>" in page
    assert _page(study) in page
    # The monitor's own bonus field carries over to the Prolific page's preview.
    page = staff_client.get(reverse("analysis:raters", args=[study.slug]), {"bonus_per_counted_vote": "0.05"})
    assert f"{_page(study)}?per_vote=0.05" in page.content.decode()


def test_the_rater_monitor_approves_through_the_prolific_page_and_links_to_reject(prolific, staff_client):
    study, sub = awaiting_review(prolific)
    monitor = reverse("analysis:raters", args=[study.slug])
    page = staff_client.get(monitor).content.decode()
    approve = re.search(r'<form method="post" action="([^"]+)" class="inline">(.*?)</form>', page, re.S)
    assert approve and approve.group(1) == _page(study) and "csrfmiddlewaretoken" in approve.group(2)
    fields = dict(re.findall(r'<input type="hidden" name="(action|submission)" value="([^"]*)">', approve.group(2)))
    assert fields == {"action": "approve", "submission": sub}
    assert 'id="monitor-approve-suggested"' in page
    reject = f"{_page(study)}?reject={sub}#reject-form"
    assert reject in page
    # The reject link opens the Prolific page's reject form with this submission chosen.
    assert f'<option value="{sub}" selected>' in staff_client.get(reject).content.decode()
    # Posted as the monitor's form posts it (with CSRF checked), the Prolific page approves it.
    checked = Client(enforce_csrf_checks=True)
    checked.force_login(make_staff())
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', checked.get(monitor).content.decode()).group(1)
    assert checked.post(approve.group(1), fields).status_code == 403, "no CSRF token, no call"
    done = checked.post(approve.group(1), {**fields, "csrfmiddlewaretoken": token}, follow=True)
    assert "1 submission approved" in done.content.decode()
    assert prolific.submissions[sub]["status"] == "APPROVED"
    # Staff who may see the monitor but not act on Prolific get no buttons.
    viewer = Client()
    viewer.force_login(make_staff_with(*exports.PAYMENT_PERMISSIONS, "annotations.view_study"))
    page = viewer.get(monitor)
    assert page.status_code == 200 and 'class="inline"' not in page.content.decode()
