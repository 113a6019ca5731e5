"""Judge runs executed by real task workers in separate processes, on a fresh file database:

- the database queue's worker (`manage.py db_worker`) killed with SIGKILL in the middle of a run,
  the run resumed once its heartbeat is stale, a new worker started: every planned vote is
  stored once, none is missing;
- the Redis queue (TASKS_BACKEND=django_tasks_rq.RQBackend) with Debian's redis-server on a free
  loopback port: a run queued by `manage.py run_judge` is executed by `manage.py rqworker`; and an
  RQ worker killed with its work-horse and scheduler in the middle of a run (the scheduler lock
  held by the dead) has its run resumed by a new worker within about a minute and a half;
- Redis killed while the RQ worker runs a job (nothing saved: it comes back empty): the job
  finishes, the worker waits for Redis instead of quitting, and once Redis is back the same
  worker process takes a later job.

The model is the scriptable OpenAI-compatible JudgeServer in this process, on loopback.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.judge_server import JudgeServer
from tests.live import (
    PYTHON,
    ROOT,
    PostgresCluster,
    RedisServer,
    db_worker,
    live_env,
    manage,
    prepare,
    run_django,
    stop,
)

pytestmark = pytest.mark.slow

SLUG = "worker-study"
JUDGE = "worker-judge"
QUESTIONS = 20
VOTES_PER_ITEM = 6
TOTAL = QUESTIONS * VOTES_PER_ITEM
STALE_SECONDS = 12  # JUDGE_RUN_STALE_SECONDS in the processes: the default 60 s would make a slow test


def seed() -> None:
    """Run in a subprocess: the study and an LLM judge asking the JudgeServer at TEST_JUDGE_URL."""
    from tests.factories import make_llm_judge, make_question, make_study

    study = make_study(slug=SLUG)
    for n in range(QUESTIONS):
        make_question(study, text=f"Worker question {n}?", a1=f"GOOD answer {n}.", a2=f"Other answer {n}.")
    make_llm_judge(
        name=JUDGE, base_url=os.environ["TEST_JUDGE_URL"], concurrency=2, votes_per_item=VOTES_PER_ITEM,
        max_retries=1, retry_base_seconds=0.1, timeout=10,
    )  # fmt: skip


def report() -> None:
    """Run in a subprocess: the latest run of the judge and its votes, as JSON."""
    from django.db.models import Count

    from judges.models import JudgeRun

    run = JudgeRun.objects.filter(judge__name=JUDGE).first()
    votes = run.votes.all() if run else None
    print(
        json.dumps(
            {
                "status": run.status if run else None,
                "error": run.error if run else "",
                "votes": votes.count() if run else 0,
                "slots": votes.values("item", "round").distinct().count() if run else 0,
                "doubled": votes.values("item", "round").annotate(n=Count("pk")).filter(n__gt=1).count() if run else 0,
                "ok": votes.filter(parse_status="ok").count() if run else 0,
                "runs": JudgeRun.objects.filter(judge__name=JUDGE).count(),
            }
        )
    )


def _report(env: dict) -> dict:
    return json.loads(run_django("from tests.test_reliability_judge_worker import report; report()", env))


def _wait_for(env: dict, done, *, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        state = _report(env)
        if done(state):
            return state
        assert time.monotonic() < deadline, f"gave up waiting: {state}"
        time.sleep(0.5)


def _ok(done: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done


@pytest.mark.parametrize("live_database", ["sqlite", "postgres"], indirect=True)
def test_a_worker_killed_mid_run_loses_and_doubles_nothing_after_a_resume(live_database):
    with JudgeServer(delay=0.1) as server:
        env = live_env(
            live_database,
            DJANGO_SETTINGS_MODULE="biasstudy.settings",  # the database queue, as deployed
            JUDGE_RUN_STALE_SECONDS=str(STALE_SECONDS),
            TEST_JUDGE_URL=server.base_url,
        )
        prepare(env, seed="tests.test_reliability_judge_worker:seed")
        queued = _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, env=env))
        assert "queued" in queued.stdout and "manage.py db_worker" in queued.stdout

        worker = db_worker(env)
        try:
            deadline = time.monotonic() + 30
            while len(server.log) < TOTAL // 3:
                assert worker.poll() is None, worker.stderr.read()[-3000:]
                assert time.monotonic() < deadline, "the worker did not start the run"
                time.sleep(0.05)
            time.sleep(0.8)  # the runner writes finished votes at least every half second
            os.kill(worker.pid, signal.SIGKILL)
            worker.wait(timeout=10)
            killed_at = time.monotonic()
        finally:
            stop(worker)
        asked_before_kill = len(server.log)

        # Before the heartbeat is stale the run cannot be resumed: its worker might be alive. On a
        # machine so busy that starting the command took longer than the staleness window, the
        # refusal cannot be observed; the rest of the test still holds.
        early = manage("run_judge", "--study", SLUG, "--judge", JUDGE, "--resume", env=env)
        if time.monotonic() - killed_at < STALE_SECONDS - 1:
            assert early.returncode != 0 and "cannot be resumed" in early.stderr, early.stderr
        killed = _report(env)
        if early.returncode != 0:  # nobody told the database: it just went quiet
            assert killed["status"] == "running", killed
        assert 0 < killed["votes"] < TOTAL, killed
        assert killed["doubled"] == 0
        time.sleep(max(0.0, STALE_SECONDS + 0.5 - (time.monotonic() - killed_at)))
        # ... after it, it can: a new worker finishes what is missing.
        if early.returncode != 0:
            _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, "--resume", env=env))
        second = db_worker(env)
        try:
            final = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=60)
        finally:
            stop(second)

    assert final["status"] == "done", final
    assert final["runs"] == 1
    assert final["votes"] == final["slots"] == TOTAL, final
    assert final["doubled"] == 0
    assert final["ok"] == TOTAL
    # The resumed worker asked only for what had not been stored (plus what was in flight).
    assert len(server.log) - asked_before_kill <= TOTAL - killed["votes"] + 2 * 2


@pytest.fixture
def redis_url(tmp_path):
    """Debian's redis-server on a free loopback port, without persistence, stopped afterwards."""
    server = RedisServer(tmp_path).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.mark.parametrize("live_database", ["sqlite"], indirect=True)
def test_the_redis_queue_runs_a_judge_run_queued_by_the_command(live_database, redis_url):
    with JudgeServer() as server:
        env = live_env(
            live_database,
            DJANGO_SETTINGS_MODULE="biasstudy.settings",
            TASKS_BACKEND="django_tasks_rq.RQBackend",
            REDIS_URL=redis_url,
            TEST_JUDGE_URL=server.base_url,
        )
        prepare(env, seed="tests.test_reliability_judge_worker:seed")
        queued = _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, env=env))
        assert "manage.py rqworker default" in queued.stdout  # the worker of this queue, not db_worker
        assert _report(env)["status"] == "queued"
        _ok(manage("rqworker", "default", "--burst", "--job-class", "django_tasks_rq.Job", env=env, timeout=120))
        final = _report(env)

    assert final["status"] == "done", final
    assert final["votes"] == final["slots"] == final["ok"] == TOTAL, final
    assert len(server.log) == TOTAL


# RQ's scheduler lock lapses 61 s after the dead scheduler's last beat; the new worker takes it at
# its next maintenance (biasstudy/rq_worker.py: every 10 s), its scheduler enqueues the watchdog,
# which queues the run again, and the remaining votes take a few seconds: about 85 s in all,
# the rest is room for a busy machine. With RQ's own worker the maintenance, and so the resume,
# comes after 405 s of waiting for a job, or 10 minutes.
RQ_RESUME_SECONDS = 120
# The watchdog's first look comes this long after the run is queued: the worker is killed
# before, so the watchdog waits in RQ's scheduled registry for a scheduler to enqueue it.
RQ_STALE_SECONDS = 40


def _rq_worker(env: dict, command: str, log: Path) -> subprocess.Popen:
    """The worker command run_judge printed, as a process group of its own (the scheduler joins it)."""
    args = shlex.split(command)
    assert args[:2] == ["manage.py", "rqworker"], command
    return subprocess.Popen(
        [PYTHON, *args], env=env, cwd=ROOT, stdout=log.open("a"), stderr=subprocess.STDOUT, start_new_session=True
    )


@contextmanager
def rq_run_started(
    tmp_path: Path, database_url: str, redis_server: RedisServer, **settings: str
) -> Iterator[tuple[JudgeServer, dict, Path, subprocess.Popen]]:
    """A run queued by `run_judge` on `database_url` (with `settings` in the environment) and
    executed by the Redis queue's worker on `redis_server`, yielded once a third of its requests
    went out: (the JudgeServer, the environment, the worker's log, the worker)."""
    log = tmp_path / "rqworker.log"
    worker = None
    try:
        with JudgeServer(delay=0.1) as server:
            env = live_env(
                database_url,
                DJANGO_SETTINGS_MODULE="biasstudy.settings",
                TASKS_BACKEND="django_tasks_rq.RQBackend",
                REDIS_URL=redis_server.url,
                TEST_JUDGE_URL=server.base_url,
                **settings,
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
            yield server, env, log, worker
    finally:
        if worker is not None:
            stop(worker)


@contextmanager
def rq_run_under_way(
    tmp_path: Path, *, stale_seconds: int
) -> Iterator[tuple[PostgresCluster, JudgeServer, dict, Path]]:
    """A run queued by `run_judge` on a throwaway PostgreSQL cluster of its own (for outages:
    stop() and start() it) and executed by the Redis queue's worker, yielded once a third of its
    requests went out: (cluster, the JudgeServer, the environment, the worker's log)."""
    cluster = PostgresCluster()
    redis_server = RedisServer(tmp_path)
    try:
        database_url = cluster.start().create_database()
        redis_server.start()
        settings = {"JUDGE_RUN_STALE_SECONDS": str(stale_seconds), "JUDGE_RUN_REPLIES_DIR": str(tmp_path / "replies")}
        with rq_run_started(tmp_path, database_url, redis_server, **settings) as (server, env, log, _):
            yield cluster, server, env, log
    finally:
        redis_server.stop()
        cluster.remove()


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        if ppid == pid:
            found.append(int(stat.parent.name))
    return found


def _kill_with_children(process: subprocess.Popen) -> None:
    """SIGKILL the worker, its work-horse and its scheduler at once, as when a host is lost."""
    children = _children(process.pid)
    assert len(children) == 2, f"expected a work-horse and a scheduler under the worker, got {children}"
    for pid in [process.pid, *children]:
        os.kill(pid, signal.SIGKILL)
    process.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in children):
        assert time.monotonic() < deadline, "the work-horse or scheduler survived SIGKILL"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "Z"


@pytest.mark.parametrize("live_database", ["sqlite"], indirect=True)
def test_a_killed_rq_worker_holding_the_scheduler_lock_has_its_run_finished_by_a_new_worker_within_two_minutes(
    live_database, redis_url, tmp_path
):
    import redis
    from rq import Queue
    from rq.registry import ScheduledJobRegistry

    log = tmp_path / "rqworker.log"
    with JudgeServer(delay=0.1) as server:
        env = live_env(
            live_database,
            DJANGO_SETTINGS_MODULE="biasstudy.settings",
            TASKS_BACKEND="django_tasks_rq.RQBackend",
            REDIS_URL=redis_url,
            JUDGE_RUN_STALE_SECONDS=str(RQ_STALE_SECONDS),
            TEST_JUDGE_URL=server.base_url,
        )
        prepare(env, seed="tests.test_reliability_judge_worker:seed")
        queued = _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, env=env))
        queued_at = time.monotonic()
        command = re.search(r"\((manage\.py rqworker [^)]*)\)", queued.stdout).group(1)
        assert "--with-scheduler" in command  # the watchdog is a deferred job: only a scheduler enqueues it

        first = _rq_worker(env, command, log)  # alone on a fresh Redis: it takes the scheduler lock
        second = None
        try:
            deadline = time.monotonic() + 60
            while len(server.log) < TOTAL // 3:
                assert first.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker did not start the run: " + log.read_text()[-3000:]
                time.sleep(0.05)
            time.sleep(0.8)  # the runner writes finished votes at least every half second
            _kill_with_children(first)
            killed_at = time.monotonic()
            assert killed_at - queued_at < RQ_STALE_SECONDS - 5, "too slow to kill the worker before the watchdog"
            asked_before_kill = len(server.log)
            # The watchdog waits for a scheduler, none in the queue: only a scheduler can resume the run.
            connection = redis.Redis.from_url(redis_url)
            assert Queue("default", connection=connection).count == 0
            assert ScheduledJobRegistry("default", connection=connection).count == 1
            killed = _report(env)
            assert killed["status"] == "running" and 0 < killed["votes"] < TOTAL, killed

            second = _rq_worker(env, command, log)
            final = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=RQ_RESUME_SECONDS)
            finished_after = time.monotonic() - killed_at
        finally:
            stop(first)
            if second is not None:
                stop(second)

    assert final["status"] == "done", (final, log.read_text()[-3000:])
    assert finished_after < RQ_RESUME_SECONDS
    assert final["runs"] == 1
    assert final["votes"] == final["slots"] == final["ok"] == TOTAL, final
    assert final["doubled"] == 0
    # The resumed run asked only for what had not been stored (plus what was in flight).
    assert len(server.log) - asked_before_kill <= TOTAL - killed["votes"] + 2 * 2


@pytest.mark.parametrize("live_database", ["sqlite"], indirect=True)
def test_an_rq_worker_outlives_redis_killed_during_a_job_and_takes_a_later_job(live_database, tmp_path):
    redis_server = RedisServer(tmp_path).start()
    try:
        with rq_run_started(tmp_path, live_database, redis_server) as (server, env, log, worker):
            redis_server.kill()  # mid-job: the job's heartbeats, then its bookkeeping, meet no Redis

            # The job's work is in the database: it finishes without Redis.
            first = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=60)
            assert first["status"] == "done" and first["votes"] == TOTAL, first
            # The worker notices Redis is away once the job ends, and waits instead of quitting.
            deadline = time.monotonic() + 30
            while "Redis does not answer" not in log.read_text():
                assert worker.poll() is None, "the worker quit: " + log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the worker did not notice Redis gone: " + log.read_text()[-3000:]
                time.sleep(0.2)
            assert worker.poll() is None, "the worker quit: " + log.read_text()[-3000:]

            redis_server.start()  # back on the same port, empty
            later = _ok(manage("run_judge", "--study", SLUG, "--judge", JUDGE, "--votes-per-item", "2", env=env))
            assert "queued" in later.stdout
            second = _wait_for(env, lambda s: s["runs"] == 2 and s["status"] in ("done", "failed"), timeout=90)
            assert worker.poll() is None, log.read_text()[-3000:]
    finally:
        redis_server.stop()

    assert second["status"] == "done", (second, log.read_text()[-3000:])
    assert second["votes"] == second["ok"] == QUESTIONS * 2, second
    text = log.read_text()
    assert "Redis answers again" in text and "found an unhandled exception, quitting" not in text, text[-3000:]
