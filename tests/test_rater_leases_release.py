"""A rater who left for good (their platform says so) frees their held item at once and is
handed nothing more; a vote still on its way is kept as a late vote (the core app alone)."""

from __future__ import annotations

import pytest

from annotations import assignment
from annotations.models import Lease, Slot, Study
from tests.factories import make_question, make_rater, make_study

pytestmark = pytest.mark.django_db


def test_releasing_a_raters_leases_frees_the_slot_and_ends_their_hand_out():
    study = make_study(votes_per_item=1, target_per_rater=2)
    make_question(study)
    make_question(study)
    rater = make_rater(study)
    lease = assignment.lease_next(rater=rater)
    version = Study.objects.get(pk=study.pk).data_version
    assert assignment.rater_leases_release(rater=rater) == 1
    lease.refresh_from_db()
    rater.refresh_from_db()
    assert lease.released_at is not None and rater.target == 0
    assert not Slot.objects.filter(rater=rater).exists()
    assert Study.objects.get(pk=study.pk).data_version > version  # the monitor reads the target
    assert assignment.lease_next(rater=rater) is None
    assert assignment.rater_leases_release(rater=rater) == 0  # again: nothing more
    # Someone else gets the freed item.
    other = make_rater(study)
    assert assignment.lease_next(rater=other) is not None
    outcome = assignment.vote_record(rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="tie")
    assert outcome.created and outcome.late
    assert Lease.objects.filter(rater=rater).count() == 1
