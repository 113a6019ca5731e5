"""The live run page in a real browser: it polls with htmx and shows the votes arriving."""

import pytest

from judges.services import judge_run_execute, judge_run_start
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_llm_judge, make_question, make_staff, make_study
from tests.judge_server import JudgeServer

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def page():
    with chromium() as browser:
        yield browser.new_page(viewport={"width": 1280, "height": 900})


def test_the_run_page_updates_itself_until_the_run_is_done(live_server, page, tmp_path):
    study = make_study()
    for _ in range(3):
        make_question(study, a1="A GOOD answer.", a2="A weak answer.")
    page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
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
        expect(page.locator(".run-status")).to_have_text("Done", timeout=10_000)
        assert page.locator(".run-done").inner_text() == "12 / 12 (100.0%)"
        assert "0.0030" in page.locator(".run-stats").inner_text()  # 1200 tokens in at 2.5 per million
        page.screenshot(path=str(tmp_path / "run.png"), full_page=True)
        page.goto(f"{live_server.url}/admin/judges/llmjudge/{config.pk}/change/")
        page.get_by_role("button", name="Test connection").click()
        assert "OK in" in page.locator(".messagelist").inner_text()
        page.screenshot(path=str(tmp_path / "config.png"), full_page=False)
