"""The demo study has people: its "Judges against people" figures are numbers, not n/a."""

from __future__ import annotations

import os

import pytest
from django.core.management import call_command

from analysis import rows
from analysis.management.commands.load_demo import DEMO_RATERS, DEMO_SIMULATED_JUDGES, DEMO_SLUG
from analysis.stored_reports import study_report
from annotations.models import Rater, Study, Vote


@pytest.mark.django_db
def test_the_demos_raters_give_the_alt_test_a_verdict_and_ppi_its_numbers():
    call_command("load_demo", verbosity=0)
    study = Study.objects.get(slug=DEMO_SLUG)
    assert Rater.objects.filter(study=study).count() == DEMO_RATERS
    # People on two questions in three: the judges' votes on the others are what PPI adds.
    voted = set(Vote.objects.filter(item__study=study, rater__isnull=False).values_list("item__question", flat=True))
    assert len(voted) == 24
    table = study_report(study=study)["rows"]
    for judge in DEMO_SIMULATED_JUDGES:
        passes = rows.one(table, judge=judge, metric="alt_test_passes")
        assert passes["estimate"] in (0.0, 1.0), passes["note"]
        assert rows.one(table, judge=judge, metric="alt_test_winning_rate")["n"] >= 3
        position = rows.one(table, judge=judge, metric="ppi_position")
        assert position["estimate"] is not None and "72 with the judge's only" in position["note"]
        effective = rows.one(table, judge=judge, metric="ppi_effective_votes", group="position")
        assert effective["estimate"] >= effective["n"] > 0
        assert rows.one(table, judge=judge, metric="ppi_asr", group="reference")["estimate"] is not None


@pytest.mark.browser
@pytest.mark.slow
def test_the_dashboard_shows_each_judges_human_equivalent_votes_in_a_browser(live_server, transactional_db, tmp_path):
    from tests.browser import chromium, session_cookie
    from tests.factories import make_staff

    call_command("load_demo", verbosity=0)
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(f"{live_server.url}/dashboard/{DEMO_SLUG}/")
        table = page.locator("#alt-test")
        assert "Human-equivalent votes" in table.locator("thead").inner_text()
        for judge in DEMO_SIMULATED_JUDGES:
            cells = table.locator("tr", has_text=judge).locator("td").all_inner_texts()
            assert cells[1] in ("passes", "fails"), cells
            assert cells[-1].endswith(" cast") and cells[-1].split()[0].isdigit(), cells
        table.scroll_into_view_if_needed()
        table.screenshot(path=str(tmp_path / "judges_against_people.png"))
        if os.environ.get("BIASSTUDY_SCREENSHOTS"):
            table.screenshot(path=os.environ["BIASSTUDY_SCREENSHOTS"])
