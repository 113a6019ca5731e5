"""The report is kept in the cache per study, filters and options: a page's figures reuse it,
any new vote or edit makes a new one at once, and a broken cache only means computing again."""

import json

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from analysis import results_cache, services
from analysis.frame import Filters
from analysis.simulate import JudgeParams
from annotations.models import Question, Rater
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, make_vote


@pytest.fixture
def cached_study(db):
    study = make_study(slug="cache-s", votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="word " * (5 + 3 * i), a2="a longer answer " * 4, bloom_level="applying")
        make_variant(q, kind="factual_error", text="wrong " * 10)
    services.judge_simulate(study=study, name="sim", params=JudgeParams(position=1.0), seed=1)
    services.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        assert client.get(url).status_code == 200
    return len(ctx.captured_queries)


def plot_url(name, fmt="csv", query=""):
    return reverse("analysis:plot", args=["cache-s", name, fmt]) + query


def human_votes(study) -> int:
    return sum(j["n_votes"] for j in services.study_analyze(study=study)["judges"] if j["kind"] == "human")


def test_the_second_figure_of_a_page_runs_far_fewer_queries_than_the_first(cached_study, staff_client):
    first = queries(staff_client, plot_url("forest"))
    second = queries(staff_client, plot_url("position"))
    assert second <= first - 8, (first, second)


def test_the_dashboard_and_its_figures_share_one_report(cached_study, staff_client):
    queries(staff_client, reverse("analysis:study", args=["cache-s"]))
    page_then_figure = queries(staff_client, plot_url("bloom"))
    cold = queries(staff_client, plot_url("bloom", query="?include_flagged=on"))
    assert page_then_figure <= cold - 8, (page_then_figure, cold)


def test_a_figure_asked_for_again_is_neither_analysed_nor_drawn_again_until_a_vote_arrives(cached_study, staff_client):
    first = queries(staff_client, plot_url("agreement", "svg"))
    with CaptureQueriesContext(connection) as again:
        body = staff_client.get(plot_url("agreement", "svg")).content
    assert len(again.captured_queries) <= first - 8, (first, len(again.captured_queries))
    assert body.startswith(b"<?xml") and b"<svg" in body
    item = cached_study.items.filter(kind__isnull=True).first()
    make_vote(item, human_pool(cached_study), rater=make_rater(cached_study, participant_id="NEW-2"))
    # Analysed afresh: more queries than the hit's (at most first - 8), a few fewer than the first
    # time, as the loader reads only the new vote and keeps the items it has read.
    assert queries(staff_client, plot_url("agreement", "svg")) >= first - 5


def test_a_new_vote_is_in_the_next_report_at_once(cached_study):
    before = human_votes(cached_study)
    assert human_votes(cached_study) == before  # from the cache
    item = cached_study.items.filter(kind__isnull=True).first()
    make_vote(item, human_pool(cached_study), rater=make_rater(cached_study, participant_id="NEW-1"))
    assert human_votes(cached_study) == before + 1


def test_flagging_a_rater_changes_the_report_at_once(cached_study):
    before = human_votes(cached_study)
    rater = Rater.objects.filter(study=cached_study, votes__isnull=False).first()
    Rater.objects.filter(pk=rater.pk).update(flagged=True)  # as the admin's bulk action does
    assert human_votes(cached_study) == before - rater.votes.count()


def test_an_edited_bloom_level_changes_the_report_once_committed(cached_study, django_capture_on_commit_callbacks):
    assert set(services.study_analyze(study=cached_study)["judges"][0]["by_bloom"]) == {"applying"}
    question = Question.objects.filter(study=cached_study).first()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        question.bloom_level = "creating"
        question.save()
    assert callbacks  # the edit token is renewed after the commit
    assert set(services.study_analyze(study=cached_study)["judges"][0]["by_bloom"]) == {"applying", "creating"}


def test_different_filters_get_their_own_reports(cached_study):
    everything = services.study_analyze(study=cached_study, filters=Filters(include_flagged=True, min_ms=0))
    Rater.objects.filter(study=cached_study).update(flagged=True)
    unflagged = services.study_analyze(study=cached_study)
    assert everything["filters"]["include_flagged"] is True
    assert unflagged["filters"]["include_flagged"] is False
    assert human_votes(cached_study) == 0 < sum(j["n_votes"] for j in everything["judges"] if j["kind"] == "human")


def test_the_key_names_the_study_filters_and_options(cached_study):
    from analysis.report import Options

    key = results_cache.cache_key(cached_study, Filters(), Options())
    assert key == results_cache.cache_key(cached_study, Filters(), Options())
    assert key != results_cache.cache_key(cached_study, Filters(min_ms=0), Options())
    assert key != results_cache.cache_key(cached_study, Filters(), Options(measure="chars"))
    other = make_study(slug="cache-other")
    assert results_cache.cache_key(other, Filters(), Options()) != key


@override_settings(
    CACHES={"default": {"BACKEND": "django.core.cache.backends.db.DatabaseCache", "LOCATION": "no_such_cache_table"}}
)
def test_a_broken_cache_means_computing_not_an_error(cached_study, staff_client):
    assert human_votes(cached_study) > 0
    response = staff_client.get(plot_url("forest"))
    assert response.status_code == 200 and b"sim" in b"".join(response.streaming_content)


def test_a_judge_runs_heartbeat_changes_the_version_as_its_retries_rewrite_failed_votes_in_place(cached_study):
    from django.utils import timezone

    from judges.models import JudgeRun
    from judges.services import judge_run_start
    from tests.factories import make_llm_judge

    run = judge_run_start(study=cached_study, judge=make_llm_judge().judge, enqueue=False)
    before = results_cache.data_version(cached_study)
    assert results_cache.data_version(cached_study) == before
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())  # as runner.write_outcomes does
    assert results_cache.data_version(cached_study) != before


def test_a_report_after_new_votes_with_the_judges_parts_kept_is_the_report_computed_from_nothing(cached_study):
    cache.clear()
    services.study_report(study=cached_study)  # each judge's part kept
    services.judge_simulate(study=cached_study, name="another", params=JudgeParams(position=-1.0), seed=3)
    with_parts = services.study_report(study=cached_study)
    cache.clear()
    assert json.dumps(with_parts, sort_keys=True) == json.dumps(
        services.study_report(study=cached_study), sort_keys=True
    )
    assert {"sim", "another"} <= {j["judge"] for j in with_parts["judges"]}
