"""Background tasks: thin wrappers around services, run by the task worker (manage.py db_worker)."""

from django_tasks import task

from judges import runner


@task()
def run_judge(run_id: int) -> None:
    # The runner, not judges.services: the services queue this task, so importing them back would
    # make a cycle. services.judge_run_execute is the same call for code outside the worker.
    runner.execute(run_id)
