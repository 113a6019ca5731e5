"""Bad model replies, one mode per item, in one run against the scriptable server on loopback:
each bad reply becomes a `failed` vote whose error says what was wrong (a NUL character is
cleaned instead), the run finishes with every good vote stored, and retry-failed asks again
for exactly the failed ones. The server misbehaves only for the first tries of each prompt
(the run's attempt, and its one retry where the failure is transient), so retry-failed gets
good replies."""

import pytest

from annotations.models import Vote
from judges.models import JudgeRun
from judges.services import judge_run_execute, judge_run_resume, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

VOTES_PER_ITEM = 2
TRANSIENT = {"malformed", "drop", "cutbody"}
# directive -> what the stored error must say (None: the vote is stored as ok)
MODES = {
    "": None,
    "nul": None,
    "nanlogprob": "log-probability",
    "inflogprob": "log-probability",
    "hugelogprob": "log-probability",
    "negtokens": "tokens_in",
    "hugetokens": "tokens_in",
    "megabyte": "characters",
    "malformed": "malformed response",
    "drop": "gave up",
    "cutbody": "gave up",
}


@pytest.mark.slow
def test_each_bad_reply_fails_only_its_own_vote_and_retry_failed_asks_only_for_those(db):
    study = make_study(slug="bad-replies")
    for mode in MODES:
        # Transient failures (no usable body) are retried once within the run; bad content is not.
        tries = 2 if mode in TRANSIENT else 1
        directive = f"[[do:{mode}x{tries}]]" if mode else ""
        make_question(study, text=f"Question {mode or 'plain'}?", a1=f"GOOD answer {directive}", a2="Plain answer.")
        # A good item between bad ones: ten failures in a row would trip the runner's breaker
        # (a backend that is down), which is not what this test is about.
        make_question(study, text=f"Between {mode}?", a1="GOOD answer.", a2="Plain answer.")
    with JudgeServer() as server:
        config = make_llm_judge(
            base_url=server.base_url, concurrency=2, votes_per_item=VOTES_PER_ITEM, max_retries=1,
            retry_base_seconds=0.01, invalid_retries=0, timeout=5, logprobs=True, prompt_style="vote_only",
        )  # fmt: skip
        run = judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)
        assert run.status == JudgeRun.Status.DONE, run.error
        votes = {mode: list(run.votes.filter(item__question__text=f"Question {mode or 'plain'}?")) for mode in MODES}
        assert run.votes.count() == 2 * len(MODES) * VOTES_PER_ITEM
        for mode, expected in MODES.items():
            for vote in votes[mode]:
                if expected is None:
                    assert (vote.parse_status, vote.choice) == (Vote.Parse.OK, "a1"), (mode, vote.error)
                else:
                    assert vote.parse_status == Vote.Parse.FAILED and expected in vote.error, (mode, vote.error)
        assert "\ufffd" in votes["nul"][0].raw_output and "\x00" not in votes["nul"][0].raw_output
        kept = {vote.pk: vote.received_at for vote in run.votes.filter(parse_status=Vote.Parse.OK)}

        asked = len(server.log)
        run = judge_run_resume(run=run, retry_failed=True, enqueue=False)
        run = judge_run_execute(run_id=run.pk)
        assert run.status == JudgeRun.Status.DONE
        failed_modes = {mode for mode, expected in MODES.items() if expected}
        retried = {entry["prompt"].split("[[do:")[1].split("x")[0] for entry in server.log[asked:]}
        assert retried == failed_modes
        assert len(server.log) - asked == len(failed_modes) * VOTES_PER_ITEM
        assert run.votes.count() == 2 * len(MODES) * VOTES_PER_ITEM
        assert set(run.votes.values_list("parse_status", flat=True)) == {Vote.Parse.OK}
        assert {v.pk: v.received_at for v in run.votes.filter(pk__in=kept)} == kept
