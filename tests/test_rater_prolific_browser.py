"""A Prolific rater's whole way in a real browser (Playwright driving Debian's headless Chromium)
against a live server: in through their study link, consent once, vote, and their completion
code on the done page even when the way back to Prolific fails; coming back through the same
link, no consent again."""

import os
import re
import socket
from pathlib import Path

import pytest
from django.urls import reverse

from annotations.models import Rater
from tests.browser import chromium, expect
from tests.factories import make_question, make_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def unreachable_url() -> str:
    """A loopback URL nothing listens on (a port just bound and let go): the browser's request
    to it is refused, as when Prolific is down or blocked."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/submissions/complete"


def shot_dir() -> Path:
    default = Path(__file__).resolve().parent.parent / "test-artifacts"
    path = Path(os.environ.get("BIASSTUDY_SHOT_DIR", default))
    path.mkdir(parents=True, exist_ok=True)
    return path


def prolific_study(platform: str):
    study = make_study(
        title="Which answer is better?",
        votes_per_item=2,
        target_per_rater=2,
        completion_code="C1A2B3C4",
        prolific_completion_url=platform,
        consent="Your answers are stored under your Prolific id only.",
    )
    for n in range(1, 4):
        make_question(study, text=f"What is {n} + {n}?", a1=f"It is {2 * n}.", a2="Nobody knows.")
    return study


def rate_to_the_end(page, study, pid: str, live_server):
    page.goto(
        live_server.url
        + reverse("annotations:landing", args=[study.slug])
        + f"?PROLIFIC_PID={pid}&STUDY_ID=s1&SESSION_ID=x1"
    )
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(r"/task/$"))
    for _ in range(2):
        page.get_by_role("button", name="Answer 1 is better").click()
    page.wait_for_url(re.compile(r"/done/$"))


@pytest.mark.parametrize("width", [390, 1280])
def test_a_prolific_rater_sees_their_code_when_the_way_back_to_prolific_fails(
    browser, live_server, transactional_db, settings, width
):
    settings.BIASSTUDY_PLATFORM_RETURN_SECONDS = 3
    platform = unreachable_url()
    study = prolific_study(platform)
    page = browser.new_page(viewport={"width": width, "height": 800})
    rate_to_the_end(page, study, f"pro{width}", live_server)
    code = page.locator("#completion-code")
    expect(code).to_have_text("C1A2B3C4")
    back = page.get_by_role("link", name="Go back to Prolific now")
    assert back.get_attribute("href") == f"{platform}?cc=C1A2B3C4"
    expect(page.locator("#return-status")).to_contain_text("Taking you back to Prolific in 3 seconds")
    page.screenshot(path=str(shot_dir() / f"rater-done-prolific-{width}.png"), full_page=True)
    # The page takes the rater back by itself; the refused request leaves a browser error page,
    # which is why the code came first.
    failed = page.wait_for_event("requestfailed", lambda request: request.url.startswith(platform), timeout=10_000)
    assert failed.url == f"{platform}?cc=C1A2B3C4"
    assert Rater.objects.get(participant_id=f"pro{width}").completion_code == "C1A2B3C4"
    page.close()


def test_a_rater_may_stay_on_the_done_page(browser, live_server, transactional_db, settings):
    settings.BIASSTUDY_PLATFORM_RETURN_SECONDS = 2
    study = prolific_study(unreachable_url())
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    rate_to_the_end(page, study, "stayer", live_server)
    page.get_by_role("button", name="Stay on this page").click()
    expect(page.locator("#return-status")).to_contain_text("You stay on this page")
    page.wait_for_timeout(3000)
    assert page.url.endswith("/done/")
    expect(page.locator("#completion-code")).to_have_text("C1A2B3C4")
    page.close()
