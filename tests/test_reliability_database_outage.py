"""The database goes away for a moment while a rater votes: they get a friendly 503 "try again"
(an alert in the task form with htmx), no traceback; sending the same answer again stores it
once. On PostgreSQL the server's connections are terminated (as in a database restart); on
SQLite another process holds the write lock past the busy timeout.

gunicorn runs one worker with one thread and keeps its connection (DATABASE_CONN_MAX_AGE) with
the health check off, so the request after the cut really meets the dead connection.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from tests.live import gunicorn, is_postgres, live_env, prepare, run_django

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow

SLUG = "outage"
_TOKEN = re.compile(r'name="token" value="([^"]+)"')
_QUESTION = re.compile(r'<div [^>]*class="question prose"[^>]*>(.*?)</div>', re.DOTALL)


def seed() -> None:
    from tests.factories import make_question, make_study

    study = make_study(slug=SLUG, votes_per_item=2, target_per_rater=3)
    for n in range(3):
        make_question(study, text=f"Outage question {n}?")


def votes() -> None:
    from annotations.models import Lease, Vote

    print(
        json.dumps(
            {
                "votes": list(
                    Vote.objects.filter(item__study__slug=SLUG).values_list("rater__participant_id", "item_id")
                ),
                "voted_tokens": list(Lease.objects.filter(voted_at__isnull=False).values_list("token", flat=True)),
            }
        )
    )


def _cut(database_url: str):
    """Make the next write fail; returns the function that ends the outage."""
    if is_postgres(database_url):
        import psycopg

        with psycopg.connect(database_url, autocommit=True) as conn:
            killed = conn.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        assert killed >= 1, "the server had no connection to cut"
        return lambda: None
    locker = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")

    def end() -> None:
        locker.execute("ROLLBACK")
        locker.close()

    return end


@pytest.mark.parametrize(
    ("live_database", "htmx"),
    [("sqlite", True), ("sqlite", False), ("postgres", True)],  # the plain form's page once is enough
    ids=["sqlite-htmx", "sqlite-form", "postgres-htmx"],
    indirect=["live_database"],
)
def test_a_vote_during_a_database_outage_gets_a_try_again_and_the_retry_is_stored_once(live_database, htmx):
    env = live_env(
        live_database, DATABASE_CONN_MAX_AGE="600", DATABASE_CONN_HEALTH_CHECKS="0", DATABASE_SQLITE_TIMEOUT="1"
    )
    prepare(env, seed="tests.test_reliability_database_outage:seed")
    with gunicorn(env, workers=1, threads=1) as url, httpx.Client(base_url=url, timeout=30) as client:
        client.get(f"/s/{SLUG}/")
        entered = client.post(
            f"/s/{SLUG}/",
            data={"participant_id": "OUT1", "consent": "on", "csrfmiddlewaretoken": client.cookies["csrftoken"]},
        )
        assert entered.status_code == 302
        headers = {"X-CSRFToken": client.cookies["csrftoken"], **({"HX-Request": "true"} if htmx else {})}
        page = client.get(f"/s/{SLUG}/task/", headers=headers)
        first_question = _QUESTION.search(page.text).group(1)
        vote = {"token": _TOKEN.search(page.text).group(1), "choice": "first", "client_ms": "5000"}

        end_outage = _cut(live_database)
        try:
            failed = client.post(f"/s/{SLUG}/task/", data=vote, headers=headers)
        finally:
            end_outage()
        assert failed.status_code == 503
        assert failed.headers["Retry-After"].isdigit()
        assert "not</strong> saved yet" in failed.text and "press your choice again" in failed.text
        assert "Traceback" not in failed.text and "OperationalError" not in failed.text
        if htmx:
            assert failed.headers["HX-Retarget"] == "#task-alert"
            assert failed.headers["HX-Reswap"] == "innerHTML"
            assert "<html" not in failed.text
        else:
            assert "<h1>Please try again in a moment</h1>" in failed.text

        retried = client.post(f"/s/{SLUG}/task/", data=vote, headers=headers)
        assert retried.status_code in (200, 302), retried.text[:500]
        again = client.post(f"/s/{SLUG}/task/", data=vote, headers=headers)  # an impatient second click
        assert again.status_code in (200, 302)
        following = client.get(f"/s/{SLUG}/task/", headers=headers)
        assert _QUESTION.search(following.text).group(1) != first_question

    stored = json.loads(run_django("from tests.test_reliability_database_outage import votes; votes()", env))
    assert len(stored["votes"]) == 1, stored
    assert stored["voted_tokens"] == [vote["token"]]
