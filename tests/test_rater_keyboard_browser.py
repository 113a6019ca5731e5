"""The rater page's keyboard, screen-reader and multi-tab behaviour in a real browser (Playwright
driving Debian's Chromium against a live server), and an MTurk assignment handed back to a
loopback stand-in for MTurk's endpoint."""

import re
from urllib.parse import quote

import pytest
from django.urls import reverse

from annotations.models import Vote
from tests.browser import chromium, expect
from tests.factories import make_question, make_study
from tests.mturk_standin import SUBMITTED, mturk_stand_in

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def study_of(n: int = 4, **kw):
    kw.setdefault("target_per_rater", n)
    study = make_study(votes_per_item=2, instructions="Pick the **better** answer.", **kw)
    for i in range(n + 1):
        make_question(study, text=f"Question {i}: what is {i} + {i}?", a1=f"It is {2 * i}.", a2="Nobody knows.")
    return study


def enter(page, live_server, study, participant_id="keys-1"):
    page.goto(live_server.url + reverse("annotations:landing", args=[study.slug]))
    page.get_by_label("Your participant id").fill(participant_id)
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(r"/task/$"))


def question(page) -> str:
    return page.locator("#question-text").inner_text().strip()


def test_arrow_keys_and_keys_outside_the_vote_form_never_vote(browser, live_server, transactional_db):
    study = study_of()
    page = browser.new_page()
    enter(page, live_server, study)
    assert page.evaluate("document.activeElement.id") == "question-text", "the page starts at the question"
    for key in ("ArrowDown", "ArrowLeft", "ArrowRight", "ArrowUp", "PageDown"):
        page.keyboard.press(key)
    page.get_by_text("Instructions", exact=True).focus()
    page.keyboard.press("1")
    page.keyboard.press("2")
    page.wait_for_timeout(300)  # give a wrongly sent vote the time to arrive
    assert not Vote.objects.exists()
    assert page.locator("#progress-label").inner_text().endswith("0 / 4")
    page.locator("#question-text").focus()
    page.keyboard.press("2")
    expect(page.locator("#progress-label")).to_contain_text("1 / 4")
    assert Vote.objects.get().choice_shown == "tie"
    page.close()


def test_a_rater_can_turn_the_shortcuts_off_and_it_is_remembered(browser, live_server, transactional_db):
    study = study_of()
    page = browser.new_page()
    enter(page, live_server, study)
    switch = page.get_by_label("Keyboard shortcuts (1, 2, 3 and F)")
    assert switch.is_checked()
    expect(page.locator(".keys")).to_be_visible()
    switch.uncheck()
    expect(page.locator(".keys")).to_be_hidden()
    page.reload()
    assert not page.get_by_label("Keyboard shortcuts (1, 2, 3 and F)").is_checked()
    page.locator("#question-text").focus()
    page.keyboard.press("1")
    page.keyboard.press("f")
    page.wait_for_timeout(300)
    assert not Vote.objects.exists()
    assert not page.get_by_label("I am not familiar with this topic").is_checked()
    # Buttons still work, by click or by Enter on a focused button.
    page.get_by_role("button", name="Answer 2 is better").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#progress-label")).to_contain_text("1 / 4")
    page.close()


def test_screen_readers_hear_the_vote_recorded_and_focus_moves_to_the_new_question(
    browser, live_server, transactional_db
):
    study = study_of()
    page = browser.new_page()
    enter(page, live_server, study)
    status = page.locator("#task-status")
    assert status.get_attribute("role") == "status" and status.inner_text() == ""
    first = question(page)
    page.keyboard.press("3")
    expect(status).to_have_text("Vote recorded. 1 of 4 done.")
    assert question(page) != first
    assert page.evaluate("document.activeElement.id") == "question-text"
    assert page.evaluate("document.activeElement.textContent.trim()") == question(page)
    page.close()


def test_a_vote_from_a_stale_second_tab_is_explained_and_the_current_item_shown(browser, live_server, transactional_db):
    study = study_of()
    context = browser.new_context()
    one = context.new_page()
    enter(one, live_server, study)
    two = context.new_page()
    two.goto(one.url)
    stale = question(two)
    assert question(one) == stale, "both tabs show the one pending item"
    one.get_by_role("button", name="Answer 1 is better").click()
    expect(one.locator("#progress-label")).to_contain_text("1 / 4")

    two.get_by_role("button", name="Answer 2 is better").click()
    expect(two.locator("[data-notice]")).to_contain_text("already been answered, perhaps in another tab")
    expect(two.locator("#task-status")).to_contain_text("already been answered")
    assert question(two) == question(one) != stale
    assert [v.choice_shown for v in Vote.objects.all()] == ["first"]
    context.close()


def test_the_instructions_and_how_to_resume_are_on_the_task_page(browser, live_server, transactional_db):
    study = study_of()
    page = browser.new_page()
    enter(page, live_server, study, participant_id="pausing")
    page.get_by_text("Instructions", exact=True).click()
    expect(page.locator(".instructions strong")).to_have_text("better")
    page.get_by_text("Take a break", exact=True).click()
    expect(page.locator(".pause")).to_contain_text("enter your participant id pausing again")
    page.locator(".pause a").click()
    page.wait_for_url(re.compile(r"/task/$"))  # the landing page knows them and sends them on
    page.close()


def test_on_a_touch_screen_no_shortcut_hints_are_shown(browser, live_server, transactional_db):
    study = study_of()
    context = browser.new_context(viewport={"width": 1024, "height": 800}, is_mobile=True, has_touch=True)
    page = context.new_page()
    enter(page, live_server, study)
    assert page.evaluate("matchMedia('(pointer: coarse)').matches")
    expect(page.locator(".not-familiar kbd")).to_be_hidden()
    expect(page.locator(".choices kbd").first).to_be_hidden()
    expect(page.locator(".keys")).to_be_hidden()
    context.close()


def test_the_completion_code_is_copied_with_its_button(browser, live_server, transactional_db):
    study = study_of(1, completion_code="C0DE-42")
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    page = context.new_page()
    enter(page, live_server, study)
    page.get_by_role("button", name="Answer 1 is better").click()
    page.wait_for_url(re.compile(r"/done/$"))
    page.get_by_role("button", name="Copy code").click()
    expect(page.locator("#copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == "C0DE-42"
    context.close()


@pytest.fixture
def mturk_endpoint():
    with mturk_stand_in() as mturk:
        yield mturk.origin, mturk.received


def test_an_mturk_worker_s_done_page_submits_the_assignment_back(
    browser, live_server, transactional_db, mturk_endpoint
):
    endpoint, received = mturk_endpoint
    study = study_of(1, completion_code="C0DE-42")
    page = browser.new_page()
    query = f"?assignmentId=ASSIGN-7&hitId=HIT-3&workerId=WORKER9&turkSubmitTo={quote(endpoint, safe='')}"
    page.goto(live_server.url + reverse("annotations:landing", args=[study.slug]) + query)
    expect(page.get_by_text("You are taking part as WORKER9")).to_be_visible()
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start rating").click()
    page.get_by_role("button", name="About the same").click()
    page.wait_for_url(endpoint + "/mturk/externalSubmit")
    expect(page.get_by_text(SUBMITTED)).to_be_visible()
    assert received == [("/mturk/externalSubmit", {"assignmentId": ["ASSIGN-7"], "completion_code": ["C0DE-42"]})]
    page.close()
