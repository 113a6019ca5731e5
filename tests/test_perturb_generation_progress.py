"""A model's generation of variants shows its progress on the review page while it runs: queued,
then questions done out of all (htmx polls it), then the page reloads with the new variants."""

import pytest
from django.urls import reverse

from perturbations.models import GenerationReport
from perturbations.services import perturbation_generate
from perturbations.tasks import generate_perturbations_task, perturbation_generate_queue
from tests.browser import chromium, expect, session_cookie
from tests.factories import make_question, make_staff, make_study
from tests.test_perturb_review_browser import A1, A2, FE_REPLY


def study_of(n: int):
    study = make_study(slug="gen")
    for _ in range(n):
        make_question(study, a1=A1, a2=A2)
    return study


def review_url(study) -> str:
    return reverse("admin:perturbations_review", args=[study.pk])


def test_the_report_counts_the_questions_done_while_the_model_writes(db):
    study = study_of(3)
    seen = []

    def model(system: str, user: str) -> str:
        report = GenerationReport.objects.get()
        seen.append((report.done, report.questions, report.finished_at))
        return FE_REPLY

    perturbation_generate(study=study, kind="factual_error", seed=1, method="model", complete=model)
    assert seen == [(0, 3, None), (1, 3, None), (2, 3, None)]
    report = GenerationReport.objects.get()
    assert (report.done, report.created, report.finished_at is not None) == (3, 3, True)


def test_the_review_page_polls_a_queued_generation_and_reloads_when_it_ends(db, staff_client):
    study = study_of(2)
    perturbation_generate_queue(study=study, kind="factual_error", seed=1, of="a2")  # not run: no commit
    report = GenerationReport.objects.get()
    page = staff_client.get(review_url(study)).content.decode()
    assert 'id="generation-progress"' in page and 'hx-trigger="every 2s"' in page
    assert "queued, waiting for the task worker" in page and "Pause updates" in page

    GenerationReport.objects.filter(pk=report.pk).update(questions=2, done=1, created=1)
    poll = staff_client.get(review_url(study), HTTP_HX_REQUEST="true")
    assert poll.content.decode().lstrip().startswith('<section id="generation-progress"')
    assert "1 of 2 questions done, 1 variant made so far" in poll.content.decode()

    perturbation_generate(
        study=study, kind="factual_error", seed=1, method="model", complete=lambda s, u: FE_REPLY, report=report
    )
    assert staff_client.get(review_url(study), HTTP_HX_REQUEST="true").headers["HX-Refresh"] == "true"
    page = staff_client.get(review_url(study)).content.decode()
    assert "generation-progress" not in page and "Pause updates" not in page


def test_a_generation_that_cannot_start_ends_its_report_with_the_reason(db):
    study = study_of(1)
    report = GenerationReport.objects.create(study=study, kind="factual_error", method="model", seed=1)
    with pytest.raises(Exception, match="unknown perturbation kind"):
        generate_perturbations_task.call(
            study_id=study.pk, kind="no-such-kind", seed=1, method="model", of="a2", user_id=None, report_id=report.pk
        )
    report.refresh_from_db()
    assert report.finished_at is not None and "unknown perturbation kind" in report.failures[0]["reason"]


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_the_progress_moves_in_the_browser_without_a_reload(live_server):
    study = study_of(3)
    report = GenerationReport.objects.create(
        study=study, kind="factual_error", method="model", seed=1, questions=3, done=1
    )
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.context.add_cookies([session_cookie(make_staff(), live_server.url)])
        page.goto(live_server.url + review_url(study))
        progress = page.locator("#generation-progress")
        expect(progress).to_contain_text("1 of 3 questions done")
        page.evaluate("() => { window.notReloaded = true; }")
        GenerationReport.objects.filter(pk=report.pk).update(done=2, created=2)
        expect(progress).to_contain_text("2 of 3 questions done, 2 variants made so far", timeout=10_000)
        assert page.evaluate("() => window.notReloaded === true")
        perturbation_generate(
            study=study, kind="factual_error", seed=1, method="model", complete=lambda s, u: FE_REPLY, report=report
        )
        expect(page.locator("section.pt-card")).to_have_count(3, timeout=10_000)
        assert progress.count() == 0 and page.get_by_role("button", name="Pause updates").count() == 0
