"""The review page in a real browser: a staff member logs in, sees original and variant side by
side with the checks, approves one variant with its button; a screenshot is kept.
"""

import os
from pathlib import Path

import pytest

from annotations.models import ComparisonItem
from perturbations.services import perturbation_generate
from tests.browser import chromium
from tests.factories import make_question, make_staff, make_study

A1 = "Ice floats because it is less dense than liquid water."
A2 = (
    "Ice floats on water because it is less dense than liquid water. When water freezes, its molecules "
    "form a hexagonal lattice held together by hydrogen bonds. This open structure takes up about 9 percent "
    "more space than the same mass of liquid water. Because ice is lighter for its volume, it rests on top. "
    "This is why lakes freeze from the surface down, which protects the fish living below."
)
FE_REPLY = (
    "```answer\n" + A2.replace("9 percent", "25 percent").replace("hexagonal", "cubic") + "\n```\n"
    '```errors\n[{"original": "9 percent", "error": "25 percent", "explanation": "Ice is about 9% larger."},'
    ' {"original": "hexagonal", "error": "cubic", "explanation": "Ordinary ice is hexagonal."}]\n```'
)


def scripted_model(system: str, user: str) -> str:
    """A stand-in for a remote model that returns a well-formed factual-error rewrite."""
    return FE_REPLY


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_reviewer_sees_the_variants_and_approves_one_in_the_browser(live_server, tmp_path):
    study = make_study(title="Why ice floats", slug="ice")
    question = make_question(study, text="Why does ice float on water?", a1=A1, a2=A2)
    perturbation_generate(study=study, kind="reference", seed=1)
    perturbation_generate(study=study, kind="rich_content", seed=1)
    perturbation_generate(study=study, kind="factual_error", seed=1, method="model", complete=scripted_model)
    make_staff(username="reviewer")
    url = f"{live_server.url}/admin/perturbations/perturbationstudy/{study.pk}/review/"
    shots = Path(os.environ.get("BIASSTUDY_SCREENSHOT_DIR") or tmp_path)

    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.set_default_timeout(15000)
        page.goto(url)
        page.fill("#id_username", "reviewer")
        page.fill("#id_password", "pw-staff-12345")
        page.click("input[type=submit]")
        page.wait_for_url(url)
        cards = page.locator("section.pt-card")
        assert cards.count() == 3
        # The long reference variant: its length is what the kind adds, a note, not a warning.
        assert page.locator("section.pt-clean .pt-notes").count() >= 1
        assert page.locator(".pt-side h3").first.inner_text().startswith("ORIGINAL")
        assert page.locator(".pt-ins").count() > 0 and page.locator(".pt-del").count() > 0
        page.screenshot(path=str(shots / "review-checks.png"), full_page=False)
        rich = page.locator("section.pt-card", has_text="Rich content")
        rich.locator("button", has_text="Approve").first.click()
        page.wait_for_load_state()
        assert "approved 1" in page.locator(".messagelist").inner_text().lower()
    item = ComparisonItem.objects.get(question=question, kind__slug="rich_content")
    assert item.answer_a2.review_status == "approved"
