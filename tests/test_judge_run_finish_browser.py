"""A judge run page left open while the run finishes ends in the run's final state: no stale
"queued" message, no pause button, the times written plainly, and a link to the results."""

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.models import JudgeRun
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_llm_judge, make_question, make_staff, make_study

pytestmark = [pytest.mark.browser]


def test_an_open_run_page_shows_the_finished_run_and_its_results(live_server, transactional_db, settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}  # the run waits
    study = make_study(slug="runs")
    make_question(study)
    judge = make_llm_judge(base_url="http://127.0.0.1:9/v1").judge
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(f"{live_server.url}{reverse('admin:judges_judgerun_add')}?study={study.pk}&judge={judge.pk}")
        page.get_by_role("button", name="Start run").click()
        expect(page.locator(".messagelist")).to_contain_text("queued")
        expect(page.get_by_role("button", name="Pause updates")).to_be_visible()
        run = JudgeRun.objects.get()
        JudgeRun.objects.filter(pk=run.pk).update(
            status=JudgeRun.Status.DONE, started_at=timezone.now(), finished_at=timezone.now()
        )
        results = page.get_by_role("link", name="See the results on")
        expect(results).to_be_visible(timeout=10_000)
        assert results.get_attribute("href") == reverse("analysis:study", args=["runs"])
        expect(page.locator(".run-status")).to_have_text("Done")
        assert page.locator(".messagelist").count() == 0
        assert page.get_by_role("button", name="Pause updates").count() == 0
        assert "p.m." not in page.content() and "a.m." not in page.content()
