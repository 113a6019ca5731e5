"""The live run page in a real browser: it polls with htmx and shows the votes arriving."""

import pytest
from django.conf import settings
from django.test import Client

from judges.services import judge_run_execute, judge_run_start
from tests.factories import make_llm_judge, make_question, make_staff, make_study
from tests.judge_server import JudgeServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


@pytest.fixture
def page(monkeypatch):
    # Playwright's sync API keeps an event loop in this thread; our ORM calls here are plain sync code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        yield browser.new_page(viewport={"width": 1280, "height": 900})
        browser.close()


def test_the_run_page_updates_itself_until_the_run_is_done(live_server, page, tmp_path):
    study = make_study()
    for _ in range(3):
        make_question(study, a1="A GOOD answer.", a2="A weak answer.")
    client = Client()
    client.force_login(make_staff())
    page.context.add_cookies(
        [{"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value,
          "url": live_server.url}]
    )  # fmt: skip
    with JudgeServer() as server:
        config = make_llm_judge(
            base_url=server.base_url, prompt_style="vote_only", votes_per_item=4, price_in_per_mtok=2.5
        )
        run = judge_run_start(study=study, judge=config.judge, enqueue=False)
        page.goto(f"{live_server.url}/admin/judges/judgerun/{run.pk}/change/")
        assert page.locator(".run-status").inner_text() == "Queued"
        assert page.locator(".run-done").inner_text().startswith("0 / 12")
        judge_run_execute(run_id=run.pk)  # what the task worker does, meanwhile the page polls
        # A locator assertion polls from outside the page: the page's CSP forbids evaluated strings.
        expect = pytest.importorskip("playwright.sync_api").expect
        expect(page.locator(".run-status")).to_have_text("Done", timeout=10_000)
        assert page.locator(".run-done").inner_text() == "12 / 12 (100.0%)"
        assert "0.0030" in page.locator(".run-stats").inner_text()  # 1200 tokens in at 2.5 per million
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        page.goto(f"{live_server.url}/admin/judges/llmjudge/{config.pk}/change/")
        page.get_by_role("button", name="Test connection").click()
        assert "OK in" in page.locator(".messagelist").inner_text()
        page.screenshot(path=str(tmp_path / "config.png"), full_page=False)
