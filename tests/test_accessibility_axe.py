"""Every page a person uses, checked by axe-core at WCAG 2.1 A and AA in a real browser: the
rater's pages, the dashboard, the admin's review, start and run pages, a judge's prompt, an upload's progress page,
the study's upload and forms, and the API docs. The study's Prolific page is checked on the way
through its browser test (tests/test_prolific_page_browser.py), which needs the loopback Prolific.

axe-core comes from npm (package.json pins it; scripts/test.sh runs `npm ci`). It is injected
with the page's Content-Security-Policy bypassed, which only lets the test's own script in.
"""

import json
import os
import re
from pathlib import Path

import pytest
from django.urls import reverse

from analysis.rows import judge_metric
from annotations import uploads
from annotations.uploads import upload_progress_write
from judges.services import judge_run_start
from perturbations.services import perturbation_generate
from tests.browser import chromium, session_cookie
from tests.factories import human_pool, make_llm_judge, make_question, make_rater, make_staff, make_study, make_vote
from tests.test_analysis_metric_registry import registry  # noqa: F401 (a fixture)
from tests.test_study_import import minimal_document
from vote_imports.uploads import votes_upload_store
from vote_imports.vote_import import VOTES_IMPORT_STEPS

pytestmark = [pytest.mark.browser, pytest.mark.slow]

AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]


@pytest.fixture(scope="module")
def browser():
    if not AXE.exists():
        if os.environ.get("CI"):
            pytest.fail(f"{AXE} is missing: scripts/test.sh installs it with npm ci")
        pytest.skip(f"{AXE} is missing (run npm ci)")
    with chromium() as launched:
        yield launched


def violations(page) -> list[str]:
    """axe's violations on the page as it is now, one readable line per rule and element."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("tags => axe.run(document, {runOnly: {type: 'tag', values: tags}})", TAGS)
    return [
        f"{v['id']} ({v['impact']}) at {node['target']}: {node['failureSummary'].splitlines()[-1].strip()}"
        for v in result["violations"]
        for node in v["nodes"]
    ]


def assert_accessible(page, what: str) -> None:
    found = violations(page)
    assert not found, f"{what}:\n" + "\n".join(found)


def new_page(browser, **kw):
    context = browser.new_context(bypass_csp=True, viewport={"width": 1280, "height": 900}, **kw)
    return context.new_page()


def test_the_rater_pages_have_no_violations(browser, live_server, transactional_db):
    study = make_study(
        votes_per_item=2,
        target_per_rater=1,
        completion_code="C0DE-42",
        instructions="Read the question and **both answers**.",
        consent="We store your choices under your participant id only.",
    )
    make_question(study, text="Why is the sky **blue**?", a1="Rayleigh scattering.", a2="It reflects the sea.")
    make_question(study)
    page = new_page(browser)
    page.goto(live_server.url + reverse("annotations:home"))
    assert_accessible(page, "home")
    page.goto(live_server.url + reverse("annotations:landing", args=[study.slug]))
    assert_accessible(page, "landing")
    page.get_by_label("Your participant id").fill("bad id#")
    page.get_by_role("button", name="Start rating").click()
    assert_accessible(page, "landing with errors")
    page.get_by_label("Your participant id").fill("axe-1")
    page.get_by_label("I have read the information above").check()
    page.get_by_role("button", name="Start rating").click()
    page.wait_for_url(re.compile(r"/task/$"))
    page.get_by_text("Instructions", exact=True).click()
    page.get_by_text("Take a break", exact=True).click()
    assert_accessible(page, "task")
    page.goto(page.url + "?notice=stale")
    assert_accessible(page, "task with a notice")
    page.get_by_role("button", name="Answer 1 is better").click()
    page.wait_for_url(re.compile(r"/done/$"))
    assert_accessible(page, "done")


def staff_page(browser, live_server):
    page = new_page(browser)
    page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
    return page


def test_the_dashboard_pages_have_no_violations(browser, live_server, transactional_db):
    study = make_study(title="Sky colours", votes_per_item=2)
    question = make_question(study)
    item = question.items.get()
    judge = make_llm_judge().judge
    for n in range(4):
        make_vote(item, judge, choice_shown="first" if n % 2 else "tie")
    # People's votes too, so that the "Judges against people" section is on the page.
    for _ in range(2):
        make_vote(item, human_pool(study), rater=make_rater(study), client_ms=5000)
    page = staff_page(browser, live_server)
    for name, args in [("studies", []), ("study", [study.slug]), ("raters", [study.slug]), ("power", [study.slug])]:
        page.goto(live_server.url + reverse(f"analysis:{name}", args=args))
        if name == "study":
            assert page.locator("#alt-test").count() == 1
            assert page.locator("#mixed-effects-table").count() == 1
        assert_accessible(page, name)
    page.goto(live_server.url + reverse("analysis:raters", args=[study.slug]) + "?bonus_per_counted_vote=0.05")
    assert_accessible(page, "raters, with a bonus previewed")


@pytest.mark.usefixtures("registry")  # the registries restored after the test
def test_the_dashboards_tables_of_further_figures_have_no_violations(browser, live_server, transactional_db):
    # A metric declared in a section and one registered by name alone: each in a table of its own.
    @judge_metric("sections_toy", label="Sections toy", section="position", definition="A toy figure.", base="votes")
    def sections_toy(data):
        return [data.row("sections_toy", 0.5, n=len(data.votes))]

    @judge_metric("other_toy")
    def other_toy(data):
        return [data.row("other_toy", 1.0, n=len(data.votes))]

    study = make_study(title="Sky colours", votes_per_item=2)
    item = make_question(study).items.get()
    judge = make_llm_judge().judge
    for n in range(4):
        make_vote(item, judge, choice_shown="first" if n % 2 else "tie")
    page = staff_page(browser, live_server)
    page.goto(live_server.url + reverse("analysis:study", args=[study.slug]))
    assert page.locator("table.figures").count() == 2
    assert_accessible(page, "study, with further figures")


def test_the_admin_review_start_and_run_pages_have_no_violations(browser, live_server, transactional_db):
    study = make_study(title="Why ice floats", slug="ice")
    long = " ".join(["Ice is less dense than liquid water because its molecules form an open lattice."] * 40)
    make_question(study, text="Why does ice float?", a1="It is less dense.", a2=long)
    perturbation_generate(study=study, kind="reference", seed=1)
    perturbation_generate(study=study, kind="rich_content", seed=1)
    config = make_llm_judge(base_url="http://127.0.0.1:9/v1")
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    page = staff_page(browser, live_server)
    page.goto(f"{live_server.url}/admin/perturbations/perturbationstudy/{study.pk}/review/")
    assert_accessible(page, "review")
    page.goto(f"{live_server.url}/admin/judges/judgerun/add/?study={study.pk}")
    assert_accessible(page, "start a run")
    page.goto(f"{live_server.url}/admin/judges/judgerun/{run.pk}/change/")
    assert_accessible(page, "run")
    page.goto(live_server.url + reverse("admin:judges_llmjudge_prompt", args=[config.pk]) + f"?study={study.pk}")
    assert_accessible(page, "a judge's prompt")
    page.goto(live_server.url + reverse("vote_imports:votes-import") + "?study=ice")
    assert_accessible(page, "import votes")
    page.goto(live_server.url + reverse("admin:api_apikey_add"))
    page.locator("select[name=user]").select_option(index=1)
    page.locator('input[name="_save"]').click()
    page.get_by_label("Key").wait_for()
    assert_accessible(page, "a new API key, shown once")


def test_the_upload_progress_page_has_no_violations_while_running_and_after_a_failure(
    browser, live_server, transactional_db, settings, tmp_path
):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    make_study(slug="ice")
    upload = votes_upload_store(chunks=[b"question_id\n"], name="votes.csv", fmt="csv", slug="ice", user=make_staff())
    url = live_server.url + reverse("vote_imports:votes-import-progress", args=[upload.token])
    page = staff_page(browser, live_server)
    upload_progress_write(upload.folder, state="running", step=VOTES_IMPORT_STEPS[1], done=1, total=3)
    page.goto(url)
    assert_accessible(page, "import running")
    problem = {"path": "votes.csv", "line": 3, "field": "winner", "message": "'both' is not a1, a2 or tie"}
    upload_progress_write(upload.folder, state="failed", error="import failed", problems=[problem])
    page.goto(url)
    assert_accessible(page, "import failed")


def test_the_study_upload_and_the_study_forms_have_no_violations(
    browser, live_server, transactional_db, settings, tmp_path
):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    good = minimal_document()
    broken = minimal_document(slug="bad slug")
    broken["questions"][0]["bloom"] = "memorising"
    page = staff_page(browser, live_server)
    for name, document in (("upload report", broken), ("upload preview", good)):
        page.goto(live_server.url + reverse("admin:annotations_study_upload"))
        assert_accessible(page, "upload")
        page.get_by_label("Study file").set_input_files(
            {"name": "study.json", "mimeType": "application/json", "buffer": json.dumps(document).encode()}
        )
        page.get_by_role("button", name="Check the file").click()
        page.wait_for_url(re.compile(r"/upload/[^/]+/$"))
        assert_accessible(page, name)
    upload = uploads.study_upload_store(name="study.json", chunks=[json.dumps(good).encode()])
    uploads.study_upload_queued(upload=upload)
    page.goto(live_server.url + reverse("admin:annotations_study_upload_progress", args=[upload.token]))
    assert_accessible(page, "upload progress")
    study = make_study(title="Sky colours")
    for name, url in (
        ("study form", reverse("admin:annotations_study_change", args=[study.pk])),
        ("question form", reverse("admin:annotations_question_add") + f"?study={study.pk}"),
        ("generate form", f"/admin/perturbations/perturbationstudy/generate/?ids={study.pk}"),
    ):
        page.goto(live_server.url + url)
        assert_accessible(page, name)


def test_the_api_docs_page_has_no_violations(browser, live_server, transactional_db):
    page = staff_page(browser, live_server)
    page.goto(live_server.url + "/api/docs/")
    page.locator(".opblock").first.wait_for()
    assert page.evaluate("document.documentElement.lang").startswith("en")
    assert_accessible(page, "api docs")
