"""The Redis queue's dashboard (django-rq's admin pages, installed with TASKS_BACKEND=RQ only) is
for superusers and staff with django-rq's "Access admin page" permission: a staff member without
it, even with every view permission, can neither read it nor empty a queue.

The app is installed by the settings when the process starts, so the requests are made in a
subprocess with the RQ backend, against Debian's redis-server on a free loopback port."""

from __future__ import annotations

import json

import pytest

from tests.live import live_env, prepare, run_django
from tests.test_reliability_judge_worker import redis_url  # noqa: F401 - the fixture

DASHBOARD = "/admin/django_rq/dashboard/"


def requests() -> None:
    """Run in the subprocess: each persona's answers, and the jobs left in the queue, as JSON."""
    from django.test import Client
    from django.test.utils import setup_test_environment
    from django_rq import get_queue

    from tests.factories import make_staff, make_staff_with, view_permissions

    setup_test_environment()
    queue = get_queue("default")
    queue.enqueue("builtins.print", "a queued job")
    personas = {
        "superuser": make_staff(),
        "with the permission": make_staff_with("django_rq.admin"),
        "view only": make_staff_with(*view_permissions()),
        "no permissions": make_staff_with(),
    }
    answers = {}
    for name, user in personas.items():
        client = Client()
        client.force_login(user)
        answers[name] = {
            "dashboard": client.get(DASHBOARD).status_code,
            "queue": client.get(f"{DASHBOARD}queues/0/").status_code,
            "stats": client.get(f"{DASHBOARD}stats.json").status_code,
            "index lists it": DASHBOARD in client.get("/admin/").content.decode(),
        }
        if name in ("view only", "no permissions"):  # the others could: it would empty the queue
            answers[name]["empty"] = client.post(f"{DASHBOARD}queues/0/empty/").status_code
    answers["jobs left"] = queue.count
    print(json.dumps(answers))


@pytest.mark.parametrize("live_database", ["sqlite"], indirect=True)
def test_only_superusers_and_holders_of_its_permission_use_the_rq_dashboard(live_database, redis_url):  # noqa: F811
    env = live_env(live_database, TASKS_BACKEND="django_tasks_rq.RQBackend", REDIS_URL=redis_url)
    prepare(env)
    answers = json.loads(run_django("from tests.test_security_rq_dashboard import requests; requests()", env))

    for allowed in ("superuser", "with the permission"):
        assert answers[allowed] | {"empty": 200} == {
            "dashboard": 200, "queue": 200, "stats": 200, "index lists it": True, "empty": 200,
        }, allowed  # fmt: skip
    for refused in ("view only", "no permissions"):
        assert answers[refused] == {
            "dashboard": 403, "queue": 403, "stats": 403, "index lists it": False, "empty": 403,
        }, refused  # fmt: skip
    assert answers["jobs left"] == 1
