"""Row locks on PostgreSQL. A vote locks the rater's row before it touches the lease, as every
other transaction of the rater does: taken the other way round, a vote and the same rater's page
in another tab would wait for each other until PostgreSQL broke the deadlock by failing one of
them. A claim skips slots another transaction holds (SKIP LOCKED): it never waits."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from django.db import connection, transaction

from annotations import assignment
from annotations.models import ComparisonItem, Lease, Rater, Slot, Vote
from tests.factories import make_question, make_rater, make_study

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        connection.vendor != "postgresql", reason="row locks: DATABASE_URL does not point to PostgreSQL"
    ),
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


def _in_a_thread(work: Callable[[], None], *, started: threading.Event) -> tuple[threading.Thread, list]:
    """Run `work` in a thread on its own connection; its exceptions land in the list (and set
    `started`, so that the test does not wait for what will not come)."""
    failures = []

    def run() -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)
            started.set()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, failures


def test_a_vote_waits_for_the_rater_row_before_it_locks_the_lease():
    study = make_study(votes_per_item=2)
    make_question(study)
    rater = make_rater(study)
    lease = assignment.lease_next(rater=rater)
    locked = threading.Event()

    def other_tab() -> None:
        """What the rater's page in another tab does: the rater's row, then the lease."""
        with transaction.atomic():
            Rater.objects.select_for_update().get(pk=rater.pk)
            locked.set()
            _someone_waits_for_a_lock(time.monotonic() + 10)  # the vote, on the rater's row
            Lease.objects.select_for_update().get(pk=lease.pk)

    tab, failures = _in_a_thread(other_tab, started=locked)
    assert locked.wait(10)
    voter = Rater.objects.select_related("study").get(pk=rater.pk)
    outcome = assignment.vote_record(
        rater_id=voter.pk, slug=voter.study.slug, token=lease.token, choice_shown="first", client_ms=5000
    )
    tab.join(20)
    assert not failures, failures
    assert outcome.created and Vote.objects.filter(rater=rater).count() == 1


@pytest.mark.parametrize("free", [0, 1])
def test_a_vote_whose_next_items_are_held_elsewhere_is_stored_and_hands_out_a_free_one(free):
    """The vote claims the next free slot (SKIP LOCKED): slots another transaction holds are
    passed over and the vote is stored all the same; with none free, the rater's next page
    hands one out."""
    study = make_study(votes_per_item=2)
    for _ in range(4):
        make_question(study)
    rater = make_rater(study)
    lease = assignment.lease_next(rater=rater)
    others = list(ComparisonItem.objects.filter(study=study).exclude(pk=lease.item_id).values_list("pk", flat=True))
    held, free_items = others[free:], others[:free]
    holding, release = threading.Event(), threading.Event()

    def other_transaction() -> None:
        with transaction.atomic():
            list(Slot.objects.select_for_update(of=("self",)).filter(item__in=held).values_list("pk"))
            holding.set()
            assert release.wait(20)

    thread, failures = _in_a_thread(other_transaction, started=holding)
    assert holding.wait(10)
    try:
        outcome = assignment.vote_record(
            rater_id=rater.pk,
            slug=rater.study.slug,
            token=lease.token,
            choice_shown="first",
            client_ms=5000,
            hand_out_next=True,
        )
        pending = list(Lease.objects.pending().filter(rater=rater).values_list("item_id", flat=True))
    finally:
        release.set()
        thread.join(20)
    assert not failures, failures
    assert outcome.created and Vote.objects.filter(rater=rater).count() == 1
    assert pending == free_items
    if not free:
        assert assignment.lease_next(rater=rater).item_id in held
