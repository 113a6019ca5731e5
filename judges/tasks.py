"""Background tasks: thin wrappers around services, run by the task worker (manage.py db_worker)."""

from django_tasks import task

from judges import services


@task()
def run_judge(run_id: int) -> None:
    services.judge_run_execute(run_id=run_id)
