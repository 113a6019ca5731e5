"""The order in which a vote takes its row locks on PostgreSQL: the rater's row, then the lease
(one statement, `FOR UPDATE OF r, l`), as every other transaction of the rater takes them. Taken
the other way round, a vote and the same rater's page in another tab would wait for each other
until PostgreSQL broke the deadlock by failing one of them."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection, transaction

from annotations import assignment
from annotations.models import Lease, Rater, Vote
from tests.factories import make_question, make_rater, make_study

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks: DATABASE_URL does not point to PostgreSQL"),
]


def _someone_waits_for_a_lock(deadline: float) -> None:
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            assert time.monotonic() < deadline, "the vote never waited for the rater's lock"
            time.sleep(0.02)


def test_a_vote_waits_for_the_rater_row_before_it_locks_the_lease():
    study = make_study(votes_per_item=2)
    make_question(study)
    rater = make_rater(study)
    lease = assignment.lease_next(rater=rater)
    locked, failures = threading.Event(), []

    def other_tab() -> None:
        """What the rater's page in another tab does: the rater's row, then the lease."""
        try:
            with transaction.atomic():
                Rater.objects.select_for_update().get(pk=rater.pk)
                locked.set()
                _someone_waits_for_a_lock(time.monotonic() + 10)  # the vote, on the rater's row
                Lease.objects.select_for_update().get(pk=lease.pk)
        except Exception as exc:  # noqa: BLE001 - reported by the test below
            failures.append(exc)
            locked.set()
        finally:
            connection.close()

    tab = threading.Thread(target=other_tab)
    tab.start()
    assert locked.wait(10)
    voter = Rater.objects.select_related("study").get(pk=rater.pk)
    outcome = assignment.vote_record(rater=voter, token=lease.token, choice_shown="first", client_ms=5000)
    tab.join(20)
    assert not failures, failures
    assert outcome.created and Vote.objects.filter(rater=rater).count() == 1
