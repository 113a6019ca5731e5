"""The dashboard in a real browser: staff log in, see the tables and the chart, and filter
through htmx without a page load. Set DASHBOARD_SCREENSHOT=path to keep a screenshot."""

import os

import pytest

from analysis import services
from analysis.simulate import DEFAULT_SUSCEPTIBILITY, JudgeParams
from tests.browser import chromium, expect
from tests.factories import make_question, make_staff, make_study, make_variant

pytestmark = [pytest.mark.browser, pytest.mark.slow]

BLOOMS = ["remembering", "understanding", "applying", "analyzing", "evaluating", "creating"]


@pytest.fixture
def demo_study(transactional_db):
    study = make_study(
        slug="demo", title="Demo: judges of middle-school answers", votes_per_item=6, gold_min_accuracy=0.8
    )
    for i in range(36):
        q = make_question(
            study,
            a1="An answer with some detail. " * (3 + i % 9),
            a2="Another answer. " * (4 + i % 13),
            bloom_level=BLOOMS[i % 6],
        )
        of = "a1" if i % 2 else "a2"
        make_variant(q, kind="factual_error", of=of, text="A wrong answer with an error. " * (4 + i % 7))
        make_variant(q, kind="reference", of=of)
        make_variant(q, kind="rich_content", of=of, text="## Answer 🙂\n\n- **point** one\n- point two " * (2 + i % 5))
    services.judge_simulate(
        study=study,
        name="gpt-like",
        params=JudgeParams(position=0.4, length_per_token=0.02, susceptibility=DEFAULT_SUSCEPTIBILITY, tie_rate=0.05),
        seed=1,
    )
    services.judge_simulate(
        study=study,
        name="claude-like",
        params=JudgeParams(
            position=-0.2,
            length_per_token=0.005,
            susceptibility={"factual_error": -3.0, "reference": 0.2, "rich_content": 0.3},
            tie_rate=0.2,
        ),
        seed=2,
    )
    services.raters_simulate(
        study=study,
        raters=24,
        params=JudgeParams(
            position=0.3,
            length_per_token=0.01,
            susceptibility={"factual_error": -1.0, "reference": 0.5, "rich_content": 0.8},
            tie_rate=0.15,
            noise=1.5,
        ),
        seed=3,
        flag_share=0.1,
    )
    make_staff(username="boss")
    return study


def test_staff_see_the_dashboard_and_filter_it_in_place(demo_study, live_server):

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(20_000)
        page.goto(f"{live_server.url}/dashboard/demo/")
        page.fill("#id_username", "boss")
        page.fill("#id_password", "pw-staff-12345")
        page.click("input[type=submit]")
        expect(page.locator("h1")).to_contain_text("Demo")
        expect(page.locator("svg.chart polyline")).to_have_count(3)
        expect(page.locator("#results")).to_contain_text("Human-NF")
        page.select_option("#id_bloom", ["creating"])
        with page.expect_response(lambda r: "/dashboard/demo/" in r.url and r.request.headers.get("hx-request")):
            page.click("button[type=submit]")
        expect(page.locator("#results h3")).to_have_text(["Creating"])
        expect(page.locator("#results")).to_contain_text("bloom 2160")
        assert "bloom=creating" in page.url
        if os.environ.get("DASHBOARD_SCREENSHOT"):
            page.goto(f"{live_server.url}/dashboard/demo/")
            page.set_viewport_size({"width": 1400, "height": 1900})
            page.screenshot(path=os.environ["DASHBOARD_SCREENSHOT"])
