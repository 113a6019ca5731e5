"""PostgreSQL stopped while a judge run's worker is writing the votes it received: the worker
keeps the batch in memory, holds back new requests and writes the batch once the database is
back. An outage shorter than the stale time (JUDGE_RUN_STALE_SECONDS) loses no received reply and
asks for none twice: the run finishes in the same job, and the model server was asked exactly
once per planned vote. A throwaway PostgreSQL cluster of the test's own (tests/live.py), the
Redis queue's worker, the scriptable JudgeServer on loopback counting requests."""

from __future__ import annotations

import re
import time

import pytest

from tests.judge_server import JudgeServer
from tests.live import PostgresCluster, RedisServer, live_env, manage, prepare, stop
from tests.test_reliability_judge_worker import JUDGE, SLUG, TOTAL, _ok, _rq_worker, _wait_for

pytestmark = pytest.mark.slow

STALE_SECONDS = 15  # longer than the outage: the worker keeps the run, no watchdog takes it
OUTAGE_SECONDS = 5


def test_a_database_outage_shorter_than_the_stale_time_loses_no_received_vote_and_asks_for_none_twice(tmp_path):
    cluster = PostgresCluster()
    redis_server = RedisServer(tmp_path)
    log = tmp_path / "rqworker.log"
    worker = None
    try:
        database_url = cluster.start().create_database()
        redis_server.start()
        with JudgeServer(delay=0.1) as server:
            env = live_env(
                database_url,
                DJANGO_SETTINGS_MODULE="biasstudy.settings",
                TASKS_BACKEND="django_tasks_rq.RQBackend",
                REDIS_URL=redis_server.url,
                JUDGE_RUN_STALE_SECONDS=str(STALE_SECONDS),
                TEST_JUDGE_URL=server.base_url,
            )
            prepare(env, seed="tests.test_reliability_judge_worker:seed")
            queued = _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, env=env))
            command = re.search(r"\((manage\.py rqworker [^)]*)\)", queued.stdout).group(1)
            worker = _rq_worker(env, command, log)
            deadline = time.monotonic() + 60
            while len(server.log) < TOTAL // 3:
                assert worker.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker did not start the run: " + log.read_text()[-3000:]
                time.sleep(0.05)
            cluster.stop()  # mid-run: the next write of received votes fails
            stopped_at = time.monotonic()
            asked_at_stop = len(server.log)
            time.sleep(OUTAGE_SECONDS)
            asked_in_outage = len(server.log) - asked_at_stop
            cluster.start()
            final = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=STALE_SECONDS + 30)
            assert time.monotonic() - stopped_at < STALE_SECONDS + 30
    finally:
        if worker is not None:
            stop(worker)
        redis_server.stop()
        cluster.remove()

    assert final["status"] == "done", (final, log.read_text()[-3000:])
    assert final["runs"] == 1
    assert final["votes"] == final["slots"] == final["ok"] == TOTAL, final
    assert final["doubled"] == 0
    # Every planned vote was asked for once: none received was lost and asked for again.
    assert len(server.log) == TOTAL, (len(server.log), TOTAL)
    # New requests wait for the database: at most those in flight (concurrency 2) went out.
    assert asked_in_outage <= 2, asked_in_outage
