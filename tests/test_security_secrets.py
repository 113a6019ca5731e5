"""API keys come from the environment and never reach a log line, a run's error or a vote,
even when the provider repeats the key in its error message."""

import logging

import pytest

from judges.models import JudgeRun
from judges.services import judge_run_execute, judge_run_start, llm_judge_test_connection
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer

SENTINEL = "sk-sentinel-5f0e2a9c1b7d4e3f8a6b"


@pytest.mark.parametrize("status", [401, 500])
def test_the_api_key_is_never_logged_nor_stored(db, monkeypatch, caplog, status):
    monkeypatch.setenv("BIASSTUDY_TEST_API_KEY", SENTINEL)
    caplog.set_level(logging.DEBUG)
    study = make_study()
    make_question(study)
    with JudgeServer(fail_every=1, fail_status=status, echo_auth=True) as server:
        config = make_llm_judge(
            base_url=server.base_url, api_key_env="BIASSTUDY_TEST_API_KEY", concurrency=1, votes_per_item=2,
            max_retries=1, retry_base_seconds=0.0, timeout=5,
        )  # fmt: skip
        ok, message = llm_judge_test_connection(config=config)
        run = judge_run_start(study=study, judge=config.judge, enqueue=False)
        run = judge_run_execute(run_id=run.pk)
    # The server got the key and repeated it in its errors: a leak would show.
    assert all(entry["authorization"] == f"Bearer {SENTINEL}" for entry in server.log)

    assert not ok
    assert run.votes.count() == 2
    stored = [message, run.error, *[f"{v.error} {v.raw_output} {v.meta}" for v in run.votes.all()]]
    assert any(f"HTTP {status}" in text for text in stored)
    assert all(SENTINEL not in text for text in stored)
    assert SENTINEL not in caplog.text
    for record in caplog.records:
        assert SENTINEL not in str(record.args) and SENTINEL not in str(record.exc_info)
    assert run.status in (JudgeRun.Status.DONE, JudgeRun.Status.FAILED)
