"""The rater pages limit entries per client address and votes per rater: over the rate
a 429 with Retry-After and a friendly "try again", nothing stored."""

import re

import pytest
from django.test import Client

from annotations import ratelimit
from annotations.models import Rater, RequestCount, Vote
from tests.factories import make_question, make_study

_TOKEN = re.compile(r'name="token" value="([^"]+)"')


@pytest.fixture
def limited(settings, db):
    settings.RATER_ENTRY_RATE = (2, 60)
    settings.RATER_VOTE_RATE = (2, 60)
    study = make_study(slug="limits", votes_per_item=3, target_per_rater=5)
    for _ in range(5):
        make_question(study)
    return study


def _enter(client: Client, participant: str, **extra):
    return client.post("/s/limits/", {"participant_id": participant, "consent": "on"}, **extra)


def test_entries_over_the_rate_from_one_address_get_a_429_and_create_no_rater(limited):
    assert _enter(Client(), "E1").status_code == 302
    assert _enter(Client(), "E2").status_code == 302
    refused = _enter(Client(), "E3")
    assert refused.status_code == 429
    assert 1 <= int(refused["Retry-After"]) <= 60
    page = refused.content.decode()
    assert "Please try again in a moment" in page and "started this study from your network" in page
    assert "answer" not in page  # nobody has answered anything yet
    assert not Rater.objects.filter(participant_id="E3").exists()
    # Another address is counted on its own.
    assert _enter(Client(REMOTE_ADDR="10.1.2.3"), "E4").status_code == 302


def test_behind_the_proxy_the_address_it_appended_is_counted_not_the_client_s_claims(limited, settings):
    settings.BEHIND_PROXY = True
    for n in range(2):
        assert _enter(Client(), f"P{n}", HTTP_X_FORWARDED_FOR=f"1.1.1.{n}, 203.0.113.7").status_code == 302
    # Rotating the part the client wrote does not help; the proxy's own entry is the key.
    assert _enter(Client(), "P3", HTTP_X_FORWARDED_FOR="9.9.9.9, 203.0.113.7").status_code == 429
    assert _enter(Client(), "P4", HTTP_X_FORWARDED_FOR="203.0.113.8").status_code == 302


@pytest.mark.parametrize("htmx", [False, True])
def test_votes_over_the_rate_get_a_429_and_are_not_stored(limited, htmx):
    client = Client()
    assert _enter(client, "V1").status_code == 302
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    for _ in range(2):
        page = client.get("/s/limits/task/", **headers).content.decode()
        vote = {"token": _TOKEN.search(page).group(1), "choice": "tie", "client_ms": "5000"}
        assert client.post("/s/limits/task/", vote, **headers).status_code in (200, 302)
    page = client.get("/s/limits/task/", **headers).content.decode()
    vote = {"token": _TOKEN.search(page).group(1), "choice": "tie", "client_ms": "5000"}
    refused = client.post("/s/limits/task/", vote, **headers)
    assert refused.status_code == 429
    assert int(refused["Retry-After"]) >= 1
    assert "press your choice again" in refused.content.decode()
    if htmx:
        assert refused["HX-Retarget"] == "#task-alert"
    assert Vote.objects.count() == 2
    # Another rater is not slowed down by this one.
    other = Client(REMOTE_ADDR="10.9.9.9")
    assert _enter(other, "V2").status_code == 302
    page = other.get("/s/limits/task/").content.decode()
    vote = {"token": _TOKEN.search(page).group(1), "choice": "first", "client_ms": "5000"}
    assert other.post("/s/limits/task/", vote).status_code == 302


def test_the_window_ends_and_counting_starts_again(db):
    rate = (2, 60)
    assert ratelimit.hit("t", "k", rate=rate, now=120.0) is None
    assert ratelimit.hit("t", "k", rate=rate, now=150.0) is None
    assert ratelimit.hit("t", "k", rate=rate, now=170.5) == 10
    assert ratelimit.hit("t", "k", rate=rate, now=175.0) == 5
    # A refused request takes no place: the count stays at the limit.
    assert RequestCount.objects.get(scope="t", key="k").count == 2
    assert ratelimit.hit("t", "k", rate=rate, now=180.0) is None
    # The ended window's counter went when the new one began; another key's is its own.
    assert list(RequestCount.objects.values_list("window_start", "count")) == [(180, 1)]
    assert ratelimit.hit("t", "other", rate=rate, now=181.0) is None
    assert ratelimit.hit("t", "k", rate=(0, 60), now=182.0) == 58  # a limit of 0 lets none through


def test_two_workers_counting_the_same_client_at_once_let_through_exactly_the_limit(transactional_db):
    # Twelve threads, each its own database connection (as gunicorn's workers are), hit one
    # key at once: the conditional update lets exactly the limit through, whichever wins.
    import threading

    from django.db import connection

    if connection.vendor == "sqlite":
        # The test database is SQLite's shared in-memory one, whose table locks do not wait;
        # on a file, as served, test_reliability_scale_out checks it with gunicorn's workers.
        pytest.skip("threads on the in-memory SQLite test database fail on table locks")

    rate, results, start = (5, 60), [], threading.Barrier(12)

    def one() -> None:
        start.wait()
        try:
            results.append(ratelimit.hit("race", "k", rate=rate, now=600.0))
        finally:
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(None) == 5 and len(results) == 12
    assert RequestCount.objects.get(scope="race", key="k").count == 5
