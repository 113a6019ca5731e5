"""Load: 32 raters at once, 50 votes each, against gunicorn on a fresh database (SQLite file,
and PostgreSQL when DATABASE_URL points to it). Every vote is stored exactly once, no rater sees
a question twice, quotas and display-order balance hold, and no request fails with a 5xx.
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
logging.getLogger("httpx").setLevel(logging.WARNING)

RATERS = 32
VOTES = 50
# 64 questions, each with its control and one fake-reference item: 128 items x 14 = 1792 vote
# slots for 1600 votes, and each rater has 64 questions for 50 items, one item per question.
QUESTIONS = 64
QUOTA = 14
SLUG = "load"

_TOKEN = re.compile(r'name="token" value="([^"]+)"')
_QUESTION = re.compile(r'<div [^>]*class="question prose"[^>]*>(.*?)</div>', re.DOTALL)
_CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def seed() -> None:
    from tests.factories import make_question, make_study, make_variant

    study = make_study(slug=SLUG, votes_per_item=QUOTA, target_per_rater=VOTES, lease_seconds=600)
    for n in range(QUESTIONS):
        question = make_question(study, text=f"Load question {n}?", a1=f"Answer one {n}.", a2=f"Answer two {n}.")
        make_variant(question, kind="reference")


def check() -> None:
    """Printed as JSON for the test: what the database holds after the load."""
    from django.db.models import Count, Q

    from annotations.models import ComparisonItem, Lease, Vote

    votes = Vote.objects.filter(item__study__slug=SLUG)
    items = ComparisonItem.objects.filter(study__slug=SLUG).annotate(
        a1=Count("votes", filter=Q(votes__shown_first="a1", votes__meta__assignment__counted=True), distinct=True),
        a2=Count("votes", filter=Q(votes__shown_first="a2", votes__meta__assignment__counted=True), distinct=True),
        closed_a1=Count("slots", filter=Q(slots__shown_first="a1", slots__vote__isnull=False), distinct=True),
        closed_a2=Count("slots", filter=Q(slots__shown_first="a2", slots__vote__isnull=False), distinct=True),
    )
    leases = Lease.objects.filter(study__slug=SLUG)
    print(
        json.dumps(
            {
                "votes": votes.count(),
                "duplicates": votes.values("rater", "item").annotate(n=Count("pk")).filter(n__gt=1).count(),
                "repeated_questions": leases.values("rater", "item__question")
                .annotate(n=Count("pk"))
                .filter(n__gt=1)
                .count(),
                "items": [[i.a1, i.a2, i.closed_a1, i.closed_a2] for i in items],
                "by_rater": sorted(votes.values("rater").annotate(n=Count("pk")).values_list("n", flat=True)),
                "uncounted": votes.filter(meta__assignment__counted=False).count(),
            }
        )
    )


def _rater(url: str, n: int) -> dict:
    """One rater's 50 votes with htmx (each answer returns the next item's fragment)."""
    rng = random.Random(n)
    seen, statuses, submitted = [], [], []
    with httpx.Client(base_url=url, timeout=60) as client:
        landing = client.get(f"/s/{SLUG}/")
        csrf = _CSRF.search(landing.text).group(1)
        entered = client.post(
            f"/s/{SLUG}/", data={"participant_id": f"L{n:02d}", "consent": "on", "csrfmiddlewaretoken": csrf}
        )
        statuses.append(entered.status_code)
        headers = {"X-CSRFToken": client.cookies["csrftoken"], "HX-Request": "true"}
        page = client.get(f"/s/{SLUG}/task/", headers=headers)
        statuses.append(page.status_code)
        while page.status_code == 200 and "HX-Redirect" not in page.headers:
            seen.append(_QUESTION.search(page.text).group(1).strip())
            token = _TOKEN.search(page.text).group(1)
            vote = {"token": token, "choice": rng.choice(["first", "second", "tie"]), "client_ms": "6000"}
            page = client.post(f"/s/{SLUG}/task/", data=vote, headers=headers)
            statuses.append(page.status_code)
            submitted.append(token)
        final = page.headers.get("HX-Redirect", "")
    return {"seen": seen, "statuses": statuses, "submitted": submitted, "final": final}


@pytest.mark.parametrize("live_database", ["sqlite", "postgres"], indirect=True)
def test_thirty_two_raters_voting_fifty_times_each_lose_nothing_and_double_nothing(live_database):
    env = live_env(live_database)
    prepare(env, seed="tests.test_reliability_load:seed")
    with gunicorn(env, workers=2, threads=16) as url:
        started = time.monotonic()
        with ThreadPoolExecutor(RATERS) as pool:
            raters = list(pool.map(lambda n: _rater(url, n), range(RATERS)))
        elapsed = time.monotonic() - started
    summary = json.loads(run_django("from tests.test_reliability_load import check; check()", env))

    statuses = [status for rater in raters for status in rater["statuses"]]
    assert not [s for s in statuses if s >= 500], "server errors under load"
    assert set(statuses) <= {200, 302}, sorted(set(statuses))
    for rater in raters:
        assert len(rater["seen"]) == VOTES, rater["final"]
        assert len(set(rater["seen"])) == VOTES, "a rater saw a question twice"
        assert rater["final"].endswith(f"/s/{SLUG}/done/")
        assert len(set(rater["submitted"])) == VOTES
    assert summary["votes"] == RATERS * VOTES
    assert summary["duplicates"] == 0
    assert summary["repeated_questions"] == 0
    assert summary["uncounted"] == 0
    assert summary["by_rater"] == [VOTES] * RATERS
    for a1, a2, closed_a1, closed_a2 in summary["items"]:
        assert a1 + a2 <= QUOTA
        assert abs(a1 - a2) <= 1, "display orders out of balance"
        assert (closed_a1, closed_a2) == (a1, a2), "the item's closed slots disagree with its counted votes"
    # Speed is the benchmarks' business (bench/); this test is about losing and doubling nothing.
    print(f"{RATERS * VOTES} votes in {elapsed:.1f}s: {RATERS * VOTES / elapsed:.0f} votes/s")
