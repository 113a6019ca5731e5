"""/health/: is this instance able to serve? Checks the database and the task queue.

Load balancers poll it; it answers 200 with a JSON body when everything is fine and 503 naming
what is not. It shows no data, so it needs no login.
"""

from __future__ import annotations

from datetime import timedelta

from django.db import connection
from django.http import HttpRequest, JsonResponse
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
            report.update(ok=False, error=f"a task has waited since {oldest.isoformat()}: is a worker running?")
    elif backend == "RQBackend":
        import django_rq

        django_rq.get_connection().ping()
    return report


@never_cache
@require_GET
def health(request: HttpRequest) -> JsonResponse:
    checks = {}
    for name, check in (("database", _check_database), ("tasks", _check_tasks)):
        try:
            checks[name] = check()
        except Exception as exc:  # noqa: BLE001 - any failure is the answer
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    healthy = all(check["ok"] for check in checks.values())
    return JsonResponse({"status": "ok" if healthy else "unhealthy", **checks}, status=200 if healthy else 503)
