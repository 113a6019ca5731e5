"""A judge backend that fails every other request: the run still finishes, each failure is
stored as a vote with parse_status "failed" and the error, and `run_judge --resume
--retry-failed` asks again for exactly those."""

from django.core.management import call_command

from annotations.models import Vote
from judges.models import JudgeRun
from judges.services import judge_run_execute, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

QUESTIONS = 6
VOTES_PER_ITEM = 4
TOTAL = QUESTIONS * VOTES_PER_ITEM


def test_a_backend_failing_half_its_requests_leaves_a_finished_run_whose_failures_can_be_retried(db):
    study = make_study(slug="flaky")
    for n in range(QUESTIONS):
        make_question(study, a1=f"GOOD answer {n}.", a2=f"Plain answer {n}.")
    with JudgeServer(fail_every=2, fail_status=500) as server:
        config = make_llm_judge(
            name="flaky-judge", base_url=server.base_url, concurrency=1, votes_per_item=VOTES_PER_ITEM,
            max_retries=0, timeout=5,
        )  # fmt: skip
        run = judge_run_start(study=study, judge=config.judge, enqueue=False)
        run = judge_run_execute(run_id=run.pk)

        assert run.status == JudgeRun.Status.DONE, run.error
        votes = run.votes.all()
        failed = votes.filter(parse_status=Vote.Parse.FAILED)
        assert votes.count() == TOTAL
        assert failed.count() == TOTAL // 2
        for vote in failed:
            assert "HTTP 500" in vote.error and vote.choice is None
        assert run.progress()["failed"] == TOTAL // 2

        server.fail_every = 0  # the backend recovers
        call_command("run_judge", "--study", "flaky", "--judge", "flaky-judge", "--resume", "--retry-failed",
                     "--wait", verbosity=0)  # fmt: skip

    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE
    assert run.votes.count() == TOTAL, "a retry must fill the failed slots, not add votes"
    assert run.votes.filter(parse_status=Vote.Parse.OK, error="").count() == TOTAL
    assert set(run.votes.values_list("choice", flat=True)) == {"a1"}
    assert len(server.log) == TOTAL + TOTAL // 2
