"""Importing votes in a real browser: from the study list's action to the upload page, then the
progress page the task worker's import leads to, with its problems for a bad file and its
counts and the dashboard's link for a good one."""

import os
from pathlib import Path

import pytest

from annotations.models import Vote
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_staff, make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_admin_imports_votes_reads_the_problems_of_a_bad_file_then_follows_a_good_one(
    live_server, tmp_path, settings
):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    shots = Path(os.environ.get("BIASSTUDY_SCREENSHOT_DIR") or tmp_path)
    study = make_study(slug="sky", title="Why the sky is blue", status="draft")
    rows = [list(r) for r in GOOD_ROWS]
    rows[1][5] = "both"
    bad = write_csv(tmp_path / "mine.csv", rows).read_bytes()
    good = write_csv(tmp_path / "votes.csv", GOOD_ROWS).read_bytes()
    staff = make_staff(username="importer")

    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.add_cookies([session_cookie(staff, live_server.url)])
        page = context.new_page()
        page.set_default_timeout(15000)
        page.goto(f"{live_server.url}/admin/annotations/study/")
        page.locator(f'input[name="_selected_action"][value="{study.pk}"]').check()
        page.locator('select[name="action"]').select_option("import_votes")
        page.get_by_role("button", name="Go").click()
        expect(page.locator("input[name=study]")).to_have_value("sky")

        page.locator("input[name=file]").set_input_files({"name": "mine.csv", "mimeType": "text/csv", "buffer": bad})
        page.get_by_role("button", name="Import").click()
        expect(page.get_by_role("heading", name="Import failed")).to_be_visible()
        row = page.locator("tr.up-problem-row")
        expect(row).to_contain_text("mine.csv")
        expect(row).to_contain_text("winner")
        expect(row).to_contain_text("'both' is not a1, a2 or tie")
        page.screenshot(path=str(shots / "votes-import-failed.png"), full_page=True)
        assert not Vote.objects.exists()

        page.get_by_role("link", name="Upload a file again").click()
        expect(page.locator("input[name=study]")).to_have_value("sky")
        page.locator("input[name=file]").set_input_files({"name": "votes.csv", "mimeType": "text/csv", "buffer": good})
        page.get_by_role("button", name="Import").click()
        expect(page.get_by_role("heading", name="Imported")).to_be_visible()
        expect(page.locator("#upload-progress")).to_contain_text("4 votes")
        page.screenshot(path=str(shots / "votes-import-done.png"), full_page=True)
        page.get_by_role("link", name="Open the study's dashboard").click()
        expect(page).to_have_url(f"{live_server.url}/dashboard/sky/")
    assert Vote.objects.filter(item__study=study).count() == 4
