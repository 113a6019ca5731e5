"""The rater path's reads and its claim: the rater a cookie names with their pending lease and
what the task page shows of it, the lease a vote names with its rater, and the slot a claim
takes, in every state the path meets."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from annotations import assignment
from annotations.assignment import lease_next, rater_in_study, vote_record
from annotations.models import Answer, Lease, Rater, Slot
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant

pytestmark = pytest.mark.django_db


def test_the_rater_is_found_only_in_their_own_study_with_every_field_as_stored():
    study = make_study(per_rater_codes=True, fast_notice=True, gold_min_accuracy=0.625, completion_code="C0DE")
    other = make_study()
    rater = make_rater(study, source=Rater.Source.PROLIFIC, source_meta={"STUDY_ID": "x"}, flagged=True)
    Rater.objects.filter(pk=rater.pk).update(finished_at=timezone.now(), completion_code="AB12", votes_done=3)
    read = rater_in_study(rater.pk, study.slug)
    stored = Rater.objects.get(pk=rater.pk)
    assert [getattr(read, f.attname) for f in Rater._meta.concrete_fields] == [
        getattr(stored, f.attname) for f in Rater._meta.concrete_fields
    ]
    assert read.study.per_rater_codes is True and read.study.gold_min_accuracy == 0.625
    assert read.source_meta == {"STUDY_ID": "x"} and read.pending_lease is None
    assert rater_in_study(rater.pk, other.slug) is None
    assert rater_in_study(rater.pk + 1000, study.slug) is None


def test_the_rater_read_brings_their_own_pending_lease_and_no_one_elses_in_one_query(django_assert_num_queries):
    study = make_study(votes_per_item=2)
    make_question(study)
    make_question(study)
    rater, other = make_rater(study), make_rater(study)
    lease_next(rater=other)
    assert rater_in_study(rater.pk, study.slug).pending_lease is None, "the other rater's lease is not theirs"
    lease = lease_next(rater=rater)
    with django_assert_num_queries(1):
        read = rater_in_study(rater.pk, study.slug)
        page = read.pending_lease.page
        texts = [str(page[part].html) for part in ("question", "left", "right")]
    assert read.pending_lease.token == lease.token and page == lease.page
    assert all(texts)


def test_the_page_shows_the_answers_in_the_order_handed_out_and_only_pending_leases():
    study = make_study(votes_per_item=2)
    for n in range(3):
        make_question(study, a1=f"**A1** of {n}", a2=f"A2 of {n}")
    rater = make_rater(study)
    assert assignment.pending_lease(rater) is None
    for _ in range(3):
        lease = lease_next(rater=rater)
        page, item = assignment.pending_lease(rater).page, lease.item
        first, second = (item.answer_a1, item.answer_a2)
        shown = (first, second) if lease.shown_first == "a1" else (second, first)
        assert (page["left"].html, page["right"].html) == (shown[0].html, shown[1].html)
        assert page["question"].html == item.question.html
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=9000)
        assert assignment.pending_lease(rater) is None, "voted: no longer pending"
    make_question(study)
    lease = lease_next(rater=rater)
    Lease.objects.filter(pk=lease.pk).update(released_at=timezone.now())
    assert assignment.pending_lease(rater) is None, "released: not pending either"
    assert rater_in_study(rater.pk, study.slug).pending_lease is None


def test_a_text_edited_after_it_was_rendered_is_rendered_afresh_on_the_page():
    study = make_study()
    question = make_question(study, a1="old *one*", a2="two")
    rater = make_rater(study)
    lease_next(rater=rater)
    first = Answer.objects.get(question=question, external_id__endswith="-a1")
    Answer.objects.filter(pk=first.pk).update(text="new **one**")  # update() skips the stored render
    page = assignment.pending_lease(rater).page
    assert "<strong>one</strong>" in str(page["left"].html) + str(page["right"].html)


def _lease_to_vote(rater, token, slug=None):
    with transaction.atomic():
        return assignment._lease_to_vote(rater.pk, slug or rater.study.slug, token)


def test_the_lease_to_vote_brings_its_rater_study_answers_and_pool_in_every_state_of_the_lease():
    study = make_study(votes_per_item=2, gold_every=0, fast_notice=True, completion_code="C0DE")
    for n in range(3):
        make_question(study, a1=f"one two three {n}", a2="four five")
    rater = make_rater(study, flagged=True, flag_reason="by hand", source_meta={"STUDY_ID": "x"})
    other = make_rater(study)
    lease = lease_next(rater=rater)
    read = _lease_to_vote(rater, lease.token)
    assert read.item.answer_a1.len_words + read.item.answer_a2.len_words == 6
    assert read.human_pool_id is None, "no human pool yet"
    assert read.rater.flag_reason == "by hand" and read.rater.study.completion_code == "C0DE"
    pool = human_pool(study)
    vote_record(rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="tie", client_ms=9000)
    read = _lease_to_vote(rater, lease.token)  # voted
    assert read.voted_at is not None and read.human_pool_id == pool.pk and read.rater.votes_done == 1
    released = lease_next(rater=rater)
    Lease.objects.filter(pk=released.pk).update(released_at=timezone.now())
    assert _lease_to_vote(rater, released.token).released_at is not None
    for token in (released.token, "made-up"):  # another rater's lease, or none at all
        assert _lease_to_vote(other, token) is None
    assert _lease_to_vote(rater, lease.token, slug=make_study().slug) is None, "another study"


def _expected_slot(study, rater, now):
    """The slot a claim must take, worked out in Python from every slot and lease: open, on an
    approved item, free at `now`, on a question (item) the rater was not handed, in the order
    their balance needs; lowest round, then rank."""
    expired = now - timedelta(seconds=study.lease_seconds)
    seen = Lease.objects.filter(rater=rater)
    seen_questions = set(seen.values_list("question_id", flat=True))
    seen_items = set(seen.values_list("item_id", flat=True))
    order = rater.order_needed()
    candidates = [
        slot
        for slot in Slot.objects.filter(study=study).select_related("item__answer_a1", "item__answer_a2")
        if slot.vote_id is None
        and slot.item.answer_a1.review_status == slot.item.answer_a2.review_status == Answer.Review.APPROVED
        and (slot.rater_id is None or slot.claimed_at <= expired)
        and (
            slot.question_id not in seen_questions if study.one_variant_per_question else slot.item_id not in seen_items
        )
        and (not order or slot.shown_first == order)
    ]
    first = min(candidates, key=lambda slot: (slot.round, slot.rank), default=None)
    return None if first is None else (first.item_id, first.question_id, first.shown_first)


def _claimed(rater, now):
    """The claim's (item, question, order), checked against the slot it left, then rolled back."""
    with transaction.atomic():
        claim = assignment._slot_claim(rater, now=now)
        taken = Slot.objects.filter(rater=rater, claimed_at=now, vote__isnull=True)
        assert (claim is None and not taken.exists()) or (
            taken.count() == 1 and taken.values_list("item_id", "question_id", "shown_first").get() == claim
        )
        transaction.set_rollback(True)
    return claim


@pytest.mark.parametrize("one_variant_per_question", [True, False])
def test_the_claim_takes_the_first_free_slot_it_may_through_a_whole_study(one_variant_per_question):
    """Seen questions or items, expired claims, unapproved variants, held slots, the rater's
    balance, the hand-out order: at every step of raters working through a study, the claim
    takes the slot the rules name."""
    study = make_study(votes_per_item=2, one_variant_per_question=one_variant_per_question, lease_seconds=60)
    for n in range(4):
        question = make_question(study)
        make_variant(question, kind="reference")
        if n == 0:
            make_variant(question, kind="rich_content", review_status=Answer.Review.PENDING)
    raters = [make_rater(study) for _ in range(3)]
    now = timezone.now()
    for step in range(40):
        rater = Rater.objects.select_related("study").get(pk=raters[step % len(raters)].pk)
        for at in (now, now + timedelta(seconds=61)):  # and once every claim has expired
            assert _claimed(rater, at) == _expected_slot(study, rater, at)
        lease = lease_next(rater=rater, now=now)
        if lease is not None and step % 4 != 3:  # every fourth lease is left to expire
            vote_record(
                rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="first", client_ms=9000, now=now
            )
        now += timedelta(seconds=20)
    assert Slot.objects.filter(study=study, vote__isnull=False).count() >= 8  # 3 raters x 4 questions, some left
    assert Slot.objects.filter(study=study, vote__isnull=True).exists()
