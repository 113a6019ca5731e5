"""/health/: is this instance able to serve? Checks the database, the task queue and judge runs.

Load balancers poll it; it answers 200 when everything is fine and 503 when not. Anonymous
callers (the load balancer) get only {"status": "ok"} or {"status": "unhealthy"}; signed-in
staff also see what each check found (the database vendor, the queue, runs whose worker went
silent). A balancer checking each backend by its address, whatever DJANGO_ALLOWED_HOSTS says,
is answered too (HealthCheckHostMiddleware).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.core.exceptions import DisallowedHost
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

# A task waiting longer than this means no worker is taking work.
STALE_AFTER = timedelta(minutes=5)


def _check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
        cursor.fetchone()
    return {"ok": True, "vendor": connection.vendor}


def _check_tasks() -> dict:
    from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, task_backends

    backend = type(task_backends[DEFAULT_TASK_BACKEND_ALIAS]).__name__
    report: dict = {"ok": True, "backend": backend}
    if backend == "DatabaseBackend":
        from django_tasks_db.models import DBTaskResult

        waiting = DBTaskResult.objects.ready()
        report["queued"] = waiting.count()
        oldest = waiting.order_by("enqueued_at").values_list("enqueued_at", flat=True).first()
        if oldest is not None and timezone.now() - oldest > STALE_AFTER:
            if _busy_workers():
                # A worker runs one task at a time: while its judge run beats, the run's own
                # watchdog (and anything queued after it) waits behind it. With one worker, as
                # start.sh starts, every run longer than STALE_AFTER was reported as no worker.
                report["busy"] = "the tasks wait for a worker busy with a judge run"
            else:
                report.update(ok=False, error=f"a task has waited since {oldest.isoformat()}: is a worker running?")
    elif backend == "RQBackend":
        import django_rq

        django_rq.get_connection().ping()
    return report


def _busy_workers() -> bool:
    """Whether a worker is alive and busy: a judge run is running with a fresh heartbeat."""
    from judges.models import JudgeRun, stale_after

    fresh = timezone.now() - stale_after()
    return JudgeRun.objects.filter(status=JudgeRun.Status.RUNNING, heartbeat_at__gte=fresh).exists()


def _check_judge_runs() -> dict:
    """Running judge runs whose worker has not written for twice the stale time: the watchdog
    (judges.tasks.watch_run) should have resumed them after one, so no worker is taking them.
    And queued runs no worker took for as long as a task may wait (STALE_AFTER, or twice the
    stale time if longer): no worker is running, or the run's job is lost (Redis restarted
    without its data, or the queue refused the job and the run could not be undone either).
    A queued run's heartbeat_at is when it was queued; resuming it queues it again."""
    from judges.models import JudgeRun, stale_after

    now = timezone.now()
    runs = JudgeRun.objects.order_by("pk")
    stalled = list(
        runs.filter(status=JudgeRun.Status.RUNNING, heartbeat_at__lt=now - 2 * stale_after()).values_list(
            "pk", flat=True
        )[:20]
    )
    untaken = list(
        runs.filter(
            status=JudgeRun.Status.QUEUED, heartbeat_at__lt=now - max(STALE_AFTER, 2 * stale_after())
        ).values_list("pk", flat=True)[:20]
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


def _is_staff(request: HttpRequest) -> bool:
    try:
        return bool(getattr(request, "user", None) and request.user.is_staff)
    except Exception:  # noqa: BLE001 - no database, no session: not known as staff
        return False


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    checks = {}
    for name, check in (("database", _check_database), ("tasks", _check_tasks), ("judge_runs", _check_judge_runs)):
        if name == "judge_runs" and not checks["database"]["ok"]:
            continue
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - any failure is the answer
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    healthy = all(check["ok"] for check in checks.values())
    body = {"status": "ok" if healthy else "unhealthy"}
    if _is_staff(request):
        body.update(checks)
    return JsonResponse(body, status=200 if healthy else 503)


class HealthCheckHostMiddleware:
    """First in MIDDLEWARE: a load balancer asks each backend for /health/ by its address
    (Host: 10.0.0.5:8000), which is not among DJANGO_ALLOWED_HOSTS. Only for that path, only
    the anonymous answer, instead of 400 DisallowedHost; every other request is checked as usual."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info == "/health/":
            try:
                request.get_host()
            except DisallowedHost:
                return health(request)
        return self.get_response(request)
