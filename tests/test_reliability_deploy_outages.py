"""What a deployment meets when a service is away: the database (the API answers 503 with
Retry-After, as the rater pages do, never 500), Redis as the cache (raters still enter, and
their entry limit still holds: it counts in the database), and PostgreSQL stopped while a judge run is under
way (the run stops with it, and resumes by itself once the database is back: its watchdog
outlives the outage). Redis as the task queue stopped during a start, a resume or a vote
import: tests/test_reliability_queue_outage.py."""

from __future__ import annotations

import time

import pytest
from django.test import Client

from annotations.models import Rater
from tests.factories import make_question, make_study
from tests.live import free_port, gunicorn, live_env
from tests.test_reliability_judge_worker import TOTAL, _report, _wait_for, rq_run_under_way

httpx = pytest.importorskip("httpx")


@pytest.mark.slow
@pytest.mark.parametrize("vendor", ["sqlite", "postgres"])
def test_with_the_database_down_the_api_answers_503_with_retry_after(tmp_path, vendor):
    # Nothing listens on the port, or the file's directory does not exist: every query fails.
    if vendor == "postgres":
        url = f"postgres://biasstudy:biasstudy@127.0.0.1:{free_port()}/biasstudy"
    else:
        url = f"sqlite:///{tmp_path / 'missing-dir' / 'db.sqlite3'}"
    with gunicorn(live_env(url), workers=1, threads=2) as base:
        api = httpx.get(f"{base}/api/v1/studies/", headers={"Authorization": "Token abc123"}, timeout=30)
        rater_page = httpx.get(f"{base}/s/any/", timeout=30)
        health = httpx.get(f"{base}/health/", timeout=30)
    assert api.status_code == 503, api.text
    assert api.headers["Retry-After"] == "5"
    assert api.headers["Content-Type"] == "application/json"
    assert "try again" in api.json()["detail"]
    assert rater_page.status_code == 503 and rater_page.headers["Retry-After"]
    # The load balancer learns that this instance cannot serve, and nothing about the database.
    assert health.status_code == 503 and health.json() == {"status": "unhealthy"}


def test_with_the_redis_cache_down_raters_still_enter_and_their_entry_limit_still_holds(db, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        }
    }
    settings.RATER_ENTRY_RATE = (1, 60)
    study = make_study(slug="no-redis")
    make_question(study)
    entered = Client().post("/s/no-redis/", {"participant_id": "R1", "consent": "on"})
    assert entered.status_code == 302 and entered["Location"] == "/s/no-redis/task/"
    refused = Client().post("/s/no-redis/", {"participant_id": "R2", "consent": "on"})
    assert refused.status_code == 429 and "Please try again in a moment" in refused.content.decode()
    assert list(Rater.objects.values_list("participant_id", flat=True)) == ["R1"]


OUTAGE_STALE_SECONDS = 3  # JUDGE_RUN_STALE_SECONDS: the watchdog looks every 3 s
OUTAGE_SECONDS = 10  # longer than two looks: at least one of them meets the database away


@pytest.mark.slow
def test_a_run_stopped_by_a_database_outage_resumes_by_itself_once_the_database_is_back(tmp_path):
    with rq_run_under_way(tmp_path, stale_seconds=OUTAGE_STALE_SECONDS) as (cluster, server, env, log):
        cluster.stop()  # longer than the stale time: the worker gives up, the run "running" with a stale heartbeat
        time.sleep(OUTAGE_SECONDS)
        asked_in_outage = len(server.log)
        cluster.start()
        stopped = _report(env)
        assert stopped["status"] == "running" and stopped["votes"] < TOTAL, stopped
        final = _wait_for(env, lambda s: s["status"] in ("done", "failed"), timeout=45)

    assert final["status"] == "done", (final, log.read_text()[-3000:])
    assert final["runs"] == 1
    assert final["votes"] == final["slots"] == final["ok"] == TOTAL, final
    assert final["doubled"] == 0
    assert len(server.log) > asked_in_outage  # resumed: the missing votes were asked for
    # The replies received but not stored when the worker gave up were kept on disk and stored
    # by the resume, which did not ask for them again: one request per vote.
    assert len(server.log) == TOTAL, (len(server.log), TOTAL)
    assert not any((tmp_path / "replies").glob("*")), "the kept replies were not stored"
