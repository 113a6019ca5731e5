"""Background tasks: thin wrappers around services, run by the task worker (worker_command())."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, task, task_backends

from judges import runner
from judges.models import JudgeRun, stale_after

log = logging.getLogger(__name__)


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


def watch_later(run_id: int) -> None:
    """Queue a look at the run one stale time from now (any worker takes it). Backends that
    cannot defer a task (the immediate one of the tests, `run_judge --wait`) run it inline."""
    if task_backends[DEFAULT_TASK_BACKEND_ALIAS].supports_defer:
        watch_run.using(run_after=timezone.now() + stale_after()).enqueue(run_id)


@task()
def watch_run(run_id: int) -> None:
    """A run's watchdog, chained while the run is queued or running. When its worker died (the
    heartbeat went stale: the worker beats every half second), the run is queued again and a
    surviving worker resumes it, asking only for the votes still missing."""
    now = timezone.now()
    with transaction.atomic():
        resumed = JudgeRun.objects.filter(
            pk=run_id, status=JudgeRun.Status.RUNNING, heartbeat_at__lt=now - stale_after()
        ).update(status=JudgeRun.Status.QUEUED, error="")
        if resumed:
            log.warning("judge run %s: its worker went silent, queued again to resume", run_id)
            transaction.on_commit(lambda: run_judge.enqueue(run_id))
    if JudgeRun.objects.filter(pk=run_id).active().exists():
        watch_later(run_id)
