"""What a deployment meets when a service is away: the database (the API answers 503 with
Retry-After, as the rater pages do, never 500) and Redis as the cache (a rater entering gets
the "try again" page, not a server error)."""

from __future__ import annotations

import pytest
from django.test import Client

from annotations.models import Rater
from tests.factories import make_question, make_study
from tests.live import free_port, gunicorn, live_env

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


def test_with_the_redis_cache_down_a_rater_entering_gets_try_again_not_500(db, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/0",  # nothing listens there
        }
    }
    study = make_study(slug="no-redis")
    make_question(study)
    response = Client().post("/s/no-redis/", {"participant_id": "R1", "consent": "on"})
    assert response.status_code == 503
    assert response["Retry-After"] == "5"
    assert "Please try again in a moment" in response.content.decode()
    page = response.content.decode()
    assert "reload the page" in page and "answer" not in page  # entering, nothing answered yet
    assert not Rater.objects.exists()
