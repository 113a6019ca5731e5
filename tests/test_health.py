from datetime import timedelta

from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from judges.models import JudgeRun, stale_after
from tests.factories import make_judge, make_study


def test_health_answers_ok_when_the_database_and_queue_work(admin_client, db, settings):
    response = admin_client.get("/health/")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok" and body["database"]["ok"] and body["tasks"]["ok"]


def queued_long_ago(task_path: str, args: list, settings, *, waited: timedelta) -> None:
    """A task in the database queue that no worker has taken for ``waited``."""
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    DBTaskResult.objects.create(
        args_kwargs={"args": args, "kwargs": {}},
        task_path=task_path,
        backend_name="default",
        run_after=timezone.now(),
        priority=0,
        queue_name="default",
    )
    DBTaskResult.objects.update(enqueued_at=timezone.now() - waited)


def test_health_reports_a_queue_that_no_worker_drains(admin_client, db, settings):
    queued_long_ago("biasstudy.health.health", [], settings, waited=timedelta(hours=1))
    response = admin_client.get("/health/")
    assert response.status_code == 503
    assert "worker" in response.json()["tasks"]["error"]


def test_health_is_not_cached(client, db):
    assert "no-cache" in client.get("/health/")["Cache-Control"]


def test_tasks_waiting_behind_a_running_judge_run_are_not_a_missing_worker(admin_client, db, settings):
    # One worker (start.sh starts one) runs one task at a time: during a judge run longer than
    # 5 minutes its own watchdog waits behind it, and /health/ answered 503 "is a worker running?".
    study = make_study(slug="busy")
    run = JudgeRun.objects.create(study=study, judge=make_judge(kind="llm"), status=JudgeRun.Status.RUNNING)
    queued_long_ago("judges.tasks.watch_run", [run.pk], settings, waited=timedelta(minutes=30))

    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now())  # its worker is alive
    response = admin_client.get("/health/")
    assert response.status_code == 200, response.json()
    assert "busy" in response.json()["tasks"]

    # The run's worker silent too: nobody is taking work.
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - 3 * stale_after())
    response = admin_client.get("/health/")
    assert response.status_code == 503 and "worker" in response.json()["tasks"]["error"]
