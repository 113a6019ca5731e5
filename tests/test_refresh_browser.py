"""Staff pages that refresh themselves (the run page and a study upload's progress every 2 s, the
dashboard every 10 s) keep keyboard focus where it was and can be paused (WCAG 2.2.2), in a real
browser."""

import pytest
from django.urls import reverse

from annotations import uploads
from judges.models import JudgeRun
from judges.services import judge_run_start
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_llm_judge, make_question, make_staff, make_study
from tests.test_study_import import DEMO

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture
def run_page(live_server, transactional_db):
    study = make_study()
    make_question(study)
    run = judge_run_start(study=study, judge=make_llm_judge(base_url="http://127.0.0.1:9/v1").judge, enqueue=False)
    JudgeRun.objects.filter(pk=run.pk).update(status=JudgeRun.Status.RUNNING)
    with chromium() as browser:
        page = browser.new_page()
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(f"{live_server.url}/admin/judges/judgerun/{run.pk}/change/")
        yield page


def mark(page) -> None:
    """Tag the refreshed part, so that a refresh shows as the tag's disappearance."""
    page.evaluate("document.getElementById('run-progress').dataset.mark = 'before'")


def refreshed(page):
    return page.locator("#run-progress[data-mark]")


def test_a_refresh_keeps_focus_on_the_button_it_had(run_page):
    page = run_page
    page.locator("#run-cancel").focus()
    mark(page)
    expect(refreshed(page)).to_have_count(0, timeout=10_000)
    assert page.evaluate("document.activeElement.id") == "run-cancel"


def test_the_refresh_can_be_paused_and_resumed(run_page):
    page = run_page
    pause = page.get_by_role("button", name="Pause updates")
    pause.click()
    expect(page.locator(".refresh-state")).to_have_text("Updates paused.")
    mark(page)
    page.wait_for_timeout(5000)  # two and a half refresh periods
    expect(refreshed(page)).to_have_count(1)
    page.get_by_role("button", name="Resume updates").click()
    expect(refreshed(page)).to_have_count(0, timeout=10_000)


def test_the_dashboard_offers_the_pause_while_collecting(live_server, transactional_db):
    study = make_study(status="collecting")
    with chromium() as browser:
        page = browser.new_page()
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(live_server.url + reverse("analysis:study", args=[study.slug]))
        expect(page.get_by_role("button", name="Pause updates")).to_be_visible()
        expect(page.locator(".refresh-state")).to_have_text("Updates every 10 seconds while collecting.")


def test_a_study_upload_s_progress_page_can_be_paused(live_server, transactional_db, settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    upload = uploads.study_upload_store(name="demo.json", chunks=[DEMO.read_bytes()])
    uploads.study_upload_queued(upload=upload)  # no worker here: the page polls on
    with chromium() as browser:
        page = browser.new_page()
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(live_server.url + reverse("admin:annotations_study_upload_progress", args=[upload.token]))
        page.evaluate("document.getElementById('upload-progress').dataset.mark = 'before'")
        marked = page.locator("#upload-progress[data-mark]")
        expect(marked).to_have_count(0, timeout=10_000)  # it refreshes by itself
        page.get_by_role("button", name="Pause updates").click()
        expect(page.locator(".refresh-state")).to_have_text("Updates paused.")
        page.evaluate("document.getElementById('upload-progress').dataset.mark = 'before'")
        page.wait_for_timeout(5000)  # two and a half refresh periods
        expect(marked).to_have_count(1)
        page.get_by_role("button", name="Resume updates").click()
        expect(marked).to_have_count(0, timeout=10_000)
