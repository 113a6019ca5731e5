"""Twenty raters voting at once against a live server in separate processes (gunicorn, two
worker processes with threads) on a file-based SQLite database, and on PostgreSQL when
DATABASE_URL points to it. Checks: no duplicate votes, no rater sees a question twice, every
item reaches exactly its quota with both display orders equal, resubmissions stored once.

The database is a fresh one made for this test (the server cannot share the test runner's
in-memory database); seeding and checking run in subprocesses through `seed()` and `check()`.
"""

from __future__ import annotations

import json
import logging
import random
import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live import gunicorn, live_env, prepare, run_django

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow
logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request would drown a failure

RATERS = 20
QUESTIONS = 8
QUOTA = 4
TARGET = 4
SLUG = "concurrency"


def seed() -> None:
    """Run in a subprocess against the fresh database: eight questions, each with its control
    and one fake-reference item, so sixteen items need 64 counted votes."""
    from tests.factories import make_question, make_study, make_variant

    study = make_study(slug=SLUG, votes_per_item=QUOTA, target_per_rater=TARGET, lease_seconds=600)
    for n in range(QUESTIONS):
        question = make_question(study, text=f"Concurrent question {n}?", a1=f"Answer one {n}.", a2=f"Answer two {n}.")
        make_variant(question, kind="reference")


def check() -> None:
    """Run in a subprocess after the raid: print what the test asserts on, as JSON."""
    from django.db.models import Count

    from annotations.models import ComparisonItem, Lease, Slot, Vote

    votes = Vote.objects.filter(item__study__slug=SLUG)
    items = []
    for item in ComparisonItem.objects.filter(study__slug=SLUG):
        counted = [v for v in votes.filter(item=item) if v.meta["assignment"]["counted"]]
        closed = Slot.objects.filter(item=item, vote__isnull=False)
        items.append(
            {
                # Every counted vote closes one slot of its order, and only counted votes do.
                "closed": [closed.filter(shown_first="a1").count(), closed.filter(shown_first="a2").count()],
                "closed_by_counted": all(slot.vote.meta["assignment"]["counted"] for slot in closed),
                "slots": Slot.objects.filter(item=item).count(),
                "counted": [sum(v.shown_first == "a1" for v in counted), sum(v.shown_first == "a2" for v in counted)],
            }
        )
    leases = Lease.objects.filter(study__slug=SLUG)
    summary = {
        "items": items,
        "votes": votes.count(),
        "not_familiar": votes.filter(not_familiar=True).count(),
        "duplicate_votes": votes.values("rater", "item").annotate(n=Count("pk")).filter(n__gt=1).count(),
        "repeated_questions": leases.values("rater", "item__question").annotate(n=Count("pk")).filter(n__gt=1).count(),
        "pending_leases": leases.filter(voted_at__isnull=True, released_at__isnull=True).count(),
        "votes_by_rater": sorted(votes.values("rater").annotate(n=Count("pk")).values_list("n", flat=True)),
    }
    print(json.dumps(summary))


@pytest.fixture
def live_server_process(live_database):
    env = live_env(live_database)
    prepare(env, seed="tests.test_rater_concurrency:seed")
    with gunicorn(env) as url:
        yield url, env


_TOKEN = re.compile(r'name="token" value="([^"]+)"')
_QUESTION = re.compile(r'<div [^>]*class="question prose"[^>]*>(.*?)</div>', re.DOTALL)
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def _rater_session(url: str, n: int, *, htmx: bool, not_familiar_first: bool, double_submit: bool) -> dict:
    """One rater's whole visit, with htmx requests or plain form posts; optionally "not familiar"
    on the first item, and the first vote sent twice at once (a double click)."""
    rng = random.Random(n)
    seen: list[str] = []
    not_familiar = 0
    with httpx.Client(base_url=url, timeout=30) as client:
        landing = client.get(f"/s/{SLUG}/")
        if "This study is full" in landing.text:
            return {"rater": n, "seen": seen, "not_familiar": not_familiar, "full": True}
        csrf = _CSRF.search(landing.text).group(1)
        entered = client.post(
            f"/s/{SLUG}/", data={"participant_id": f"R{n:02d}", "consent": "on", "csrfmiddlewaretoken": csrf}
        )
        assert entered.status_code == 302, entered.text[:500]
        headers = {"X-CSRFToken": client.cookies["csrftoken"]}
        if htmx:
            headers["HX-Request"] = "true"
        page = client.get(f"/s/{SLUG}/task/", headers=headers)
        for position in range(TARGET + 1):
            if page.status_code == 302 or "HX-Redirect" in page.headers:
                break
            assert page.status_code == 200, page.text[:500]
            seen.append(_QUESTION.search(page.text).group(1).strip())
            vote = {
                "token": _TOKEN.search(page.text).group(1),
                "choice": rng.choice(["first", "second", "tie"]),
                "client_ms": str(rng.randint(1500, 9000)),
            }
            if position == 0 and not_familiar_first:
                vote["not_familiar"] = "on"
                not_familiar += 1
            if position == 0 and double_submit:
                with ThreadPoolExecutor(2) as pool:
                    twice = [pool.submit(client.post, f"/s/{SLUG}/task/", data=vote, headers=headers) for _ in "12"]
                    response = twice[0].result()
                    assert twice[1].result().status_code in (200, 302)
            else:
                response = client.post(f"/s/{SLUG}/task/", data=vote, headers=headers)
            assert response.status_code in (200, 302), response.text[:500]
            page = response if htmx else client.get(f"/s/{SLUG}/task/", headers=headers)
    return {"rater": n, "seen": seen, "not_familiar": not_familiar, "full": False}


@pytest.mark.parametrize("live_database", ["sqlite", "postgres"], indirect=True)
def test_twenty_raters_at_once_keep_quotas_balance_and_uniqueness(live_server_process):
    url, env = live_server_process
    started = time.monotonic()
    with ThreadPoolExecutor(RATERS) as pool:
        sessions = list(
            pool.map(
                lambda n: _rater_session(
                    url, n, htmx=n % 3 != 0, not_familiar_first=n % 4 == 0, double_submit=n % 5 == 0
                ),
                range(RATERS),
            )
        )
    elapsed = time.monotonic() - started
    # While collecting: never over quota, orders at most one apart.
    during = json.loads(run_django("from tests.test_rater_concurrency import check; check()", env))
    for item in during["items"]:
        assert sum(item["counted"]) <= QUOTA and abs(item["counted"][0] - item["counted"][1]) <= 1, item
        assert item["closed"] == item["counted"] and item["closed_by_counted"], item
    # Slots freed by not-familiar votes after the others had left are taken by latecomers, one at a time.
    for n in range(RATERS, RATERS + 10):
        late = _rater_session(url, n, htmx=True, not_familiar_first=False, double_submit=False)
        sessions.append(late)
        if not late["seen"]:
            break
    # Once every slot has its vote, whoever comes next is told the study is full.
    assert sessions[-1]["full"], sessions[-1]
    summary = json.loads(run_django("from tests.test_rater_concurrency import check; check()", env))

    for session in sessions:
        assert len(session["seen"]) == len(set(session["seen"])), f"rater {session['rater']} saw a question twice"
    assert summary["duplicate_votes"] == 0
    assert summary["repeated_questions"] == 0
    assert summary["pending_leases"] == 0
    assert summary["not_familiar"] == sum(s["not_familiar"] for s in sessions) > 0
    assert len(summary["items"]) == 2 * QUESTIONS
    for item in summary["items"]:
        assert item["counted"] == [QUOTA // 2, QUOTA // 2], item
        assert item["closed"] == item["counted"] and item["closed_by_counted"], item
        assert item["slots"] == QUOTA, item
    assert summary["votes"] == QUOTA * 2 * QUESTIONS + summary["not_familiar"]
    assert max(summary["votes_by_rater"]) <= TARGET
    assert sum(len(s["seen"]) for s in sessions) == summary["votes"]
    assert elapsed < 60, f"took {elapsed:.1f}s"
