"""biasstudy.rawsql and the hand-written statements of the rater's hot path: they read and write
exactly what the ORM would, on SQLite and PostgreSQL."""

from datetime import UTC, datetime

import pytest
from django.db import IntegrityError, transaction
from django.forms.models import model_to_dict
from django.utils import timezone

from annotations import assignment
from annotations.models import ComparisonItem, Lease, Rater, Study, Vote
from biasstudy import rawsql
from tests.factories import make_question, make_rater, make_study, make_variant

pytestmark = pytest.mark.django_db


def _all_fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in obj._meta.concrete_fields}


def test_columns_build_the_instance_the_orm_builds():
    rater = make_rater(make_study(), source_meta={"PROLIFIC_PID": "p1", "n": [1, 2.5, None]})
    rater.last_seen_at = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    rater.flagged = True
    rater.save()
    columns = rawsql.Columns(Rater, "r")
    row = rawsql.fetchone(
        f"SELECT {columns.sql} FROM {rawsql.table(Rater)} r WHERE r.id = %s",  # noqa: S608
        [rater.pk],
    )
    assert _all_fields(columns.build(row)) == _all_fields(Rater.objects.get(pk=rater.pk))


def test_a_subset_of_columns_comes_back_in_any_order_with_the_rest_deferred():
    study = make_study(title="Deferred texts")
    columns = rawsql.Columns(Study, "s", ["votes_per_item", "title", "id"])
    row = rawsql.fetchone(
        f"SELECT {columns.sql} FROM {rawsql.table(Study)} s WHERE s.id = %s",  # noqa: S608
        [study.pk],
    )
    built = columns.build(row)
    assert (built.pk, built.title, built.votes_per_item) == (study.pk, "Deferred texts", study.votes_per_item)
    assert built.get_deferred_fields() >= {"instructions", "status"}


def test_an_unknown_column_is_named():
    with pytest.raises(ValueError, match="Study has no field colour"):
        rawsql.Columns(Study, "s", ["id", "colour"])


def test_insert_stores_what_create_stores():
    study = make_study()
    item = make_question(study).items.get()
    rater = make_rater(study)
    judge = assignment.judge_human_pool(study=study)
    when = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    fields = {
        "item": item,
        "judge": judge,
        "shown_first": "a2",
        "choice_shown": "first",
        "choice": "a2",
        "client_ms": 4100,
        "received_at": when,
        "meta": {"assignment": {"counted": True, "late": False}, "text": "«ü»"},
    }
    by_django = Vote.objects.create(rater=rater, **fields)
    ours = Vote(rater=make_rater(study), **fields)
    assert rawsql.insert(ours) is None  # None: nothing asked of `also_if`
    assert ours.pk is not None and ours.pk != by_django.pk and not ours._state.adding
    stored = {pk: model_to_dict(Vote.objects.get(pk=pk), exclude=["id", "rater"]) for pk in (ours.pk, by_django.pk)}
    assert stored[ours.pk] == stored[by_django.pk]


def _vote_with_changes(study, *, rename_to: str, count_by: int):
    """A vote to insert, and two statements to go with it: rename the study, add to one of an
    item's counters (a positive integer column: the database refuses it below 0)."""
    item = make_question(study).items.get()
    vote = Vote(
        item=item,
        judge=assignment.judge_human_pool(study=study),
        rater=make_rater(study),
        shown_first="a1",
        choice_shown="first",
        choice="a1",
        received_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    also = [
        (f"UPDATE {rawsql.table(Study)} SET title = %s WHERE id = %s", [rename_to, study.pk]),  # noqa: S608
        (
            f"UPDATE {rawsql.table(ComparisonItem)} SET human_a1_first = human_a1_first + %s WHERE id = %s",  # noqa: S608
            [count_by, item.pk],
        ),
    ]
    return vote, item, also


def test_insert_runs_the_statements_that_go_with_it():
    study = make_study(title="Before")
    vote, item, also = _vote_with_changes(study, rename_to="After", count_by=3)
    rawsql.insert(vote, also=also)
    assert Vote.objects.filter(pk=vote.pk).exists()
    assert Study.objects.get(pk=study.pk).title == "After"
    assert ComparisonItem.objects.get(pk=item.pk).human_a1_first == 3


def test_insert_with_a_failing_statement_writes_nothing():
    """A statement that fails (the counter's CHECK) takes the INSERT and the others with it."""
    study = make_study(title="Before")
    vote, item, also = _vote_with_changes(study, rename_to="After", count_by=-1)
    with pytest.raises(IntegrityError), transaction.atomic():
        rawsql.insert(vote, also=also)
    assert not Vote.objects.filter(item=item).exists()
    assert Study.objects.get(pk=study.pk).title == "Before"
    assert ComparisonItem.objects.get(pk=item.pk).human_a1_first == 0


@pytest.mark.parametrize("one_variant", [True, False])
@pytest.mark.parametrize("gold", [False, True])
def test_the_quick_candidates_are_the_eligible_items_in_hand_out_order(one_variant, gold):
    """The written-out candidate statement against the ORM's `_eligible_items`, after a few
    votes, with answers awaiting review, gold questions and items at their quota."""
    study = make_study(votes_per_item=2, one_variant_per_question=one_variant, target_per_rater=100)
    for n in range(6):
        question = make_question(study, is_gold=n % 3 == 0)
        make_variant(question, kind="reference")
        if n == 4:
            make_variant(question, kind="rich_content", review_status="pending")
    raters = [make_rater(study) for _ in range(3)]
    for rater in raters[:2]:
        for _ in range(3):
            lease = assignment.lease_next(rater=rater)
            assignment.vote_record(rater=rater, token=lease.token, choice_shown="tie", client_ms=9000)
    for rater in raters:
        rater.refresh_from_db()
        expected = assignment._eligible_items(rater, study, gold=gold)
        if not gold:
            expected = expected.filter(fill__lt=study.votes_per_item)
        expected = list(expected.order_by("fill", "rank").values_list("pk", "fill")[: assignment.CANDIDATES_TRIED])
        # From rank 0 the walk of the emptiest level is the walk from the start.
        _assert_candidates(assignment._quick_candidates(rater, study, gold=gold, start_rank=0), expected)
        _assert_candidates(assignment._quick_candidates(rater, study, gold=gold), expected, same_set=True)


def _assert_candidates(candidates: list, expected: list[tuple[int, int]], *, same_set: bool = False) -> None:
    """The emptiest (pk, fill) come first in any order (spread between raters), the rest in
    order; with `same_set`, all in any order. Each candidate carries the item's row as read."""
    rows = {pk: (fill, a1, a2, question_id) for pk, fill, a1, a2, question_id in ComparisonItem.objects.values_list(
        "pk", "fill", "human_a1_first", "human_a2_first", "question_id"
    )}  # fmt: skip
    assert all(rows[c.id] == (c.fill, c.a1, c.a2, c.question_id) for c in candidates)
    got = [c.id for c in candidates]
    emptiest = len(expected) if same_set else sum(1 for _, fill in expected if fill == expected[0][1])
    assert sorted(got[:emptiest]) == sorted(pk for pk, _ in expected[:emptiest])
    assert got[emptiest:] == [pk for pk, _ in expected[emptiest:]]


@pytest.mark.parametrize("one_variant", [True, False])
def test_the_quick_candidates_start_at_the_given_rank_of_the_emptiest_level(one_variant):
    """From a start rank: the emptiest level's eligible items from that rank on, and only when
    those are fewer than wanted, the walk from the start of the index."""
    quota, wanted = 3, assignment.CANDIDATES_TRIED
    study = make_study(votes_per_item=quota, one_variant_per_question=one_variant, target_per_rater=100)
    for _ in range(14):
        make_variant(make_question(study), kind="reference")
    raters = [make_rater(study) for _ in range(3)]
    for rater in raters[:2]:
        for _ in range(5):
            lease = assignment.lease_next(rater=rater)
            assignment.vote_record(rater=rater, token=lease.token, choice_shown="tie", client_ms=9000)
    rater = Rater.objects.get(pk=raters[0].pk)
    eligible = list(
        assignment._eligible_items(rater, study, gold=False)
        .filter(fill__lt=quota)
        .order_by("fill", "rank")
        .values_list("pk", "fill", "rank")
    )
    level = min(ComparisonItem.objects.filter(study=study).values_list("fill", flat=True))
    at_level = [(pk, rank) for pk, fill, rank in eligible if fill == level]
    assert len(at_level) > wanted  # else every start gives the whole level
    ranks = sorted(rank for _, rank in at_level)
    fill_of = {pk: fill for pk, fill, _ in eligible}
    for start in [0, ranks[0], ranks[len(ranks) // 2], ranks[len(ranks) // 2] + 1, ranks[-wanted], ranks[-1], 2**31 - 1]:
        rows = [pk for pk, rank in at_level if rank >= start][:wanted]
        if len(rows) < wanted:
            rows += [pk for pk, *_ in eligible if pk not in rows]
        expected = [(pk, fill_of[pk]) for pk in rows[:wanted]]
        _assert_candidates(assignment._quick_candidates(rater, study, gold=False, start_rank=start), expected)


def test_the_page_lease_comes_with_its_item_question_and_answers():
    study = make_study()
    question = make_question(study, text="What is **H2O**?")
    rater = make_rater(study)
    lease = assignment.lease_next(rater=rater)
    orm = Lease.objects.select_related("item__question", "item__answer_a1", "item__answer_a2").get(pk=lease.pk)
    assert _all_fields(lease) == _all_fields(orm)
    assert lease.item.question.html == orm.item.question.html and "<strong>H2O</strong>" in lease.item.question.html
    assert lease.item.answer_a1.html == orm.item.answer_a1.html
    assert lease.item.answer_a2.text == orm.item.answer_a2.text
    assert lease.item.question_id == question.pk == orm.question_id


def test_insert_if_inserts_only_when_the_guard_changes_a_row():
    study = make_study(title="Before")
    vote, item, _ = _vote_with_changes(study, rename_to="unused", count_by=0)
    table = rawsql.table(ComparisonItem)
    guard = f"UPDATE {table} SET human_a1_first = human_a1_first + 1 WHERE id = %s AND human_a1_first = %s"  # noqa: S608
    assert not rawsql.insert_if(vote, (guard, [item.pk, 5]))  # the guard matches no row
    assert vote.pk is None and not Vote.objects.exists()
    assert rawsql.insert_if(vote, (guard, [item.pk, 0]))
    assert Vote.objects.filter(pk=vote.pk).exists()
    assert ComparisonItem.objects.get(pk=item.pk).human_a1_first == 1


def _vote_and_guarded_vote(study, *, counted: int):
    """A vote with its statements (as `_vote_with_changes`), and another item's vote guarded by
    an UPDATE of that item that matches only while its counter is `counted`."""
    vote, item, also = _vote_with_changes(study, rename_to="After", count_by=1)
    other = make_question(study).items.get()
    second = Vote(
        item=other,
        judge=vote.judge,
        rater=vote.rater,
        shown_first="a2",
        choice_shown="tie",
        choice="tie",
        received_at=vote.received_at,
    )
    table = rawsql.table(ComparisonItem)
    guard = f"UPDATE {table} SET human_a2_first = human_a2_first + 1 WHERE id = %s AND human_a2_first = %s"  # noqa: S608
    return vote, also, second, (guard, [other.pk, counted]), other


@pytest.mark.parametrize("guard_holds", [True, False])
def test_insert_with_also_if_inserts_the_second_object_only_when_its_guard_holds(guard_holds):
    study = make_study(title="Before")
    vote, also, second, guard, other = _vote_and_guarded_vote(study, counted=0 if guard_holds else 7)
    with transaction.atomic():
        assert rawsql.insert(vote, also=also, also_if=(second, guard)) is guard_holds
    assert Vote.objects.filter(pk=vote.pk).exists() and Study.objects.get(pk=study.pk).title == "After"
    assert (second.pk is not None) is guard_holds
    assert Vote.objects.filter(item=other).exists() is guard_holds
    assert ComparisonItem.objects.get(pk=other.pk).human_a2_first == int(guard_holds)


def test_insert_with_also_if_that_fails_writes_nothing():
    """The guarded object cannot go in (a second vote of the rater on the first one's item,
    which the unique constraint refuses): the first object and its statements go too."""
    study = make_study(title="Before")
    vote, also, second, guard, other = _vote_and_guarded_vote(study, counted=0)
    second.item = vote.item
    with pytest.raises(IntegrityError), transaction.atomic():
        rawsql.insert(vote, also=also, also_if=(second, guard))
    assert not Vote.objects.exists() and Study.objects.get(pk=study.pk).title == "Before"
    assert ComparisonItem.objects.get(pk=other.pk).human_a2_first == 0



def test_a_claim_as_the_walk_read_it_leases_the_item():
    study = make_study(votes_per_item=2)
    make_question(study)
    rater, now = make_rater(study), timezone.now()
    (candidate,) = assignment._quick_candidates(rater, study, gold=False)
    with transaction.atomic():
        lease = assignment._lease_claim(rater, study, candidate, gold=False, now=now)
    assert lease is not None and lease.item_id == candidate.id and lease.question_id == candidate.question_id
    assert Lease.objects.get(rater=rater).pk == lease.pk
    assert ComparisonItem.objects.get(pk=candidate.id).fill == 1


def test_a_claim_from_a_stale_walk_writes_nothing():
    """The walk read an item; before the claim another rater leased it. The claim must not
    decide from the walk's counts: no lease, and the item's fill as the other lease left it."""
    study = make_study(votes_per_item=2)
    make_question(study)
    late, early, now = make_rater(study), make_rater(study), timezone.now()
    (candidate,) = assignment._quick_candidates(late, study, gold=False)
    assert assignment.lease_next(rater=early, now=now).item_id == candidate.id
    with transaction.atomic():
        assert assignment._lease_claim(late, study, candidate, gold=False, now=now) is None
    assert not Lease.objects.filter(rater=late).exists()
    assert ComparisonItem.objects.get(pk=candidate.id).fill == 1
    # Read again, a lease holds a slot: no claim is tried, the item's lock decides instead.
    (fresh,) = assignment._quick_candidates(late, study, gold=False)
    assert fresh.fill == 1 and assignment._lease_claim(late, study, fresh, gold=False, now=now) is None
