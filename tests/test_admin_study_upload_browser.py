"""Uploading a study in a real browser: the admin picks a file from the study list, reads the
report of a broken one, then previews and imports a good one."""

import json
import os
from pathlib import Path

import pytest

from annotations.models import ComparisonItem, Study
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_staff
from tests.test_study_import import minimal_document


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_admin_uploads_a_study_file_reads_the_report_and_preview_and_imports_it(live_server, tmp_path, settings):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    shots = Path(os.environ.get("BIASSTUDY_SCREENSHOT_DIR") or tmp_path)
    good = json.dumps(minimal_document(title="Why the sky is blue"), indent=2)
    broken = json.loads(good)
    broken["questions"][0]["answers"][2]["derived_from"] = "q9-a1"
    staff = make_staff(username="uploader")

    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1280, "height": 1100})
        context.add_cookies([session_cookie(staff, live_server.url)])
        page = context.new_page()
        page.set_default_timeout(15000)
        page.goto(f"{live_server.url}/admin/annotations/study/")
        page.get_by_role("link", name="Upload a study file").click()

        page.get_by_label("Study file").set_input_files(
            {"name": "broken.json", "mimeType": "application/json", "buffer": json.dumps(broken, indent=2).encode()}
        )
        page.get_by_role("button", name="Check the file").click()
        expect(page.get_by_role("heading", name="Validation report: the file cannot be imported")).to_be_visible()
        row = page.locator("tr.up-problem-row")
        expect(row).to_contain_text("questions[0].answers[2].derived_from")
        expect(row).to_contain_text("the original 'q9-a1' is not an answer of question 'q1'")
        expect(page.get_by_role("button", name="Import this study")).to_have_count(0)
        page.screenshot(path=str(shots / "upload-report.png"), full_page=True)

        page.get_by_role("link", name="Upload another file").click()
        page.get_by_label("Study file").set_input_files(
            {"name": "sky.json", "mimeType": "application/json", "buffer": good.encode()}
        )
        page.get_by_role("button", name="Check the file").click()
        expect(page.get_by_role("heading", name="Validation report: no problems found")).to_be_visible()
        expect(page.locator(".up-totals")).to_contain_text("3 items")
        expect(page.locator(".up-table")).to_contain_text("factual_error of q1-a1")
        page.screenshot(path=str(shots / "upload-preview.png"), full_page=True)
        assert not Study.objects.filter(slug="mini").exists()

        page.get_by_role("button", name="Import this study").click()
        expect(page.locator(".messagelist")).to_contain_text("Imported Why the sky is blue: 1 questions.")
    study = Study.objects.get(slug="mini")
    assert ComparisonItem.objects.filter(study=study).count() == 3
