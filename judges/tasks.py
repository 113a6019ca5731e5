"""Background tasks: thin wrappers around services, run by the task worker (worker_command())."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, task, task_backends

from biasstudy.queue import QueueUnavailable, enqueue_on_commit
from judges import runner
from judges.models import JudgeRun, stale_after

log = logging.getLogger(__name__)

# After a look that failed (the database away), the next comes this long after, doubling with
# each failure in a row, never later than the stale time.
WATCH_RETRY_SECONDS = 2.0


def worker_command() -> str:
    """The command that runs the workers of the configured queue (docs/DEPLOY.md)."""
    if settings.TASKS["default"]["BACKEND"] == "django_tasks_rq.RQBackend":
        # The scheduler runs the deferred watchdogs (watch_run) when their time comes.
        return "manage.py rqworker default --job-class django_tasks_rq.Job --with-scheduler"
    return "manage.py db_worker --queue-name '*'"


@task()
def run_judge(run_id: int) -> None:
    # The runner, not judges.services: the services queue this task, so importing them back would
    # make a cycle. services.judge_run_execute is the same call for code outside the worker.
    runner.execute(run_id)


def watch_later(run_id: int, *, after: timedelta | None = None, failures: int = 0) -> None:
    """Queue a look at the run one stale time from now (or `after`); any worker takes it.
    Backends that cannot defer a task (the immediate one of the tests, `run_judge --wait`)
    run it inline."""
    if task_backends[DEFAULT_TASK_BACKEND_ALIAS].supports_defer:
        run_after = timezone.now() + (stale_after() if after is None else after)
        watch_run.using(run_after=run_after).enqueue(run_id, failures=failures)


def _watch_again(run_id: int, *, after: timedelta | None = None, failures: int = 0) -> None:
    """Queue the next look, trying again for up to a stale time if the queue is away too (the
    database queue's is the database): a watchdog that could not queue its successor ends the
    chain, and its run would stay "running" for good. A worker whose queue is away has nothing
    else to do meanwhile."""
    deadline = time.monotonic() + stale_after().total_seconds()
    pause = 1.0
    while True:
        try:
            watch_later(run_id, after=after, failures=failures)
            return
        except Exception:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("judge run %s: its next watchdog could not be queued; trying again", run_id, exc_info=True)
            time.sleep(pause)
            pause = min(2 * pause, 10.0)


def resume_stale_runs() -> list[int]:
    """Queue again every running run whose worker went silent (the heartbeat is older than the
    stale time; the worker beats every half second), so a surviving worker resumes it, asking
    only for the votes still missing. Any run's watchdog looks after every run: one live chain
    is enough. Returns the ids of the runs queued again."""
    now = timezone.now()
    resumed = []
    stale = JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING, heartbeat_at__lt=now - stale_after())
    for run_id, heartbeat_at in stale.values_list("pk", "heartbeat_at")[:100]:
        with transaction.atomic():
            # The conditional update decides, if two watchdogs look at once; heartbeat_at of a
            # queued run says since when it waits (/health/ reports one no worker takes).
            if not stale.filter(pk=run_id).update(status=JudgeRun.Status.QUEUED, error="", heartbeat_at=now):
                continue
            log.warning("judge run %s: its worker went silent, queued again to resume", run_id)
            enqueue_on_commit(
                lambda run_id=run_id: run_judge.enqueue(run_id),
                # Still stale: the next look tries again.
                undo=lambda run_id=run_id, heartbeat_at=heartbeat_at: JudgeRun.objects.filter(
                    pk=run_id, status=JudgeRun.Status.QUEUED
                ).update(status=JudgeRun.Status.RUNNING, heartbeat_at=heartbeat_at),
                what=f"resuming judge run #{run_id}",
            )
        resumed.append(run_id)
    return resumed


@task()
def watch_run(run_id: int, failures: int = 0) -> None:
    """A run's watchdog, chained while the run is queued or running: it resumes the runs whose
    worker died (resume_stale_runs). Each look queues exactly one next look, also when it
    failed (the database or the queue away for a while): then sooner, with backoff, so a stalled
    run is resumed soon after the database is back, and the watchdogs never multiply."""
    try:
        resume_stale_runs()
        active = JudgeRun.objects.filter(pk=run_id).active().exists()
    except (DatabaseError, QueueUnavailable):
        log.warning("judge run %s: the watchdog could not look (look %s in a row)", run_id, failures + 1, exc_info=True)
        delay = min(WATCH_RETRY_SECONDS * 2**failures, stale_after().total_seconds())
        _watch_again(run_id, after=timedelta(seconds=delay), failures=min(failures + 1, 30))
        return
    if active:
        _watch_again(run_id)
