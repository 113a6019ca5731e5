"""Judge runs against the scriptable OpenAI-compatible server on loopback: vote by vote."""

import pytest

from annotations.models import Vote
from judges.models import JudgeRun
from judges.services import JudgeRunError, judge_run_cancel, judge_run_execute, judge_run_resume, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

DIRECTIVES = [
    "",
    "[[do:429x1]]",
    "[[do:500]]",
    "[[do:malformedx1]]",
    "[[do:dropx1]]",
    "[[do:slowx1]]",
    "[[do:garbage]]",
    "[[do:garbagex1]]",
]


@pytest.fixture
def server():
    with JudgeServer(retry_after="0.3", slow_seconds=1.0, p_choice=0.8) as srv:
        yield srv


@pytest.fixture
def scripted_study(db):
    study = make_study()
    for directive in DIRECTIVES:
        make_question(study, text=f"Question {directive or 'plain'}?", a1="A GOOD answer.", a2="A weak answer.")
    return study


def judge_for(server, **kw):
    kw.setdefault("prompt_style", "vote_only")
    kw.setdefault("votes_per_item", 2)
    kw.setdefault("concurrency", 4)
    kw.setdefault("max_retries", 2)
    kw.setdefault("retry_base_seconds", 0.01)
    kw.setdefault("invalid_retries", 1)
    kw.setdefault("timeout", 0.4)
    return make_llm_judge(base_url=server.base_url, **kw)


def votes_of(run, directive):
    return list(run.votes.filter(item__question__text=f"Question {directive or 'plain'}?").order_by("round"))


def run_to_end(study, config, **kw):
    run = judge_run_start(study=study, judge=config.judge, enqueue=False, **kw)
    return judge_run_execute(run_id=run.pk)


def test_a_run_records_every_vote_with_its_outcome(server, scripted_study):
    run = run_to_end(scripted_study, judge_for(server))
    assert run.status == JudgeRun.Status.DONE
    assert run.votes.count() == run.total == 16

    for directive in ["", "[[do:429x1]]", "[[do:malformedx1]]", "[[do:dropx1]]", "[[do:slowx1]]"]:
        votes = votes_of(run, directive)
        assert [v.shown_first for v in votes] == ["a1", "a2"] or [v.shown_first for v in votes] == ["a2", "a1"]
        for vote in votes:
            assert (vote.parse_status, vote.choice, vote.error) == ("ok", "a1", ""), directive
            assert vote.choice_shown == ("first" if vote.shown_first == "a1" else "second")
            a1_has_first_label = (vote.shown_first == "a1") != vote.labels_swapped
            assert vote.raw_output == ("Answer1" if a1_has_first_label else "Answer2")
            picked = vote.choice_shown
            other = "second" if picked == "first" else "first"
            assert vote.option_probs == pytest.approx({picked: 0.8, other: 0.2, "tie": 0.0})
            assert vote.meta["tokens_in"] == 100 and vote.meta["cached"] is False
        if directive:
            assert all(len(v.meta["retried_errors"]) == 1 for v in votes), directive

    for vote in votes_of(run, "[[do:500]]"):
        assert (vote.parse_status, vote.choice) == ("failed", None)
        assert "gave up after 3 tries" in vote.error and "HTTP 500" in vote.error
    assert len(server.requests_for("[[do:500]]")) == 2 * 3

    for vote in votes_of(run, "[[do:garbage]]"):
        assert (vote.parse_status, vote.choice) == ("invalid", None)
        assert vote.raw_output == "Both answers have their merits and I would rather not say."
        assert vote.meta["invalid_outputs"] == [vote.raw_output]
    for vote in votes_of(run, "[[do:garbagex1]]"):
        assert (vote.parse_status, vote.choice) == ("ok", "a1")
        assert len(vote.meta["invalid_outputs"]) == 1


def test_it_waits_as_long_as_retry_after_says(server, scripted_study):
    run_to_end(scripted_study, judge_for(server))
    calls = server.requests_for("[[do:429x1]]")
    by_prompt = {}
    for call in calls:
        by_prompt.setdefault(call["prompt"], []).append(call["at"])
    assert len(by_prompt) == 2
    for times in by_prompt.values():
        assert len(times) == 2 and times[1] - times[0] >= 0.3


def test_it_asks_for_logprobs_and_a_seed_per_sample(server, scripted_study):
    run_to_end(scripted_study, judge_for(server, seed=7, votes_per_item=6))
    bodies = [call["body"] for call in server.requests_for("Question plain?")]
    assert all(body["logprobs"] is True and body["top_logprobs"] == 5 for body in bodies)
    # Six votes are four distinct prompts (order x label order); two of them are asked again.
    assert sorted(body["seed"] for body in bodies) == [7, 7, 7, 7, 7 + 1009, 7 + 1009]


def test_a_resume_skips_what_is_done_and_never_duplicates(server, scripted_study):
    run = run_to_end(scripted_study, judge_for(server))
    before = len(server.log)
    judge_run_resume(run=run, enqueue=False)
    run = judge_run_execute(run_id=run.pk)
    assert run.status == JudgeRun.Status.DONE and run.votes.count() == 16
    assert len(server.log) == before

    judge_run_resume(run=run, retry_failed=True, enqueue=False)
    run = judge_run_execute(run_id=run.pk)
    assert run.votes.count() == 16
    assert len(server.log) == before + 2 * 3  # only the two failed votes were asked again
    assert run.votes.filter(parse_status="failed").count() == 2


def test_a_second_run_with_the_same_prompts_is_answered_from_the_cache(server, scripted_study):
    config = judge_for(server)
    first = run_to_end(scripted_study, config)
    before = len(server.log)
    second = run_to_end(scripted_study, config)
    assert second.votes.count() == 16
    assert len(server.log) - before == 2 * 3  # failures are not cached: the 500 item asks again
    for vote in second.votes.exclude(parse_status="failed"):
        assert vote.meta["cached"] is True and vote.meta["tokens_in"] == 0
    pairs = lambda run: sorted(run.votes.values_list("item_id", "round", "choice", "parse_status"))  # noqa: E731
    assert pairs(first) == pairs(second)
    assert second.progress()["cached"] == 14


def test_a_cancelled_run_keeps_its_votes_and_resumes_where_it_stopped(db):
    study = make_study()
    # 120 votes at about 40/s: the cancel (seen at the next flush, within FLUSH_SECONDS) lands
    # well before the end.
    for _ in range(30):
        make_question(study, a1="A weak answer.", a2="A GOOD answer.")
    with JudgeServer(delay=0.05) as server:
        config = judge_for(server, concurrency=2, votes_per_item=4)
        run = judge_run_start(study=study, judge=config.judge, enqueue=False)
        seen = []

        def cancel_after_first_batch(count):
            seen.append(count)
            if sum(seen) > 0 and run.status != JudgeRun.Status.CANCELLED:
                judge_run_cancel(run=run)

        run = judge_run_execute(run_id=run.pk, progress=cancel_after_first_batch)
        assert run.status == JudgeRun.Status.CANCELLED
        stored = run.votes.count()
        assert 0 < stored < 120
        assert stored <= len(server.log) <= stored + 2  # at most the requests in flight were lost

        judge_run_resume(run=run, enqueue=False)
        run = judge_run_execute(run_id=run.pk)
    assert run.status == JudgeRun.Status.DONE
    assert run.votes.count() == 120
    assert set(run.votes.values_list("choice", flat=True)) == {"a2"}
    assert run.votes.values("item", "round").distinct().count() == 120


def test_a_dead_worker_s_run_can_be_resumed_but_a_live_one_cannot(server, scripted_study):
    config = judge_for(server)
    run = judge_run_start(study=scripted_study, judge=config.judge, enqueue=False)
    JudgeRun.objects.filter(pk=run.pk).update(status="running", heartbeat_at="2020-01-01T00:00:00Z")
    run.refresh_from_db()
    assert run.is_stale
    judge_run_resume(run=run, enqueue=False)
    assert judge_run_execute(run_id=run.pk).votes.count() == 16

    other = judge_run_start(study=scripted_study, judge=config.judge, enqueue=False)
    with pytest.raises(JudgeRunError, match="cannot be resumed"):
        judge_run_resume(run=other, enqueue=False)
    with pytest.raises(JudgeRunError, match="still queued"):
        judge_run_start(study=scripted_study, judge=config.judge, enqueue=False)


def test_a_run_started_in_a_request_goes_to_the_task_queue(server, scripted_study, django_capture_on_commit_callbacks):
    config = judge_for(server)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        run = judge_run_start(study=scripted_study, judge=config.judge)
    assert len(callbacks) == 1  # the immediate task backend of the tests ran it on commit
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE and run.votes.count() == 16
    assert Vote.objects.filter(run_id=run.pk, judge=config.judge).count() == 16


def test_label_order_is_counterbalanced_and_each_label_is_read_back_to_the_answer_shown(server, db):
    study = make_study()
    for q in range(4):
        make_question(study, text=f"Plain question {q}?", a1="A GOOD answer.", a2="A weak answer.")
    run = run_to_end(study, judge_for(server, votes_per_item=4, label_schemes=["ab"]))
    votes = list(run.votes.all())
    assert len(votes) == 16 and all(v.parse_status == "ok" and v.choice == "a1" for v in votes)
    # Every item: both display orders, each once with the first-shown answer under A and once under B.
    for item_id in {v.item_id for v in votes}:
        cells = sorted((v.shown_first, v.labels_swapped) for v in votes if v.item_id == item_id)
        assert cells == [("a1", False), ("a1", True), ("a2", False), ("a2", True)]
    prompts = [call["prompt"] for call in server.requests_for("Plain question")]
    swapped = [p for p in prompts if p.index("[B]") < p.index("[A]")]
    assert len(prompts) == 16 and len(swapped) == 8
    for vote in votes:
        # The server votes for the GOOD answer by the label it read: A1's label.
        assert vote.raw_output == ("A" if (vote.shown_first == "a1") != vote.labels_swapped else "B")
        assert vote.choice_shown == ("first" if vote.shown_first == "a1" else "second")
        # Option probabilities are by position as shown, whatever the label.
        other = "second" if vote.choice_shown == "first" else "first"
        assert vote.option_probs == pytest.approx({vote.choice_shown: 0.8, other: 0.2, "tie": 0.0})


def test_the_same_text_read_with_swapped_labels_is_a_different_request_in_the_cache():
    from judges.runner import cache_key

    config = {
        "backend": "openai_compatible", "base_url": "http://127.0.0.1:9/v1", "model": "m", "prompt_style": "vote_only",
        "temperature": 0.0, "max_tokens": 8, "seed": 1, "logprobs": True,
    }  # fmt: skip
    # A template that shows no labels renders the same text in both label orders.
    messages = [{"role": "user", "content": "Which is better, the first or the second?"}]
    plain = cache_key(config, messages, sample=0, attempt=0)
    assert cache_key(config, messages, sample=0, attempt=0, labels_swapped=False) == plain
    assert cache_key(config, messages, sample=0, attempt=0, labels_swapped=True) != plain
