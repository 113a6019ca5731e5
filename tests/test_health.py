from datetime import timedelta

from django.utils import timezone
from django_tasks_db.models import DBTaskResult


def test_health_answers_ok_when_the_database_and_queue_work(admin_client, db, settings):
    response = admin_client.get("/health/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"]["ok"] and body["tasks"]["ok"]


def test_health_reports_a_queue_that_no_worker_drains(admin_client, db, settings):
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    DBTaskResult.objects.create(
        args_kwargs={"args": [], "kwargs": {}},
        task_path="biasstudy.health.health",
        backend_name="default",
        run_after=timezone.now(),
        priority=0,
        queue_name="default",
    )
    DBTaskResult.objects.update(enqueued_at=timezone.now() - timedelta(hours=1))
    response = admin_client.get("/health/")
    assert response.status_code == 503
    assert "worker" in response.json()["tasks"]["error"]


def test_health_is_not_cached(client, db):
    assert "no-cache" in client.get("/health/")["Cache-Control"]
