"""The dashboard in a real browser: staff log in, see the tables and the figures, filter through
htmx without a page load, and read it on a phone. Set DASHBOARD_SCREENSHOT=path to keep a
screenshot (PHONE_SCREENSHOT=path for the phone's)."""

import os

import pytest

from analysis import plots, simulated_judges
from analysis.simulate import DEFAULT_SUSCEPTIBILITY, JudgeParams
from tests.browser import chromium, expect, session_cookie
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
    simulated_judges.judge_simulate(
        study=study,
        name="gpt-like",
        params=JudgeParams(position=0.4, length_per_token=0.02, susceptibility=DEFAULT_SUSCEPTIBILITY, tie_rate=0.05),
        seed=1,
    )
    simulated_judges.judge_simulate(
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
    simulated_judges.raters_simulate(
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


def assert_figures_drawn(page) -> None:
    """Every figure loaded and drawn (each is its own request that analyses the study); the
    demo study's answers name no systems, so its page has no "Systems" section."""
    figures = page.locator("#results figure.plot img")
    shown = len(plots.PLOTS) - len(plots.SYSTEMS_PLOTS)
    expect(figures).to_have_count(shown)
    for i in range(shown):
        figures.nth(i).scroll_into_view_if_needed()
        expect(figures.nth(i)).to_have_js_property("complete", True, timeout=60_000)
        assert figures.nth(i).evaluate("img => img.naturalWidth") > 100  # a drawn figure, not a broken image
    page.evaluate("window.scrollTo(0, 0)")


def test_staff_see_the_dashboard_and_filter_it_in_place(demo_study, live_server):

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(20_000)
        page.goto(f"{live_server.url}/dashboard/demo/")
        page.fill("#id_username", "boss")
        page.fill("#id_password", "pw-staff-12345")
        page.click("input[type=submit]")
        expect(page.locator("h1")).to_contain_text("Demo")
        assert_figures_drawn(page)
        expect(page.locator("#results")).to_contain_text("Human-NF")
        page.check("input[name=bloom][value=creating]")
        # The filter's own answer: the dashboard of a collecting study also refreshes itself
        # every 10 s with an htmx request to the same page, which on a busy machine came first.
        with page.expect_response(lambda r: "/dashboard/demo/?" in r.url and "bloom=creating" in r.url):
            page.click("button[type=submit]")
        # The per-Bloom tables' headings (the mixed model has a heading of its own).
        expect(page.locator("#results h3:not(#mixed-effects)")).to_have_text(["Creating"])
        expect(page.locator("#results")).to_contain_text("bloom 2160")
        assert "bloom=creating" in page.url
        if os.environ.get("DASHBOARD_SCREENSHOT"):
            page.goto(f"{live_server.url}/dashboard/demo/")
            page.set_viewport_size({"width": 1400, "height": 1900})
            assert_figures_drawn(page)
            page.screenshot(path=os.environ["DASHBOARD_SCREENSHOT"])


def test_the_dashboard_fits_a_phone_screen_without_scrolling_sideways(demo_study, live_server):
    staff = make_staff(username="phone-boss")
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2)
        context.add_cookies([session_cookie(staff, live_server.url)])
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.goto(f"{live_server.url}/dashboard/demo/")
        assert_figures_drawn(page)
        # Wide tables scroll inside their own box; the page itself never does.
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert page.locator("input[type=checkbox][name=group]").count() == 3
        page.goto(f"{live_server.url}/dashboard/demo/raters/")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        # The power page's table (two columns per group) scrolls in its box too.
        page.goto(f"{live_server.url}/dashboard/demo/power/")
        expect(page.locator("#power-table table")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        if os.environ.get("PHONE_SCREENSHOT"):
            page.goto(f"{live_server.url}/dashboard/demo/")
            assert_figures_drawn(page)
            page.screenshot(path=os.environ["PHONE_SCREENSHOT"], full_page=True)
