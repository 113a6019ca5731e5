"""A bonus is never paid twice: two staff members (or a double click, or a retried task) paying
the same study's bonuses at the same moment, each on its own database connection, against the
loopback Prolific, whose pay call is not idempotent. Runs on SQLite and, with DATABASE_URL
pointing to it, on PostgreSQL."""

from __future__ import annotations

import threading
from decimal import Decimal

import pytest
from django.db import connection

from prolific import services
from prolific.models import Bonus, BonusBatch
from tests.factories import make_staff
from tests.prolific_helpers import draft, prolific, prolific_rater, study_for_prolific, vote_all

__all__ = ["prolific"]  # the fixture

pytestmark = pytest.mark.django_db(transaction=True)

PRESSES = 4  # four at once: two staff members, each double-clicking


def test_bonuses_paid_at_once_by_several_callers_are_paid_once(prolific):
    study = study_for_prolific(votes_per_item=2)
    link = draft(study)
    raters = [prolific_rater(study, prolific, link)[0] for _ in range(2)]
    for rater in raters:
        vote_all(rater)
    services.prolific_submissions_sync(study=study)
    staff = [make_staff() for _ in range(2)]
    start, results, failures = threading.Barrier(PRESSES), [], []

    def press(n: int) -> None:
        try:
            start.wait(timeout=10)
            results.append(services.prolific_bonuses_pay(study=study, user=staff[n % 2], per_vote=Decimal("0.10")))
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press, args=(n,)) for n in range(PRESSES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    paid = [batch for batch in results if batch is not None]
    assert len(paid) >= 1 and all(batch.state == BonusBatch.State.PAID for batch in paid)
    # Each rater paid exactly once, whichever press won them: three counted votes at 0.10.
    for rater in raters:
        assert prolific.amount_paid(rater.participant_id) == Decimal("0.30")
    assert len(prolific.paid) == len(raters)
    assert Bonus.objects.count() == len(raters)
