"""What /health/ (biasstudy.health) asks of the judges app, named in JudgesConfig.health_checks."""

from __future__ import annotations

from django.utils import timezone

from biasstudy.health import STALE_AFTER
from judges.models import JudgeRun, stale_after


def judge_runs() -> dict:
    """Running judge runs whose worker has not written for twice the stale time: the watchdog
    (judges.tasks.watch_run) should have resumed them after one, so no worker is taking them.
    And queued runs no worker took for as long as a task may wait (STALE_AFTER, or twice the
    stale time if longer): no worker is running, or the run's job is lost (Redis restarted
    without its data, or the queue refused the job and the run could not be undone either).
    A queued run's heartbeat_at is when it was queued; resuming it queues it again."""
    now = timezone.now()
    runs = JudgeRun.objects.order_by("pk")
    stalled = list(
        runs.filter(status=JudgeRun.Status.RUNNING, heartbeat_at__lt=now - 2 * stale_after()).values_list(
            "pk", flat=True
        )[:20]
    )
    # Queued runs wait behind a run a live worker is busy with (JudgeRun.waiting_behind).
    untaken = (
        []
        if busy_with_a_run()
        else list(
            runs.filter(
                status=JudgeRun.Status.QUEUED, heartbeat_at__lt=now - max(STALE_AFTER, 2 * stale_after())
            ).values_list("pk", flat=True)[:20]
        )
    )
    report: dict = {"ok": not (stalled or untaken)}
    if stalled:
        report.update(stalled_runs=stalled, error="judge runs stopped making progress: is a worker running?")
    if untaken:
        report["untaken_runs"] = untaken
        report["error"] = "; ".join(
            filter(None, [report.get("error"), "queued judge runs no worker took: is a worker running? (resume them)"])
        )
    return report


def busy_with_a_run() -> bool:
    """Whether a worker is alive and busy: a judge run is running with a fresh heartbeat. A worker
    runs one task at a time, so the run's own watchdog (and anything queued after it) waits
    behind it: with one worker, as start.sh starts, every run longer than STALE_AFTER was
    reported as no worker."""
    fresh = timezone.now() - stale_after()
    return JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING, heartbeat_at__gte=fresh).exists()
