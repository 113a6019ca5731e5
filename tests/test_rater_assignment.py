"""Assignment services: the slot queue, leases, balanced order, quotas, timing filter,
resubmissions, late votes, gold checks."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from annotations.assignment import LeaseNotFound, TooManyVotes, lease_next, vote_record
from annotations.completion import rater_enter
from annotations.models import Answer, ComparisonItem, Judge, Lease, Rater, Slot, Study, Vote
from tests.factories import make_question, make_rater, make_study, make_variant

pytestmark = pytest.mark.django_db


def answer(rater, choice="first", *, not_familiar=False, client_ms=5000, now=None):
    """The rater's current item, handed out at `now`, and their vote on it, which reaches the
    server `client_ms` later (the page in view all the while)."""
    now = now or timezone.now()
    lease = lease_next(rater=rater, now=now)
    assert lease is not None, "expected an item for the rater"
    outcome = vote_record(
        rater_id=rater.pk,
        slug=rater.study.slug,
        token=lease.token,
        choice_shown=choice,
        not_familiar=not_familiar,
        client_ms=client_ms,
        now=now + timedelta(milliseconds=client_ms or 0),
    )
    return lease, outcome


def counted(item) -> tuple[int, int]:
    """The item's closed slots by order (A1 first, A2 first)."""
    closed = Slot.objects.filter(item=item, vote__isnull=False)
    return closed.filter(shown_first="a1").count(), closed.filter(shown_first="a2").count()


def rate_until_done(rater, choice="tie"):
    """Answer every item the rater is given; returns their leases in order."""
    leases = []
    while (lease := lease_next(rater=rater)) is not None:
        leases.append(lease)
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown=choice, client_ms=5000)
    return leases


def test_a_rater_never_gets_the_same_item_or_question_twice():
    study = make_study(votes_per_item=10, target_per_rater=20)
    questions = [make_question(study) for _ in range(3)]
    for question in questions:
        make_variant(question, kind="reference")
    seen = [lease.item for lease in rate_until_done(make_rater(study))]
    assert len(seen) == 3
    assert len({item.question_id for item in seen}) == 3


def test_without_one_variant_per_question_a_rater_sees_every_item_once():
    study = make_study(votes_per_item=10, target_per_rater=20, one_variant_per_question=False)
    question = make_question(study)
    make_variant(question, kind="reference")
    make_variant(question, kind="rich_content")
    items = [lease.item_id for lease in rate_until_done(make_rater(study))]
    assert sorted(items) == sorted(ComparisonItem.objects.values_list("pk", flat=True))


def test_it_prefers_the_item_furthest_from_its_quota():
    study = make_study(votes_per_item=4)
    make_question(study)
    make_question(study)
    first, _ = answer(make_rater(study))
    second = lease_next(rater=make_rater(study))
    assert second.item_id != first.item_id, "the item nobody has voted on comes first"
    _, outcome = answer(make_rater(study), not_familiar=True)
    assert not outcome.counted
    # One counted vote on the first item, one claim on the second; the not-familiar vote gave
    # its slot back.
    assert Slot.objects.filter(vote__isnull=False).get().item_id == first.item_id
    assert Slot.objects.filter(rater__isnull=False, vote__isnull=True).get().item_id == second.item_id


def test_an_item_is_not_handed_out_while_all_its_slots_are_leased_and_comes_back_when_they_expire():
    study = make_study(votes_per_item=2, lease_seconds=60)
    make_question(study)
    make_question(study)
    now = timezone.now()
    leases = [lease_next(rater=make_rater(study), now=now) for _ in range(4)]
    assert Slot.objects.filter(rater__isnull=True).count() == 0
    assert lease_next(rater=make_rater(study), now=now) is None
    later = now + timedelta(seconds=61)
    comer = lease_next(rater=make_rater(study), now=later)
    assert comer is not None and comer.item_id in {lease.item_id for lease in leases}
    # The new claim took one of the expired ones' slots; the other three are free to claim.
    taken = Slot.objects.filter(claimed_at__gt=now).get()
    assert (taken.item_id, taken.rater_id, taken.shown_first) == (comer.item_id, comer.rater_id, comer.shown_first)
    assert lease_next(rater=make_rater(study), now=later + timedelta(seconds=1)) is not None


def test_items_with_answers_awaiting_review_are_never_shown():
    study = make_study()
    question = make_question(study)
    make_variant(question, review_status=Answer.Review.PENDING)
    leases = rate_until_done(make_rater(study, target=5))
    assert [lease.item.kind_id for lease in leases] == [None]


def test_orders_stay_balanced_and_an_item_stops_at_its_quota():
    study = make_study(votes_per_item=4, target_per_rater=1)
    make_question(study)
    item = ComparisonItem.objects.get()
    for _ in range(6):
        rater = make_rater(study)
        lease = lease_next(rater=rater)
        if lease is None:
            break
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="first", client_ms=5000)
        a1, a2 = counted(item)
        assert abs(a1 - a2) <= 1
    assert counted(item) == (2, 2)
    assert Vote.objects.count() == 4
    assert lease_next(rater=make_rater(study)) is None


def test_open_leases_take_their_order_into_account():
    study = make_study(votes_per_item=2)
    make_question(study)
    first = lease_next(rater=make_rater(study))
    second = lease_next(rater=make_rater(study))
    assert {first.shown_first, second.shown_first} == {"a1", "a2"}
    assert lease_next(rater=make_rater(study)) is None, "both slots are leased"


def test_an_expired_lease_is_offered_to_someone_else_and_its_late_vote_is_still_stored():
    study = make_study(votes_per_item=1, lease_seconds=60)
    make_question(study)
    slow, quick = make_rater(study), make_rater(study)
    now = timezone.now()
    stale = lease_next(rater=slow, now=now)
    assert lease_next(rater=quick, now=now) is None
    later = now + timedelta(seconds=61)
    fresh = lease_next(rater=quick, now=later)
    assert fresh.item_id == stale.item_id
    outcome = vote_record(
        rater_id=slow.pk, slug=slow.study.slug, token=stale.token, choice_shown="first", client_ms=4000, now=later
    )
    assert outcome.created and outcome.late
    assert Vote.objects.filter(rater=slow).count() == 1
    assert outcome.vote.meta["assignment"]["late"] is True


def test_coming_back_after_the_lease_expired_keeps_the_item_while_its_slot_is_free():
    study = make_study(votes_per_item=2, lease_seconds=60)
    make_question(study)
    rater = make_rater(study)
    now = timezone.now()
    lease = lease_next(rater=rater, now=now)
    again = lease_next(rater=rater, now=now + timedelta(hours=2))
    assert again.pk == lease.pk
    assert again.expires_at > now + timedelta(hours=2)


def test_coming_back_after_the_slot_went_to_someone_else_releases_the_old_lease():
    study = make_study(votes_per_item=1, lease_seconds=60)
    make_question(study)
    make_question(study)
    away, other = make_rater(study), make_rater(study)
    now = timezone.now()
    stale = lease_next(rater=away, now=now)
    later = now + timedelta(seconds=61)
    # Someone else takes the freed slot; then the first rater comes back.
    while (lease := lease_next(rater=other, now=later)) is not None and lease.item_id != stale.item_id:
        vote_record(
            rater_id=other.pk, slug=other.study.slug, token=lease.token, choice_shown="tie", client_ms=5000, now=later
        )
    assert lease is not None
    back = lease_next(rater=away, now=later)
    stale.refresh_from_db()
    assert stale.released_at is not None
    assert back is None or back.item_id != stale.item_id


def test_not_familiar_and_too_fast_votes_are_stored_but_the_item_is_offered_again():
    study = make_study(votes_per_item=1, min_response_ms=1000, ms_per_word=100)
    make_question(study, a1="one two", a2="three four five")  # 5 words: threshold 1500 ms
    item = ComparisonItem.objects.get()
    _, unfamiliar = answer(make_rater(study), not_familiar=True)
    _, hasty = answer(make_rater(study), client_ms=1499)
    _, careful = answer(make_rater(study), client_ms=1500)
    assert (unfamiliar.counted, hasty.counted, careful.counted) == (False, False, True)
    assert sum(counted(item)) == 1
    assert Vote.objects.filter(item=item).count() == 3
    assert lease_next(rater=make_rater(study)) is None


def test_a_browser_time_longer_than_the_servers_is_cut_to_it():
    """A tampered client cannot buy its votes time: 30 s claimed, 0.2 s passed, too fast; a
    shorter browser time (the page hidden for a while) still decides."""
    study = make_study(votes_per_item=2, min_response_ms=2000)
    make_question(study)
    now = timezone.now()
    outcomes = []
    for client_ms, passed in ((30_000, timedelta(milliseconds=200)), (1_000, timedelta(seconds=60))):
        rater = make_rater(study)
        lease = lease_next(rater=rater, now=now)
        outcomes.append(
            vote_record(
                rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="first", client_ms=client_ms,
                now=now + passed,
            )
        )  # fmt: skip
    assert [(o.counted, o.vote.meta["assignment"]["too_fast"]) for o in outcomes] == [(False, True), (False, True)]
    assert [(o.vote.client_ms, o.vote.server_ms) for o in outcomes] == [(30_000, 200), (1_000, 60_000)]


def test_without_a_browser_time_the_server_time_decides():
    study = make_study(votes_per_item=1, min_response_ms=2000)
    make_question(study)
    rater = make_rater(study)
    now = timezone.now()
    lease = lease_next(rater=rater, now=now)
    outcome = vote_record(
        rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", now=now + timedelta(seconds=3)
    )
    assert outcome.counted
    assert (outcome.vote.client_ms, outcome.vote.server_ms) == (None, 3000)


def test_a_resubmission_is_stored_once_and_the_first_choice_stands():
    study = make_study()
    make_question(study)
    rater = make_rater(study)
    lease = lease_next(rater=rater)
    first = vote_record(
        rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="first", client_ms=3000
    )
    again = vote_record(
        rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="second", client_ms=3100
    )
    assert first.created and not again.created
    assert again.vote.pk == first.vote.pk
    assert Vote.objects.get().choice_shown == "first"
    assert sum(counted(ComparisonItem.objects.get())) == 1


def test_it_rejects_a_vote_on_another_raters_lease():
    study = make_study()
    make_question(study)
    owner, intruder = make_rater(study), make_rater(study)
    lease = lease_next(rater=owner)
    with pytest.raises(LeaseNotFound):
        vote_record(rater_id=intruder.pk, slug=intruder.study.slug, token=lease.token, choice_shown="first")
    with pytest.raises(LeaseNotFound):
        vote_record(rater_id=intruder.pk, slug=intruder.study.slug, token="made-up", choice_shown="first")
    assert not Vote.objects.exists()


def test_the_vote_maps_the_shown_choice_back_through_the_lease_order():
    study = make_study(votes_per_item=2)
    make_question(study)
    results = {}
    for _ in range(2):
        lease, outcome = answer(make_rater(study), "first")
        results[lease.shown_first] = outcome.vote.choice
    assert results == {"a1": "a1", "a2": "a2"}


def test_human_votes_go_to_the_study_human_pool():
    study = make_study()
    make_question(study)
    _, outcome = answer(make_rater(study))
    judge = outcome.vote.judge
    assert (judge.kind, judge.name, judge.study_id) == (Judge.Kind.HUMAN, "Humans", study.pk)


def test_gold_items_come_every_k_items_and_a_careless_rater_is_flagged():
    study = make_study(votes_per_item=5, target_per_rater=12, gold_every=2, gold_min_accuracy=0.8)
    for _ in range(8):
        make_question(study)
    for _ in range(4):
        make_question(study, is_gold=True, a1="Water is wet.", a2="Water is made of cheese.")
    rater = make_rater(study)
    golds = []
    for position in range(1, 13):
        lease = lease_next(rater=rater)
        golds.append(lease.is_gold)
        # Always pick the right-hand answer: wrong on gold whenever A1 is on the left.
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="second", client_ms=5000)
        assert lease.is_gold == (position % 3 == 0)
        assert lease.item.question.is_gold == lease.is_gold
    rater.refresh_from_db()
    assert rater.gold_seen == 4
    wrong = Vote.objects.filter(rater=rater, item__question__is_gold=True).exclude(choice="a1").count()
    assert rater.gold_correct == 4 - wrong
    assert rater.flagged == ((4 - wrong) / 4 < 0.8)


def test_a_rater_who_gets_the_gold_items_right_is_not_flagged():
    study = make_study(votes_per_item=5, target_per_rater=8, gold_every=1, gold_min_accuracy=0.9)
    for _ in range(4):
        make_question(study)
        make_question(study, is_gold=True, a1="Right.", a2="Wrong.")
    rater = make_rater(study)
    while (lease := lease_next(rater=rater)) is not None:
        choice = ("first" if lease.shown_first == "a1" else "second") if lease.is_gold else "tie"
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown=choice, client_ms=5000)
    rater.refresh_from_db()
    assert (rater.gold_seen, rater.gold_correct, rater.flagged) == (4, 4, False)


def test_a_rater_at_the_target_or_in_a_closed_study_gets_nothing_more():
    study = make_study(target_per_rater=1)
    make_question(study)
    make_question(study)
    rater = make_rater(study)
    answer(rater)
    assert lease_next(rater=rater) is None
    other = make_rater(study)
    Study.objects.filter(pk=study.pk).update(status=Study.Status.CLOSED)
    assert lease_next(rater=other) is None


def test_rater_enter_resumes_the_same_rater_with_the_study_target():
    study = make_study(target_per_rater=10)
    first = rater_enter(study=study, participant_id=" P42 ")
    again = rater_enter(study=study, participant_id="P42")
    assert first.pk == again.pk
    assert Rater.objects.get().target == 10
    assert Judge.objects.filter(study=study, kind=Judge.Kind.HUMAN).exists()
    with pytest.raises(ValueError, match="participant_id"):
        rater_enter(study=study, participant_id="  ")


def test_the_database_refuses_a_second_pending_lease_or_a_repeated_item():
    study = make_study()
    make_question(study)
    make_question(study)
    rater = make_rater(study)
    lease = lease_next(rater=rater)
    other_item = ComparisonItem.objects.exclude(pk=lease.item_id).get()
    now = timezone.now()
    common = {"study": study, "rater": rater, "shown_first": "a1", "expires_at": now + timedelta(minutes=1)}
    with pytest.raises(IntegrityError), transaction.atomic():
        Lease.objects.create(item=other_item, question=other_item.question, token="second-pending", **common)
    with pytest.raises(IntegrityError), transaction.atomic():
        Lease.objects.create(item=lease.item, question=lease.item.question, token="same-item", voted_at=now, **common)


def test_a_vote_can_hand_out_the_next_item_in_its_own_transaction():
    study = make_study(votes_per_item=4, target_per_rater=2)
    for _ in range(3):
        make_question(study)
    rater = make_rater(study)
    first = lease_next(rater=rater)
    vote_record(
        rater_id=rater.pk,
        slug=rater.study.slug,
        token=first.token,
        choice_shown="first",
        client_ms=5000,
        hand_out_next=True,
    )
    pending = list(Lease.objects.pending().filter(rater=rater))
    assert len(pending) == 1 and pending[0].item_id != first.item_id
    assert Slot.objects.get(rater=rater, vote__isnull=True).shown_first == pending[0].shown_first
    assert Slot.objects.get(rater=rater, vote__isnull=True).item_id == pending[0].item_id
    assert lease_next(rater=rater).token == pending[0].token
    # At the target, the last vote hands out nothing.
    vote_record(
        rater_id=rater.pk,
        slug=rater.study.slug,
        token=pending[0].token,
        choice_shown="first",
        client_ms=5000,
        hand_out_next=True,
    )
    assert not Lease.objects.pending().filter(rater=rater).exists()
    assert lease_next(rater=rater) is None


def test_an_item_gets_its_quota_of_slots_half_in_each_order_and_an_attention_check_none():
    study = make_study(votes_per_item=6)
    make_question(study)
    make_question(study, is_gold=True)
    control, gold = ComparisonItem.objects.order_by("question__is_gold")
    assert sorted(control.slots.values_list("shown_first", flat=True)) == ["a1"] * 3 + ["a2"] * 3
    assert not gold.slots.exists()
    odd = make_study(votes_per_item=3)
    make_question(odd)
    orders = list(Slot.objects.filter(study=odd).values_list("shown_first", flat=True))
    assert len(orders) == 3 and abs(orders.count("a1") - orders.count("a2")) == 1


def test_changing_the_quota_adds_slots_or_removes_free_ones_keeping_the_orders_balanced():
    study = make_study(votes_per_item=4)
    make_question(study)
    item = ComparisonItem.objects.get()
    held = lease_next(rater=make_rater(study))
    study.votes_per_item = 8
    study.save()
    assert sorted(item.slots.values_list("shown_first", flat=True)) == ["a1"] * 4 + ["a2"] * 4
    study.votes_per_item = 2
    study.save()
    assert sorted(item.slots.values_list("shown_first", flat=True)) == ["a1", "a2"]
    assert item.slots.get(shown_first=held.shown_first).rater_id == held.rater_id, "a claimed slot stays"


def test_items_fill_evenly_one_round_at_a_time():
    study = make_study(votes_per_item=4, target_per_rater=1)
    for _ in range(3):
        make_question(study)
    firsts = [answer(make_rater(study))[0].item_id for _ in range(3)]
    assert len(set(firsts)) == 3, "every item gets its first vote before any gets a second"


def test_a_late_vote_whose_slot_went_to_someone_else_counts_and_the_item_is_rebalanced():
    study = make_study(votes_per_item=2, lease_seconds=60)
    make_question(study)
    item = ComparisonItem.objects.get()
    slow, quick, third = make_rater(study), make_rater(study), make_rater(study)
    now = timezone.now()
    stale = lease_next(rater=slow, now=now)
    other = lease_next(rater=third, now=now + timedelta(seconds=30))  # still holds at `later`
    later = now + timedelta(seconds=61)
    fresh = lease_next(rater=quick, now=later)
    assert fresh.shown_first == stale.shown_first, "the expired slot is the one handed out again"
    late = vote_record(
        rater_id=slow.pk, slug=slow.study.slug, token=stale.token, choice_shown="first", client_ms=4000, now=later
    )
    assert late.created and late.late and late.counted
    for rater, lease in ((quick, fresh), (third, other)):
        vote_record(
            rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="first", client_ms=4000, now=later
        )
    # Three counted votes, two in one order: one more is wanted in the other order.
    assert sorted(counted(item)) == [1, 2]
    last = lease_next(rater=make_rater(study), now=later)
    assert last is not None and last.shown_first == other.shown_first
    vote_record(
        rater_id=last.rater.pk,
        slug=last.rater.study.slug,
        token=last.token,
        choice_shown="tie",
        client_ms=4000,
        now=later,
    )
    assert counted(item) == (2, 2)
    assert Vote.objects.filter(item=item).count() == 4
    assert lease_next(rater=make_rater(study), now=later) is None


def test_a_vote_beyond_the_rate_raises_with_the_wait_and_stores_nothing():
    study = make_study(votes_per_item=2)  # both orders of every item: the rater's balance never stops them
    for _ in range(4):
        make_question(study)
    rater = make_rater(study)
    start = timezone.now()
    for seconds in (0, 10):
        lease = lease_next(rater=rater, now=start + timedelta(seconds=seconds))
        vote_record(
            rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=9000,
            now=start + timedelta(seconds=seconds), rate=(2, 60),
        )  # fmt: skip
    lease = lease_next(rater=rater, now=start + timedelta(seconds=20))
    with pytest.raises(TooManyVotes) as refused:
        vote_record(
            rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=9000,
            now=start + timedelta(seconds=20), rate=(2, 60),
        )  # fmt: skip
    assert refused.value.retry_after == 40  # the first vote leaves the 60 s span at 60 s
    assert Vote.objects.filter(rater=rater).count() == 2
    # Once the first vote is older than the span, the same vote goes through.
    outcome = vote_record(
        rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=9000,
        now=start + timedelta(seconds=61), rate=(2, 60),
    )  # fmt: skip
    assert outcome.created and Vote.objects.filter(rater=rater).count() == 3
