"""PostgreSQL stopped while a judge run's worker is writing the votes it received: the worker
keeps the batch in memory, holds back new requests and writes the batch once the database is
back. An outage shorter than the stale time (JUDGE_RUN_STALE_SECONDS) loses no received reply and
asks for none twice: the run finishes in the same job, and the model server was asked exactly
once per planned vote. A throwaway PostgreSQL cluster of the test's own (tests/live.py), the
Redis queue's worker, the scriptable JudgeServer on loopback counting requests."""

from __future__ import annotations

import time

import pytest

from tests.test_reliability_judge_worker import TOTAL, _wait_for, rq_run_under_way

pytestmark = pytest.mark.slow

STALE_SECONDS = 15  # longer than the outage: the worker keeps the run, no watchdog takes it
OUTAGE_SECONDS = 5


def test_a_database_outage_shorter_than_the_stale_time_loses_no_received_vote_and_asks_for_none_twice(tmp_path):
    with rq_run_under_way(tmp_path, stale_seconds=STALE_SECONDS) as (cluster, server, env, log):
        cluster.stop()  # mid-run: the next write of received votes fails
        asked_at_stop = len(server.log)
        time.sleep(OUTAGE_SECONDS)
        asked_in_outage = len(server.log) - asked_at_stop
        cluster.start()
        final = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=30)

    assert final["status"] == "done", (final, log.read_text()[-3000:])
    assert final["runs"] == 1
    assert final["votes"] == final["slots"] == final["ok"] == TOTAL, final
    assert final["doubled"] == 0
    # Every planned vote was asked for once: none received was lost and asked for again.
    assert len(server.log) == TOTAL, (len(server.log), TOTAL)
    # New requests wait for the database once a write has failed: those of the half second
    # before the next write (2 threads, 0.1 s each) and the 2 in flight, not the 5 s outage's ~50.
    assert asked_in_outage <= 12, asked_in_outage
