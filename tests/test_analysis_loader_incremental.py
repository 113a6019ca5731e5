"""A study's votes read once are kept (loader.study_votes), and the next frame reads only the
votes added since: it equals a frame read from scratch after appends, and any deleted or edited
vote makes it read everything again."""

from datetime import timedelta

import pandas as pd
import pytest
from django.core.cache import caches
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from analysis import loader, services
from analysis.simulate import JudgeParams
from annotations.models import Vote
from judges.models import JudgeRun
from tests.factories import human_pool, make_judge, make_question, make_rater, make_study, make_variant, make_vote


@pytest.fixture
def live_study(db):
    caches[loader.VOTES_CACHE].clear()
    study = make_study(slug="live", votes_per_item=2)
    for i in range(3):
        q = make_question(study, a1="word " * (4 + i), a2="a longer answer " * 3)
        make_variant(q, kind="reference", text="see [1] " * 5)
    services.judge_simulate(study=study, name="sim", params=JudgeParams(position=0.5), seed=1)
    services.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def from_scratch(study) -> pd.DataFrame:
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}):
        return loader.study_frame(study)


def assert_as_from_scratch(study) -> pd.DataFrame:
    frame = loader.study_frame(study)
    pd.testing.assert_frame_equal(frame, from_scratch(study), check_exact=True)
    return frame


def votes_read_after(study) -> list[str]:
    """The vote queries of one frame that read votes above an id (the kept ones' highest)."""
    with CaptureQueriesContext(connection) as ctx:
        loader.study_frame(study)
    top = str(Vote.objects.filter(item__study=study).order_by("-id").values_list("id", flat=True)[1])
    return [q["sql"] for q in ctx.captured_queries if "annotations_vote" in q["sql"] and f"> {top}" in q["sql"]]


def test_the_frame_after_new_votes_equals_one_read_from_scratch(live_study):
    before = assert_as_from_scratch(live_study)
    item = live_study.items.filter(kind__isnull=True).first()
    perturbed = live_study.items.filter(kind__isnull=False).first()
    rater = make_rater(live_study, participant_id="NEW-1")
    make_vote(item, human_pool(live_study), rater=rater, shown_first="a2", choice_shown="tie", client_ms=800)
    # Values the kept votes did not have: a label scheme, probabilities, a vote with no verdict,
    # a not-familiar vote, an order not known, and a vote received before every other one.
    llm = make_judge(name="llm-new", kind="llm")
    make_vote(item, llm, label_scheme="symbols", labels_swapped=True, option_probs={"first": 0.9, "second": 0.1})
    make_vote(perturbed, llm, round=1, choice_shown=None, parse_status="invalid", meta={"order_known": False})
    make_vote(perturbed, human_pool(live_study), rater=rater, choice_shown=None, not_familiar=True)
    make_vote(
        item, llm, round=2, shown_first="a2", choice_shown="second", received_at=timezone.now() - timedelta(days=9)
    )
    after = assert_as_from_scratch(live_study)
    assert len(after) == len(before) + 5
    assert after["vote_id"].iloc[0] == Vote.objects.filter(judge=llm, round=2).get().pk  # the earliest first


def test_a_refresh_reads_only_the_votes_added_since(live_study):
    loader.study_frame(live_study)
    item = live_study.items.filter(kind__isnull=True).first()
    make_vote(item, human_pool(live_study), rater=make_rater(live_study))
    assert votes_read_after(live_study)  # the kept votes were not read again
    make_vote(item, human_pool(live_study), rater=make_rater(live_study))
    assert_as_from_scratch(live_study)


def test_a_refresh_with_no_new_vote_gives_the_same_frame(live_study):
    first = loader.study_frame(live_study)
    pd.testing.assert_frame_equal(loader.study_frame(live_study), first, check_exact=True)


def test_a_vote_deleted_through_the_orm_is_gone_from_the_next_frame(live_study, django_capture_on_commit_callbacks):
    loader.study_frame(live_study)
    gone = Vote.objects.filter(item__study=live_study).order_by("id")[3]
    with django_capture_on_commit_callbacks(execute=True):
        gone.delete()
    frame = assert_as_from_scratch(live_study)
    assert gone.pk not in set(frame["vote_id"])


def test_a_vote_deleted_behind_the_orms_back_is_gone_from_the_next_frame(live_study):
    loader.study_frame(live_study)
    gone = Vote.objects.filter(item__study=live_study).order_by("id").values_list("id", flat=True)[5]
    with connection.cursor() as cursor:  # no signal: the study's vote count says it
        cursor.execute("DELETE FROM annotations_vote WHERE id = %s", [gone])
    assert gone not in set(assert_as_from_scratch(live_study)["vote_id"])


def test_a_vote_edited_through_the_orm_is_seen_in_the_next_frame(live_study, django_capture_on_commit_callbacks):
    loader.study_frame(live_study)
    vote = Vote.objects.filter(item__study=live_study, rater__isnull=False).order_by("id").first()
    vote.not_familiar, vote.client_ms = True, 12
    with django_capture_on_commit_callbacks(execute=True):
        vote.save()
    frame = assert_as_from_scratch(live_study).set_index("vote_id")
    assert frame.loc[vote.pk, "not_familiar"] and frame.loc[vote.pk, "client_ms"] == 12


def test_a_vote_that_commits_after_a_higher_id_was_read_is_in_the_next_frame(live_study):
    """PostgreSQL takes ids from a sequence before commit: a vote may become visible after one
    with a higher id was read. The study's vote count finds it."""
    item = live_study.items.filter(kind__isnull=True).first()
    top = Vote.objects.order_by("-id").values_list("id", flat=True).first()
    make_vote(item, human_pool(live_study), rater=make_rater(live_study), pk=top + 10)
    loader.study_frame(live_study)
    late = make_vote(item, human_pool(live_study), rater=make_rater(live_study), pk=top + 5)
    assert late.pk in set(assert_as_from_scratch(live_study)["vote_id"])


def test_a_failed_vote_retried_in_place_by_its_run_is_seen_in_the_next_frame(live_study):
    from judges.services import judge_run_start
    from tests.factories import make_llm_judge

    run = judge_run_start(study=live_study, judge=make_llm_judge().judge, enqueue=False)
    item = live_study.items.filter(kind__isnull=True).first()
    failed = make_vote(item, run.judge, run_id=run.pk, choice_shown=None, parse_status="failed")
    assert loader.study_frame(live_study).set_index("vote_id").loc[failed.pk, "parse_status"] == "failed"
    # As judges.runner.write_outcomes retries it: the vote rewritten, the run's heart beaten.
    Vote.objects.filter(pk=failed.pk, parse_status="failed").update(
        parse_status="ok", choice_shown="second", choice="a2"
    )
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())
    frame = assert_as_from_scratch(live_study).set_index("vote_id")
    assert frame.loc[failed.pk, "parse_status"] == "ok" and frame.loc[failed.pk, "choice"] == "a2"


def test_without_the_votes_cache_every_frame_is_read_from_scratch(live_study):
    default = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with override_settings(CACHES=default):
        first = loader.study_frame(live_study)
        make_vote(live_study.items.first(), human_pool(live_study), rater=make_rater(live_study))
        assert len(loader.study_frame(live_study)) == len(first) + 1


def test_items_questions_and_thresholds_changed_since_are_in_the_next_frame(
    live_study, django_capture_on_commit_callbacks
):
    loader.study_frame(live_study)
    question = live_study.questions.order_by("id").first()
    with django_capture_on_commit_callbacks(execute=True):
        question.bloom_level = "creating"
        question.save()
    new_question = make_question(live_study, a1="short", a2="a much longer second answer")
    make_vote(new_question.items.get(), human_pool(live_study), rater=make_rater(live_study))
    live_study.min_response_ms, live_study.ms_per_word = 1234, 7
    live_study.save()
    frame = assert_as_from_scratch(live_study)
    assert set(frame.loc[frame["question_id"] == question.pk, "bloom"]) == {"creating"}
    assert new_question.pk in set(frame["question_id"])
    assert (frame["threshold_ms"] == 1234 + 7 * frame["words"]).all()
