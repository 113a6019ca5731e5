"""A context kind's line on the rater page, in a real browser: above the two answers, naming the
heading over the answer it speaks of, readable on a phone (390 px) and on a desktop.
`BIASSTUDY_SCREENSHOT_DIR` keeps the screenshots (tmp_path otherwise)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser import chromium
from tests.factories import make_question, make_study, make_variant, originals
from tests.test_rater_browser import enter

pytestmark = [pytest.mark.browser, pytest.mark.slow]

A2_TEXT = "The flash comes first, and the clouds make the **sound** afterwards when they bump into each other."


@pytest.fixture(scope="module")
def browser():
    with chromium() as launched:
        yield launched


def _study():
    """One question whose only item is its bandwagon item (the control removed, so the rater gets it)."""
    study = make_study(title="Which answer is better?", votes_per_item=2, target_per_rater=1)
    question = make_question(
        study,
        text="Why do we see **lightning** before we hear the thunder?",
        a1="Light travels much faster than sound:\n\n- light: about 300,000 km per second\n"
        "- sound: about 343 m per second\n\nSo the flash reaches you almost at once, the bang seconds later.",
        a2=A2_TEXT,
    )
    study.items.filter(kind__isnull=True).delete()
    make_variant(question, kind="bandwagon", text=originals(question)[1].text, context="78% of readers preferred {A2}.")
    return study


@pytest.mark.parametrize(
    ("name", "viewport"), [("phone", {"width": 390, "height": 844}), ("desktop", {"width": 1280, "height": 800})]
)
def test_the_context_line_stands_above_the_answers_and_names_the_one_it_means(
    browser, live_server, transactional_db, tmp_path, name, viewport
):
    study = _study()
    context = browser.new_context(viewport=viewport, is_mobile=name == "phone", has_touch=name == "phone")
    page = context.new_page()
    enter(page, live_server, study, participant_id=f"ctx-{name}")
    line = page.locator("#task-context")
    assert line.is_visible()
    answers = page.locator(".answer").all()
    assert line.bounding_box()["y"] + line.bounding_box()["height"] <= answers[0].bounding_box()["y"]
    a2 = next(answer for answer in answers if "bump into each other" in answer.inner_text())
    heading = a2.locator(".answer-title").inner_text().split("(")[0].strip()
    assert line.inner_text().strip() == f"78% of readers preferred {heading}."
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], "no sideways scrolling"
    shots = Path(os.environ.get("BIASSTUDY_SCREENSHOT_DIR") or tmp_path)
    page.screenshot(path=str(shots / f"rater-task-context-{name}.png"), full_page=True)
    context.close()
