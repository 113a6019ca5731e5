"""The review page: "select all" ticks every variant on the page for one bulk decision, and a
filter that leaves nothing says so ("No pending variants") beside the counts per status, rather
than "No variants yet"."""

import pytest
from django.urls import reverse

from perturbations.services import perturbation_generate
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_question, make_staff, make_study, make_variant


def review_url(study) -> str:
    return reverse("admin:perturbations_review", args=[study.pk])


def study_with_variants(n: int = 3):
    study = make_study(slug="rev")
    for _ in range(n):
        make_question(study)
    perturbation_generate(study=study, kind="reference", seed=1)
    return study


def test_an_empty_filter_says_what_it_left_out_and_counts_every_status(staff_client):
    study = study_with_variants()
    study.questions.first().answers.filter(derived_from__isnull=False).update(review_status="approved")
    page = staff_client.get(review_url(study), {"status": "rejected"}).content.decode()
    assert "No rejected variants." in page and "No variants yet" not in page
    assert "Pending review: 2" in page and "Approved: 1" in page and "Rejected: 0" in page and "all: 3" in page
    page = staff_client.get(review_url(study), {"status": "pending", "kind": "rich_content", "flagged": "on"})
    assert "No pending variants of kind rich_content with warnings." in page.content.decode()


def test_a_study_without_variants_still_says_how_to_make_them(staff_client):
    study = make_study(slug="none")
    make_question(study)
    assert "No variants yet" in staff_client.get(review_url(study)).content.decode()


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_select_all_ticks_every_variant_and_approves_them_at_once(live_server):
    study = study_with_variants()
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(live_server.url + review_url(study))
        boxes = page.locator('input[name="selected"]')
        assert boxes.count() == 3
        select_all = page.get_by_label("Select all on this page")
        select_all.check()
        for i in range(3):
            expect(boxes.nth(i)).to_be_checked()
        boxes.nth(0).uncheck()
        assert page.evaluate("() => document.querySelector('[data-select-all]').indeterminate") is True
        select_all.check()
        page.get_by_role("button", name="Approve ticked").click()
        expect(page.locator(".messagelist")).to_contain_text("Approved 3")
        page.goto(live_server.url + review_url(study) + "?status=pending")
        expect(page.locator(".pt-none")).to_contain_text("No pending variants")
        expect(page.locator(".pt-counts")).to_contain_text("Approved: 3")
        assert page.get_by_label("Select all on this page").is_hidden()  # nothing to select


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_review_page_fits_a_phone_with_its_checks_under_the_length_table(live_server):
    # The length table and the checks beside it were two columns at any width: on a phone the
    # checks of a factual error ("Changes: ...") ran past the screen's edge.
    study = make_study(slug="phone-rev")
    question = make_question(study, a2="The Moon's shadow falls on the Earth and the phases follow from it. " * 3)
    make_variant(
        question, kind="factual_error", text="The Earth's shadow falls on the Moon and the phases follow. " * 3
    )
    make_variant(question, kind="reference")
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(live_server.url + review_url(study))
        expect(page.locator(".pt-checks").first).to_contain_text("Changes:")
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
