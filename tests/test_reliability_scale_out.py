"""Scale-out as docs/DEPLOY.md tells it, on one machine: two gunicorn instances (two workers
each) and two task workers (`manage.py db_worker`) on one fresh database, with the defaults of
the guide (no CACHE_URL: the rate limits count in the database's cache table).

- Entries from one address spread over both instances and all their workers are limited once,
  for the client, not once per worker.
- A judge run whose worker is killed (SIGKILL) is finished by the surviving worker on its own,
  after the stale time, with every planned vote stored once and no operator's `--resume`.

The model is the scriptable JudgeServer in this process, on loopback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest

from tests.judge_server import JudgeServer
from tests.live import db_worker, gunicorn, live_env, manage, prepare, run_django, stop

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow

SLUG = "scale-out"
JUDGE = "scale-out-judge"
QUESTIONS = 20
VOTES_PER_ITEM = 6
TOTAL = QUESTIONS * VOTES_PER_ITEM
STALE_SECONDS = 4
ENTRY_LIMIT = 8
ENTRIES = 30
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def seed() -> None:
    from tests.factories import make_llm_judge, make_question, make_study

    study = make_study(slug=SLUG, votes_per_item=3, target_per_rater=2)
    for n in range(QUESTIONS):
        make_question(study, text=f"Scale question {n}?", a1=f"GOOD answer {n}.", a2=f"Other answer {n}.")
    make_llm_judge(
        name=JUDGE, base_url=os.environ["TEST_JUDGE_URL"], concurrency=2, votes_per_item=VOTES_PER_ITEM,
        max_retries=1, retry_base_seconds=0.1, timeout=10,
    )  # fmt: skip


def report() -> None:
    from django.db.models import Count

    from annotations.models import Rater
    from judges.models import JudgeRun

    run = JudgeRun.objects.filter(judge__name=JUDGE).first()
    votes = run.votes.all() if run else None
    print(
        json.dumps(
            {
                "raters": Rater.objects.filter(study__slug=SLUG).count(),
                "status": run.status if run else None,
                "votes": votes.count() if run else 0,
                "slots": votes.values("item", "round").distinct().count() if run else 0,
                "doubled": votes.values("item", "round").annotate(n=Count("pk")).filter(n__gt=1).count() if run else 0,
                "runs": JudgeRun.objects.filter(judge__name=JUDGE).count(),
            }
        )
    )


def _report(env: dict) -> dict:
    return json.loads(run_django("from tests.test_reliability_scale_out import report; report()", env))


def _enter(base_url: str, participant: str) -> int:
    with httpx.Client(base_url=base_url, timeout=30) as client:
        landing = client.get(f"/s/{SLUG}/")
        csrf = _CSRF.search(landing.text).group(1)
        return client.post(
            f"/s/{SLUG}/", data={"participant_id": participant, "consent": "on", "csrfmiddlewaretoken": csrf}
        ).status_code


@pytest.mark.parametrize("live_database", ["sqlite", "postgres"], indirect=True)
def test_two_web_instances_and_two_workers_share_limits_and_finish_a_killed_worker_s_run(live_database):
    with JudgeServer(delay=0.1) as server, ExitStack() as stack:
        common = {"CACHE_URL": "", "JUDGE_RUN_STALE_SECONDS": str(STALE_SECONDS), "TEST_JUDGE_URL": server.base_url}
        # Web: the test settings (static files without a collectstatic manifest); tasks: the
        # database queue of the production settings.
        web_env = live_env(live_database, RATER_ENTRY_RATE=f"{ENTRY_LIMIT}/day", **common)
        task_env = live_env(live_database, DJANGO_SETTINGS_MODULE="biasstudy.settings", **common)
        prepare(task_env, seed="tests.test_reliability_scale_out:seed")
        webs = [stack.enter_context(gunicorn(web_env, workers=2, threads=4)) for _ in range(2)]

        with ThreadPoolExecutor(max_workers=8) as pool:
            codes = list(pool.map(lambda n: _enter(webs[n % 2], f"S{n:02d}"), range(ENTRIES)))
        assert codes.count(302) == ENTRY_LIMIT, codes
        assert codes.count(429) == ENTRIES - ENTRY_LIMIT, codes
        assert _report(task_env)["raters"] == ENTRY_LIMIT

        queued = manage("run_judge", "--study", SLUG, "--judge", JUDGE, env=task_env)
        assert queued.returncode == 0, queued.stderr
        first = db_worker(task_env)
        second = None
        try:
            deadline = time.monotonic() + 60
            while len(server.log) < TOTAL // 3:
                assert first.poll() is None, first.stderr.read()[-3000:]
                assert time.monotonic() < deadline, "the worker did not start the run"
                time.sleep(0.05)
            second = db_worker(task_env)  # idle: the run is the first one's
            time.sleep(0.8)
            os.kill(first.pid, signal.SIGKILL)
            first.wait(timeout=10)
            killed = _report(task_env)
            assert killed["status"] == "running" and 0 < killed["votes"] < TOTAL, killed
            deadline = time.monotonic() + 90
            while (state := _report(task_env))["status"] != "done":
                assert state["status"] in ("running", "queued"), state
                assert second.poll() is None, second.stderr.read()[-3000:]
                assert time.monotonic() < deadline, f"the surviving worker did not finish the run: {state}"
                time.sleep(0.5)
        finally:
            stop(first)
            if second is not None:
                stop(second)

    assert state["runs"] == 1
    assert state["votes"] == state["slots"] == TOTAL, state
    assert state["doubled"] == 0
