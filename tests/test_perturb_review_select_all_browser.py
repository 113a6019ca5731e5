"""The review page: "select all" ticks every variant on the page for one bulk decision, and a
filter that leaves nothing says so ("No pending variants") beside the counts per status, rather
than "No variants yet"."""

import pytest
from django.urls import reverse

from perturbations.services import perturbation_generate
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_question, make_staff, make_study


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
