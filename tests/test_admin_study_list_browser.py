"""The admin's study list on a 1280 × 800 screen, with both sidebars open: every column is
visible, none is cut off behind a horizontal scroll (the creation time used to be)."""

import datetime

import pytest
from django.utils import timezone

from tests.browser import chromium, expect, session_cookie
from tests.factories import make_question, make_staff, make_study


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_study_list_fits_a_1280_pixel_screen(live_server):
    study = make_study(title="Demo: how do judges react to errors, references and formatting?", slug="demo")
    make_question(study)
    study.created_at = timezone.make_aware(datetime.datetime(2026, 11, 25, 1, 47))
    study.save(update_fields=["created_at"])
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        context.add_cookies([session_cookie(make_staff(username="lister"), live_server.url)])
        page = context.new_page()
        page.goto(f"{live_server.url}/admin/annotations/study/")
        results = page.locator("#changelist .results")
        expect(results.locator("td.field-created")).to_have_text("2026-11-25")
        expect(results.locator("th.field-study")).to_contain_text("demo")
        widths = results.evaluate("box => [box.scrollWidth, box.clientWidth]")
        assert widths[0] <= widths[1], f"the list scrolls sideways: {widths}"
        created = page.locator("td.field-created").bounding_box()
        shown = results.bounding_box()
        assert created["x"] + created["width"] <= shown["x"] + shown["width"]
        context.close()
