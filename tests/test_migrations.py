"""Data migrations on rows that exist: written with the schema before, migrated forward."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotations import assignment
from annotations.models import Lease
from tests.factories import make_question, make_rater, make_study, make_variant


def _migrate_to(name: str) -> None:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate([("annotations", name)])


@pytest.mark.django_db(transaction=True)
def test_leases_handed_out_before_0008_get_their_items_question():
    study = make_study(one_variant_per_question=True)
    for _ in range(3):
        make_variant(make_question(study), kind="reference")
    raters = [make_rater(study) for _ in range(2)]
    for rater in raters:
        lease = assignment.lease_next(rater=rater)
        assignment.vote_record(rater=rater, token=lease.token, choice_shown="tie", client_ms=9000, hand_out_next=True)
    _migrate_to("0007_rater_votes_done")
    try:
        _migrate_to("0008_lease_question")
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    leases = list(Lease.objects.select_related("item"))
    assert len(leases) == 4
    assert all(lease.question_id == lease.item.question_id for lease in leases)
    assert len({lease.question_id for lease in leases}) >= 2
