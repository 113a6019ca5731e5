"""A researcher runs a study on Prolific from the admin, in a real browser, against the loopback
Prolific: from the study's admin page to the Prolific page, the draft, publish, sync, approve all
that our rules pass, the bonus previewed and paid, a second click paying nothing; the page checked
by axe-core (WCAG 2.1 A and AA) on the way."""

from __future__ import annotations

import time
from decimal import Decimal

import pytest
from django.urls import reverse

from prolific.models import ProlificStudy
from tests.browser import chromium, expect
from tests.prolific_helpers import prolific, prolific_rater, study_for_prolific, vote_all
from tests.test_accessibility_axe import AXE, assert_accessible, staff_page

__all__ = ["prolific"]  # the fixture

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def test_a_researcher_creates_publishes_approves_and_pays_from_the_admin(
    browser, live_server, transactional_db, prolific
):
    study = study_for_prolific(title="Better answers")
    page = staff_page(browser, live_server)
    page.goto(live_server.url + reverse("admin:annotations_study_change", args=[study.pk]))
    page.get_by_role("link", name="Prolific", exact=True).click()
    page.get_by_label("Reward (cents)").fill("150")
    page.get_by_label("Places").fill("2")
    page.get_by_role("button", name="Create the draft").click()
    expect(page.locator("#prolific-status")).to_have_text("UNPUBLISHED")
    link = ProlificStudy.objects.get(study=study)
    assert prolific.studies[link.prolific_id]["estimated_completion_time"] == 2  # 30 s x 3 items, rounded up

    page.get_by_role("button", name="Show the cost").click()
    expect(page.locator(".messagelist")).to_contain_text("4.00 in all")
    page.get_by_role("button", name="Publish").click()
    expect(page.locator("#prolific-status")).to_have_text("ACTIVE")

    rater, submission = prolific_rater(study, prolific, link)
    vote_all(rater)
    prolific.submission_set(submission, status="AWAITING REVIEW", study_code="C0DE1234")
    page.get_by_role("button", name="Sync now").click()
    expect(page.locator("#submissions")).to_contain_text(rater.participant_id)
    if AXE.exists():
        assert_accessible(page, "the Prolific page")
    page.get_by_role("button", name="Approve all that our rules pass").click()
    expect(page.locator(".messagelist")).to_contain_text("1 submission approved")
    assert prolific.submissions[submission]["status"] == "APPROVED"

    page.get_by_label("Bonus per counted vote").fill("0.05")
    page.get_by_role("button", name="Preview").click()
    expect(page.locator("#bonus-preview")).to_contain_text("0.15 in all")
    if AXE.exists():
        assert_accessible(page, "the Prolific page with a bonus previewed")
    pay = page.get_by_role("button", name="Pay 0.15 in bonuses")
    pay.dblclick()
    page.wait_for_load_state()
    # The second click finds every bonus asked for already and shows the batch as it is then:
    # on a loaded machine, before the first click's calls to Prolific have ended ("recorded,
    # not yet sent"). The researcher reloads until it is settled (60 s only catches a hang).
    batches, deadline = page.locator("#bonus-batches"), time.monotonic() + 60
    while ": paid" not in batches.inner_text() and time.monotonic() < deadline:
        time.sleep(0.5)
        page.reload()
    expect(batches).to_contain_text(": paid")  # not "set up on Prolific, not paid"
    assert prolific.amount_paid(rater.participant_id) == Decimal("0.15")
    assert len(prolific.paid) == 1
