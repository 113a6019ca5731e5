"""MTurk's HIT frame in a real browser: a page on another site (127.0.0.1, while the live server
is localhost: two sites to Chromium) frames the rater landing as MTurk frames an ExternalQuestion,
the worker votes inside the frame to the end, and the done page posts the assignment to a
loopback stand-in for MTurk's endpoint. A study that does not allow it cannot be framed at all."""

import re
from urllib.parse import quote

import pytest
from django.urls import reverse

from annotations.models import Rater, Vote
from tests.browser import chromium, chromium_with_third_party_cookies, expect
from tests.factories import make_question, make_study
from tests.mturk_standin import SUBMITTED, mturk_stand_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def mturk_site(settings):
    with mturk_stand_in() as mturk:
        settings.BIASSTUDY_MTURK_FRAME_ANCESTORS = [mturk.origin]  # the live server runs in this process
        yield mturk.origin, mturk.received


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


@pytest.fixture
def everyday_chrome():
    with chromium_with_third_party_cookies() as context:
        yield context


def hit_page(live_server, study, origin: str) -> str:
    """The HIT page on the MTurk stand-in, framing the study link as MTurk adds its parameters."""
    assert live_server.url.startswith("http://localhost:"), "the frame must be another site than the HIT page"
    query = f"?assignmentId=ASSIGN-7&hitId=HIT-3&workerId=WORKER9&turkSubmitTo={quote(origin, safe='')}"
    src = live_server.url + reverse("annotations:landing", args=[study.slug]) + query
    return f"{origin}/hit?src={quote(src, safe='')}"


def two_question_study(**kw):
    # Two votes per item: both orders of each, so the worker's own order balance never stops them.
    study = make_study(votes_per_item=2, target_per_rater=2, completion_code="C0DE-42", **kw)
    for i in range(2):
        make_question(study, text=f"Question {i}: what is {i} + {i}?", a1=f"It is {2 * i}.", a2="Nobody knows.")
    return study


def vote_to_the_end(task) -> None:
    """Enter as the worker the link names, and answer both items."""
    expect(task.get_by_text("You are taking part as WORKER9")).to_be_visible()
    task.get_by_label("I have read the information above").check()
    task.get_by_role("button", name="Start rating").click()
    expect(task.locator("#progress-label")).to_have_text(re.compile(r"0 / 2$"))
    task.get_by_role("button", name="About the same").click()
    expect(task.locator("#progress-label")).to_have_text(re.compile(r"1 / 2$"))
    task.get_by_role("button", name="About the same").click()
    expect(task.get_by_text(SUBMITTED)).to_be_visible()


def assert_submitted(study, received) -> None:
    assert received == [("/mturk/externalSubmit", {"assignmentId": ["ASSIGN-7"], "completion_code": ["C0DE-42"]})]
    rater = Rater.objects.get(study=study)
    assert (rater.participant_id, rater.source_meta["hitId"]) == ("WORKER9", "HIT-3")
    assert Vote.objects.filter(rater=rater).count() == 2


def test_a_worker_votes_inside_mturk_s_frame_and_the_assignment_is_posted_back(
    everyday_chrome, live_server, transactional_db, mturk_site
):
    origin, received = mturk_site
    study = two_question_study(allow_mturk_frame=True)
    page = everyday_chrome.new_page()
    page.goto(hit_page(live_server, study, origin))
    vote_to_the_end(page.frame_locator("iframe[name=task]"))
    assert_submitted(study, received)
    page.close()


def test_a_browser_blocking_third_party_cookies_is_offered_the_task_in_a_new_tab(
    browser, live_server, transactional_db, mturk_site
):
    origin, received = mturk_site
    study = two_question_study(allow_mturk_frame=True)
    page = browser.new_page()
    page.goto(hit_page(live_server, study, origin))
    task = page.frame_locator("iframe[name=task]")
    expect(task.get_by_text("The task cannot run in this frame.")).to_be_visible()
    expect(task.get_by_role("button", name="Start rating")).to_have_count(0)
    with page.context.expect_page() as opened:
        task.get_by_role("link", name="Open this task in a new tab").click()
    tab = opened.value
    tab.wait_for_load_state()
    assert "cookie_check=1" in tab.url and "assignmentId=ASSIGN-7" in tab.url  # the tab checks its own cookie
    vote_to_the_end(tab)
    assert_submitted(study, received)
    page.context.close()


def test_a_study_that_does_not_allow_it_is_not_shown_in_the_frame(browser, live_server, transactional_db, mturk_site):
    origin, _received = mturk_site
    study = two_question_study()
    page = browser.new_page()
    refused = []
    page.on("console", lambda message: refused.append(message.text) if "frame" in message.text else None)
    page.goto(hit_page(live_server, study, origin))
    page.wait_for_timeout(1000)  # the frame's load either shows the study or is refused
    assert page.frame_locator("iframe[name=task]").get_by_text("Start rating").count() == 0
    assert any("frame-ancestors" in text or "X-Frame-Options" in text for text in refused), refused
    page.close()
