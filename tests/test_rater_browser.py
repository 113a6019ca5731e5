"""The rater page in a real browser (Playwright driving Debian's headless Chromium) against a
live server: a whole session by keyboard, a reload in the middle, JavaScript off, a phone.
(The README's screenshots come from tests/test_control_room_browser.py.)
"""

import io
import os
import re
from pathlib import Path

import pytest
from django.urls import reverse
from PIL import Image

from annotations.models import Vote
from tests.browser import chromium, expect
from tests.factories import make_question, make_study

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Playwright's sync API runs an event loop in this thread; the ORM calls here are plain sync code.


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def demo_study(target=4):
    study = make_study(
        title="Which answer is better?",
        votes_per_item=2,
        target_per_rater=target,
        completion_code="DONE-2024",
        instructions="Read the question and **both answers**, then pick the better one.",
        consent="Your answers are stored under your participant id only.",
    )
    make_question(
        study,
        text="Why do we see **lightning** before we hear thunder?",
        a1="Light travels much faster than sound:\n\n- light: about 300,000 km/s\n- sound: about 343 m/s",
        a2="Because the flash happens first and the sound is made afterwards by the clouds. ⚡",
    )
    for n in range(1, target + 2):
        make_question(study, text=f"Question number {n}: what is {n} + {n}?", a1=f"It is {2 * n}.", a2="Nobody knows.")
    return study


def enter(page, live_server, study, participant_id="browser-1"):
    page.goto(live_server.url + reverse("annotations:landing", args=[study.slug]))
    page.get_by_label("Your participant id").fill(participant_id)
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(r"/task/$"))


def progress(page) -> str:
    text = " ".join(page.locator("#progress-label").text_content().split())
    return text.removeprefix("Progress: ")


def question(page) -> str:
    return page.locator(".question").inner_text().strip()


def test_a_rater_completes_a_session_by_keyboard_with_a_reload_in_the_middle(browser, live_server, transactional_db):
    study = demo_study(target=4)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    enter(page, live_server, study)
    assert progress(page) == "0 / 4"
    page.evaluate("window.sameDocument = true")

    first_question = question(page)
    page.wait_for_timeout(300)
    page.keyboard.press("1")
    expect(page.locator("#progress-label")).to_contain_text("1 / 4")
    assert page.evaluate("window.sameDocument") is True, "htmx swapped the item in without a reload"
    assert question(page) != first_question
    focused = page.evaluate("document.activeElement.id")
    assert focused == "question-text", "focus is on the new question's text"

    # Not familiar (F), then Answer 2 (3).
    page.keyboard.press("f")
    assert page.get_by_label("I am not familiar with this topic").is_checked()
    page.keyboard.press("3")
    expect(page.locator("#progress-label")).to_contain_text("2 / 4")

    # A break: reloading shows the same pending item, nothing counted twice.
    pending = question(page)
    page.reload()
    assert question(page) == pending and progress(page) == "2 / 4"

    page.keyboard.press("2")
    expect(page.locator("#progress-label")).to_contain_text("3 / 4")
    page.keyboard.press("1")
    page.wait_for_url(re.compile(r"/done/$"))
    assert "DONE-2024" in page.locator(".code").inner_text()

    votes = list(Vote.objects.filter(rater__participant_id="browser-1").order_by("received_at"))
    assert [v.choice_shown for v in votes] == ["first", "second", "tie", "first"]
    assert [v.not_familiar for v in votes] == [False, True, False, False]
    assert all(v.client_ms is not None and v.client_ms > 0 for v in votes)
    assert votes[0].client_ms >= 250
    assert all(v.server_ms is not None for v in votes)
    page.close()


def test_the_page_works_with_javascript_off(browser, live_server, transactional_db):
    study = demo_study(target=2)
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    enter(page, live_server, study, participant_id="nojs")
    page.get_by_label("I am not familiar with this topic").check()
    page.get_by_role("button", name="Answer 2 is better").click()
    page.wait_for_load_state()
    assert progress(page) == "1 / 2"
    page.get_by_role("button", name="About the same").click()
    page.wait_for_url(re.compile(r"/done/$"))
    votes = list(Vote.objects.filter(rater__participant_id="nojs").order_by("received_at"))
    assert [(v.choice_shown, v.not_familiar, v.client_ms) for v in votes] == [
        ("second", True, None),
        ("tie", False, None),
    ]
    context.close()


def test_on_a_phone_the_answers_are_stacked_with_their_labels(browser, live_server, transactional_db):
    study = demo_study(target=2)
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    page = context.new_page()
    enter(page, live_server, study, participant_id="phone")
    first, second = page.locator(".answer").all()
    box1, box2 = first.bounding_box(), second.bounding_box()
    assert box2["y"] >= box1["y"] + box1["height"], "answer 2 sits below answer 1"
    assert box1["width"] > 300 and box1["x"] + box1["width"] <= 390
    assert page.get_by_role("heading", name="Answer 1").is_visible()
    assert page.get_by_role("heading", name="Answer 2").is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390, "no sideways scrolling"
    page.get_by_role("button", name="Answer 1 is better").tap()
    expect(page.locator("#progress-label")).to_contain_text("1 / 2")
    page.screenshot(path=str(_shot_dir() / "rater-task-phone.png"), full_page=True)
    context.close()


def _contrast(fg: list[float], bg: list[float]) -> float:
    def luminance(rgb):
        channels = [c / 255 for c in rgb[:3]]
        lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    light, dark = sorted([luminance(fg), luminance(bg)], reverse=True)
    return (light + 0.05) / (dark + 0.05)


_COLOURS_JS = """el => {
  const rgb = s => s.match(/[\\d.]+/g).map(Number);
  let bg = el, colour = 'rgba(0, 0, 0, 0)';
  while (bg && (colour = getComputedStyle(bg).backgroundColor) === 'rgba(0, 0, 0, 0)') bg = bg.parentElement;
  return [rgb(getComputedStyle(el).color), rgb(bg ? colour : 'rgb(255, 255, 255)')];
}"""


def test_the_task_page_is_usable_by_keyboard_with_visible_focus_and_readable_contrast(
    browser, live_server, transactional_db
):
    study = demo_study(target=3)
    page = browser.new_page(viewport={"width": 1280, "height": 1000})
    enter(page, live_server, study, participant_id="a11y")
    for selector in (".question", ".answer-body", ".choices button", ".not-familiar label", "#progress-label", ".keys"):
        fg, bg = page.locator(selector).first.evaluate(_COLOURS_JS)
        assert _contrast(fg, bg) >= 4.5, f"{selector}: contrast {_contrast(fg, bg):.2f}"
    # Tab to the checkbox and the buttons: each shows a focus ring.
    page.locator("body").focus()
    reached = []
    for _ in range(12):
        page.keyboard.press("Tab")
        info = page.evaluate(
            "() => { const el = document.activeElement; const s = getComputedStyle(el);"
            " return [el.tagName, el.name || '', s.outlineStyle, parseFloat(s.outlineWidth)]; }"
        )
        if info[0] in ("BUTTON", "INPUT"):
            reached.append(info[1])
            assert info[2] != "none" and info[3] >= 2, f"{info} has no visible focus"
    assert reached[:4] == ["not_familiar", "choice", "choice", "choice"]
    # Space on a focused button votes, like a click.
    page.get_by_role("button", name="About the same").focus()
    page.keyboard.press("Space")
    expect(page.locator("#progress-label")).to_contain_text("1 / 3")
    page.close()


def test_a_screenshot_of_the_task_page(browser, live_server, transactional_db):
    study = make_study(votes_per_item=2, target_per_rater=45)
    make_question(
        study,
        text="Why do we see **lightning** before we hear the thunder?",
        a1="Light travels much faster than sound:\n\n- light: about 300,000 km per second\n"
        "- sound: about 343 m per second\n\nSo the flash reaches you almost at once, the bang seconds later.",
        a2="## Short answer ⚡\n\nThe flash comes first and the clouds make the **sound** afterwards, "
        "when they bump into each other.\n\n> Count the seconds between flash and bang to tell how far away it is.",
    )
    study.instructions = "Read the question and **both answers**, then pick the better one."
    study.consent = "We store your choices under your participant id only. You can stop at any time."
    study.save()
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(live_server.url + reverse("annotations:landing", args=[study.slug]))
    page.screenshot(path=str(_shot_dir() / "rater-landing.png"))
    enter(page, live_server, study, participant_id="screenshot")
    page.get_by_label("I am not familiar with this topic").focus()
    page.keyboard.press("Tab")  # show the focus ring on the first choice
    shot = _shot_dir() / "rater-task.png"
    page.screenshot(path=str(shot))
    assert shot.stat().st_size > 10_000
    page.close()


def coloured_pixels(png: bytes) -> int:
    """Pixels that are clearly neither black, white nor grey: the page's text is grey on white, so
    these are what a colour emoji font drew."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    return sum(1 for r, g, b in image.getdata() if max(r, g, b) - min(r, g, b) > 80)


def test_an_emoji_in_an_answer_is_drawn_in_colour_not_as_a_box(browser, live_server, transactional_db):
    # Without a colour emoji font (scripts/test.sh installs fonts-noto-color-emoji) Chromium draws
    # an empty box, in the answer a rater reads and in the screenshots of docs/img.
    study = make_study(votes_per_item=1, target_per_rater=1)
    make_question(study, text="How long is the garden?", a1="📏 12 metres", a2="🌱 Twelve metres")
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    enter(page, live_server, study)
    for body in page.locator(".answer-body p").all():
        assert coloured_pixels(body.screenshot()) > 20, f"{body.inner_text()!r} has no colour: no emoji font"
    page.close()


def _shot_dir() -> Path:
    # Screenshots of every run land in test-artifacts/ (ignored by git) for a person to look at.
    default = Path(__file__).resolve().parent.parent / "test-artifacts"
    path = Path(os.environ.get("BIASSTUDY_SHOT_DIR", default))
    path.mkdir(parents=True, exist_ok=True)
    return path
