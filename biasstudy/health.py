"""/health/: is this instance able to serve? Checks the database, the task queue and what the
installed apps add (judge runs).

Load balancers poll it; it answers 200 when everything is fine and 503 when not. Anonymous
callers (the load balancer) get only {"status": "ok"} or {"status": "unhealthy"}; signed-in
staff also see what each check found (the database vendor, the queue, runs whose worker went
silent). A balancer checking each backend by its address, whatever DJANGO_ALLOWED_HOSTS says,
is answered too (HealthCheckHostMiddleware).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from django.apps import apps
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


def _app_checks() -> list[tuple[str, Callable[[], dict]]]:
    """The checks the installed apps add: an app's AppConfig may name its own in a
    `health_checks()` method ({name: check}), so that this module imports no app (the judges
    app adds its runs' check, judges.apps)."""
    checks = []
    for config in apps.get_app_configs():
        provide = getattr(config, "health_checks", None)
        if provide is not None:
            checks += provide().items()
    return checks


def _busy_workers() -> bool:
    """Whether a worker is alive and busy with a long task, by the installed apps' word: an
    AppConfig may say so in a `health_busy_workers()` method (the judges app: a judge run is
    running with a fresh heartbeat, judges.apps)."""
    return any(
        config.health_busy_workers()
        for config in apps.get_app_configs()
        if getattr(config, "health_busy_workers", None) is not None
    )


def _is_staff(request: HttpRequest) -> bool:
    try:
        return bool(getattr(request, "user", None) and request.user.is_staff)
    except Exception:  # noqa: BLE001 - no database, no session: not known as staff
        return False


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    checks = {}
    for name, check in [("database", _check_database), ("tasks", _check_tasks), *_app_checks()]:
        if name not in ("database", "tasks") and not checks["database"]["ok"]:
            continue  # the apps' checks read the database
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
