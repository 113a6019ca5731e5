"""A study's report is stored per filters and options and computed again when the study's data
version has moved on (current_report.study_results, report_version; tests/test_report_data_version.py
has a test per write that moves it): at once for a small study, by a task for a big one, whose
pages show the last figures meanwhile and say they are updating."""

from datetime import datetime

import pytest
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone

from analysis import current_report, rows, simulated_judges
from analysis.frame import Filters
from analysis.models import StudyReport
from analysis.simulate import JudgeParams
from annotations.models import Question, Rater, Vote
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, make_vote


@pytest.fixture
def stored_study(db):
    study = make_study(slug="stored-s", votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="word " * (5 + 3 * i), a2="a longer answer " * 4, bloom_level="applying")
        make_variant(q, kind="factual_error", text="wrong " * 10)
    simulated_judges.judge_simulate(study=study, name="sim", params=JudgeParams(position=1.0), seed=1)
    simulated_judges.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def human_votes(study) -> int:
    return sum(j["n_votes"] for j in current_report.study_analyze(study=study)["judges"] if j["kind"] == "human")


def computations(study) -> int:
    """How many times the study's default report was computed (the stored count)."""
    return StudyReport.objects.get(study=study, request__filters__min_ms=None).computations


def new_human_vote(study, participant_id: str) -> None:
    item = study.items.filter(kind__isnull=True).first()
    make_vote(item, human_pool(study), rater=make_rater(study, participant_id=participant_id))


DASHBOARD = reverse("analysis:study", args=["stored-s"])


def plot_url(name, fmt="csv"):
    return reverse("analysis:plot", args=["stored-s", name, fmt])


def test_the_same_request_twice_computes_the_report_once(stored_study):
    first = current_report.study_results(study=stored_study)
    again = current_report.study_results(study=stored_study)
    assert computations(stored_study) == 1
    assert again.report == first.report and again.computed_at == first.computed_at


def test_the_page_its_figures_and_the_metrics_csv_share_one_computation(stored_study, staff_client):
    assert staff_client.get(DASHBOARD).status_code == 200
    assert staff_client.get(plot_url("forest")).status_code == 200
    assert staff_client.get(plot_url("agreement", "svg")).status_code == 200
    csv = staff_client.get(reverse("analysis:export", args=["stored-s", "metrics"]))
    assert csv.status_code == 200 and b"sim" in b"".join(csv.streaming_content)
    assert computations(stored_study) == 1


def test_a_new_vote_is_in_the_next_report(stored_study):
    before = human_votes(stored_study)
    new_human_vote(stored_study, "NEW-1")
    assert human_votes(stored_study) == before + 1
    assert computations(stored_study) == 2


def test_new_votes_of_a_judge_without_raters_or_runs_are_in_the_next_report(stored_study):
    before = current_report.study_results(study=stored_study)
    simulated_judges.judge_simulate(study=stored_study, name="sim", params=JudgeParams(position=1.0), seed=5)
    after = current_report.study_results(study=stored_study)
    assert after.n_votes == before.n_votes + stored_study.items.count() * stored_study.votes_per_item
    assert after.n_votes == Vote.objects.filter(item__study=stored_study).count()


def test_flagging_a_rater_is_in_the_next_report(stored_study, staff_client):
    before = human_votes(stored_study)
    rater = Rater.objects.filter(study=stored_study, votes__isnull=False).first()
    action = {"action": "flag", "_selected_action": [rater.pk]}  # the admin's bulk action: an update()
    assert staff_client.post(reverse("admin:annotations_rater_changelist"), action).status_code == 302
    assert human_votes(stored_study) == before - rater.votes.count()


def test_an_edited_bloom_level_is_in_the_next_report(stored_study):
    def bloom_levels(report):
        """The Bloom levels the first judge's figures are broken down by."""
        first = report["judges"][0]["judge"]
        return {r["bloom"] for r in rows.select(report["rows"], judge=first)} - {""}

    assert bloom_levels(current_report.study_analyze(study=stored_study)) == {"applying"}
    question = Question.objects.filter(study=stored_study).first()
    question.bloom_level = "creating"
    question.save()
    assert bloom_levels(current_report.study_analyze(study=stored_study)) == {"applying", "creating"}


def test_an_edited_gold_label_is_in_the_next_report(stored_study):
    def gold(report):
        return [r for r in report["rows"] if r["metric"].startswith("gold_accuracy_")]

    before = gold(current_report.study_analyze(study=stored_study))
    item = stored_study.items.filter(kind__isnull=True).first()
    item.gold_label = "a2"
    item.save()
    assert gold(current_report.study_analyze(study=stored_study)) != before


def test_each_set_of_filters_has_one_stored_report(stored_study):
    everything = current_report.study_analyze(study=stored_study, filters=Filters(include_flagged=True, min_ms=0))
    Rater.objects.filter(study=stored_study).update(flagged=True)
    unflagged = current_report.study_analyze(study=stored_study)
    current_report.study_analyze(study=stored_study)
    assert everything["filters"]["include_flagged"] is True
    assert unflagged["filters"]["include_flagged"] is False
    assert human_votes(stored_study) == 0 < sum(j["n_votes"] for j in everything["judges"] if j["kind"] == "human")
    assert StudyReport.objects.filter(study=stored_study).count() == 2


def test_the_page_says_when_its_figures_were_computed_and_from_how_many_votes(stored_study, staff_client):
    page = staff_client.get(DASHBOARD).content.decode()
    stored = StudyReport.objects.get(study=stored_study)
    n_votes = Vote.objects.filter(item__study=stored_study).count()
    assert f"Figures computed {stored.computed_at:%Y-%m-%d %H:%M:%S} UTC from {n_votes} votes." in page
    assert "updating" not in page


def test_a_figure_of_an_unchanged_report_is_not_sent_again(stored_study, staff_client):
    first = staff_client.get(plot_url("agreement", "svg"))
    assert first.status_code == 200 and first.content.startswith(b"<?xml")
    again = staff_client.get(plot_url("agreement", "svg"), headers={"if-none-match": first["ETag"]})
    assert again.status_code == 304
    new_human_vote(stored_study, "NEW-2")
    assert staff_client.get(plot_url("agreement", "svg"), headers={"if-none-match": first["ETag"]}).status_code == 200


@override_settings(ANALYSIS_BACKGROUND_VOTES=10)
def test_a_big_study_is_computed_by_one_task_while_its_pages_say_so(
    stored_study, staff_client, token_client, django_capture_on_commit_callbacks
):
    metrics = reverse("api:study-metrics", args=["stored-s"])
    metrics_csv = reverse("analysis:export", args=["stored-s", "metrics"])
    with django_capture_on_commit_callbacks() as queued:
        page = staff_client.get(DASHBOARD).content.decode()
        assert "first figures for these filters are being computed" in page
        assert staff_client.get(metrics_csv).status_code == 503
        assert token_client.get(metrics).status_code == 202
    assert len(queued) == 1  # three requests, one task
    queued[0]()  # the task (the tests' backend runs it at once)
    assert computations(stored_study) == 1
    body = token_client.get(metrics).json()
    assert body["updating"] is False and body["n_votes"] == Vote.objects.filter(item__study=stored_study).count()
    computed_at = datetime.fromisoformat(body["computed_at"])

    new_human_vote(stored_study, "NEW-3")
    with django_capture_on_commit_callbacks() as queued:
        page = staff_client.get(DASHBOARD).content.decode()
        stale = token_client.get(metrics).json()
    assert "<strong>updating</strong>" in page and "Table 1" in page  # the last figures, marked
    assert stale["updating"] is True and datetime.fromisoformat(stale["computed_at"]) == computed_at
    assert stale["n_votes"] == body["n_votes"]
    assert len(queued) == 1
    queued[0]()
    fresh = token_client.get(metrics).json()
    assert fresh["updating"] is False and fresh["n_votes"] == body["n_votes"] + 1
    assert computations(stored_study) == 2


@override_settings(ANALYSIS_BACKGROUND_VOTES=10)
def test_a_refresh_whose_worker_died_is_queued_again(stored_study, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as queued:
        current_report.study_results(study=stored_study)
    assert len(queued) == 1  # never run: its worker died
    with django_capture_on_commit_callbacks() as queued:
        assert current_report.study_results(study=stored_study).updating
    assert queued == []
    long_ago = timezone.now() - current_report.REFRESH_LOST_AFTER
    StudyReport.objects.filter(study=stored_study).update(refresh_queued_at=long_ago)
    with django_capture_on_commit_callbacks(execute=True) as queued:
        current_report.study_results(study=stored_study)
    assert len(queued) == 1
    assert current_report.study_results(study=stored_study).report is not None


@override_settings(ANALYSIS_BACKGROUND_VOTES=10)
def test_the_analyze_command_of_a_big_study_waits_for_its_report(stored_study):
    assert current_report.study_analyze(study=stored_study)["judges"]
    assert computations(stored_study) == 1
