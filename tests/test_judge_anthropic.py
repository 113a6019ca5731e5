"""The Anthropic backend through the official SDK, pointed at the scriptable server on loopback
(its Messages API): votes parsed, 429 with Retry-After, 5xx, timeouts, malformed and bad replies,
and the key read from the environment, sent as x-api-key and never stored or logged."""

import logging

import pytest

from annotations.models import Vote
from judges.models import JudgeRun
from judges.services import judge_run_execute, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

KEY_VARIABLE = "BIASSTUDY_TEST_ANTHROPIC_KEY"
SECRET = "sk-ant-test-0123456789abcdef"
# directive in the better answer -> (parse status, what the error says, or None)
CASES = {  # no more than two failing cases in a row: ten failures in a row trip the run's breaker
    "": (Vote.Parse.OK, None),
    "500": (Vote.Parse.FAILED, "HTTP 500"),
    "malformed": (Vote.Parse.FAILED, "gave up"),
    "429x1": (Vote.Parse.OK, None),
    # The vote is kept; its error says the token count was dropped.
    "negtokens": (Vote.Parse.OK, "tokens_in"),
    "hugetokens": (Vote.Parse.OK, "tokens_in"),
    "suptokens": (Vote.Parse.OK, "tokens_in"),
    "digittokens": (Vote.Parse.OK, "tokens_in"),
    # Kept with the character no database stores replaced, and said on the vote.
    "nul": (Vote.Parse.OK, "no database stores"),
    "surrogate": (Vote.Parse.OK, "no database stores"),
    "megabyte": (Vote.Parse.FAILED, "characters"),
    "dropx2": (Vote.Parse.FAILED, "gave up"),  # no usable body on the try nor on its one retry
    "slowx1": (Vote.Parse.OK, None),
    "cutbodyx2": (Vote.Parse.FAILED, "gave up"),
}


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, SECRET)


def run_over(study, server, **kw):
    config = make_llm_judge(
        backend="anthropic", model="claude-test", base_url=server.anthropic_url, api_key_env=KEY_VARIABLE,
        prompt_style="vote_only", votes_per_item=2, concurrency=2, max_retries=1, retry_base_seconds=0.01,
        invalid_retries=0, timeout=1.0, **kw,
    )  # fmt: skip
    return judge_run_execute(run_id=judge_run_start(study=study, judge=config.judge, enqueue=False).pk)


@pytest.mark.slow
def test_votes_retries_and_bad_replies_through_the_anthropic_sdk(db, key, caplog):
    caplog.set_level(logging.DEBUG)
    study = make_study(slug="anthropic")
    for directive in CASES:
        tag = f"[[do:{directive}]]" if directive else ""
        make_question(study, text=f"Case {directive or 'plain'}?", a1=f"GOOD answer {tag}", a2="Plain answer.")
    with JudgeServer(retry_after="0.01", slow_seconds=3.0) as server:
        run = run_over(study, server)
    assert run.status == JudgeRun.Status.DONE, run.error
    for directive, (status, error) in CASES.items():
        votes = run.votes.filter(item__question__text=f"Case {directive or 'plain'}?")
        assert votes.count() == 2
        for vote in votes:
            assert vote.parse_status == status, (directive, vote.error)
            if status == Vote.Parse.OK:
                assert vote.choice == "a1", (directive, vote.raw_output)
                assert (error in vote.error) if error else not vote.error, (directive, vote.error)
            else:
                assert error in vote.error, (directive, vote.error)
    retried = run.votes.filter(item__question__text="Case 429x1?").first()
    assert "HTTP 429" in retried.meta["retried_errors"][0]
    timed_out = run.votes.filter(item__question__text="Case slowx1?").first()
    assert "Timeout" in timed_out.meta["retried_errors"][0]
    assert "\ufffd" in run.votes.filter(item__question__text="Case nul?").first().raw_output
    # The system prompt goes in Anthropic's own field; the key only in its header.
    assert all(entry["body"]["system"] and entry["authorization"] == SECRET for entry in server.log)
    assert SECRET not in caplog.text


def test_a_provider_that_repeats_the_key_in_its_error_never_gets_it_stored_or_logged(db, key, caplog):
    caplog.set_level(logging.DEBUG)
    study = make_study(slug="anthropic-echo")
    make_question(study, a1="GOOD answer.", a2="Plain answer.")
    with JudgeServer(fail_every=1, fail_status=401, echo_auth=True) as server:
        run = run_over(study, server)
    votes = list(run.votes.all())
    assert votes and all(v.parse_status == Vote.Parse.FAILED and "HTTP 401" in v.error for v in votes)
    assert all("[redacted]" in v.error and SECRET not in v.error for v in votes)
    assert SECRET not in caplog.text and SECRET not in run.error


def test_a_missing_key_variable_fails_the_run_with_a_message_naming_it(db, monkeypatch):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    study = make_study(slug="anthropic-nokey")
    make_question(study)
    with JudgeServer() as server:
        run = run_over(study, server)
    assert run.status == JudgeRun.Status.FAILED and KEY_VARIABLE in run.error
    assert not server.log
