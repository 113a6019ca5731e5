"""The loader reads each vote's own columns as the vote has them: the choice from the order shown
and the choice as shown, the three flags from one integer, probabilities, dates and nulls."""

from datetime import timedelta

import pandas as pd
import pytest
from django.utils import timezone

from analysis import loader
from annotations.models import Vote
from tests.factories import human_pool, make_judge, make_question, make_rater, make_study, make_variant, make_vote

PROBS = ["prob_first", "prob_second", "prob_tie"]


@pytest.fixture
def varied_study(db):
    """Votes of every shape a vote can have."""
    study = make_study(slug="varied")
    question = make_question(study, a1="one two three", a2="four five six seven")
    item = study.items.get()
    variant = make_variant(question, kind="factual_error", text="wrong " * 4)
    perturbed = study.items.get(answer_a2=variant)
    llm, people = make_judge(name="llm", kind="llm"), human_pool(study)
    start = timezone.now() - timedelta(days=1)
    make_vote(
        item,
        llm,
        shown_first="a2",
        choice_shown="first",
        label_scheme="ab",
        labels_swapped=True,
        option_probs={"first": 0.5, "second": 0.25, "tie": 0.25},
        received_at=start,
    )
    make_vote(
        item,
        llm,
        round=1,
        shown_first="a1",
        choice_shown="second",
        label_scheme="symbols",
        option_probs={"first": 0.75, "second": 0.25},
        received_at=start + timedelta(microseconds=7),
    )
    make_vote(item, llm, round=2, shown_first="a2", choice_shown="second", received_at=start)  # same time, later id
    make_vote(perturbed, llm, shown_first="a1", choice_shown="tie", option_probs=None, meta={"order_known": False})
    make_vote(perturbed, llm, round=1, shown_first="a2", choice_shown=None, parse_status="failed")
    make_vote(perturbed, llm, round=2, shown_first="a1", choice_shown=None, parse_status="invalid")
    rater = make_rater(study, flagged=True)
    make_vote(item, people, rater=rater, shown_first="a1", choice_shown="first", client_ms=4200)
    make_vote(perturbed, people, rater=rater, shown_first="a2", choice_shown=None, not_familiar=True, parse_status="ok")
    return study


def test_every_vote_level_column_is_the_votes_own_field(varied_study):
    frame = loader.study_frame(varied_study)
    votes = sorted(Vote.objects.filter(item__study=varied_study), key=lambda v: (v.received_at, v.pk))
    assert frame["vote_id"].tolist() == [v.pk for v in votes]  # the default order, ties by id
    for column in ("shown_first", "choice_shown", "choice", "label_scheme", "parse_status"):
        got = [None if pd.isna(value) else value for value in frame[column].astype(object)]
        assert got == [getattr(v, column) for v in votes], column
    probs = [None if pd.isna(f) else {"first": f, "second": s, "tie": t} for f, s, t in frame[PROBS].to_numpy()]
    # An option the vote's probabilities do not name is 0 (the tie in one of them).
    assert probs == [v.option_probs and {"tie": 0.0, **v.option_probs} for v in votes]
    assert frame["not_familiar"].tolist() == [v.not_familiar for v in votes]
    assert frame["labels_swapped"].tolist() == [v.labels_swapped for v in votes]
    assert frame["order_known"].tolist() == [v.meta.get("order_known", True) for v in votes]
    assert frame["received_at"].tolist() == [pd.Timestamp(v.received_at) for v in votes]
    assert [None if pd.isna(ms) else ms for ms in frame["client_ms"]] == [v.client_ms for v in votes]
    assert frame["rater_flagged"].tolist() == [v.rater_id is not None for v in votes]


def test_the_choice_is_categorical_over_the_three_choices_and_none_where_there_is_no_verdict(varied_study):
    frame = loader.study_frame(varied_study)
    assert list(frame["choice"].cat.categories) == ["a1", "a2", "tie"]
    assert frame["choice"].isna().sum() == 3  # the failed, the invalid and the not-familiar vote


def test_a_study_without_votes_gives_the_empty_frame(db):
    frame = loader.study_frame(make_study(slug="no-votes"))
    assert frame.empty and "choice" in frame.columns


def test_a_browser_time_longer_than_the_servers_is_read_as_the_servers(db):
    """The analysis's too-fast rule reads the browser's time capped at the server's, as the vote
    path does: a tampered client's 30 s over 0.2 s is too fast; no server time, the browser's."""
    from analysis.frame import Filters, exclusion_masks

    study = make_study(slug="timed", min_response_ms=2000)
    make_question(study)
    item, people = study.items.get(), human_pool(study)
    for client_ms, server_ms in ((30_000, 200), (2_500, 9_000), (2_500, None)):
        make_vote(item, people, rater=make_rater(study), client_ms=client_ms, server_ms=server_ms)
    for frame in (loader.study_frame(study), loader.rules_frame(study)):
        frame = frame.sort_values("vote_id")
        assert frame["client_ms"].tolist() == [200, 2_500, 2_500]
        assert exclusion_masks(frame, Filters())["too_fast"].tolist() == [True, False, False]
