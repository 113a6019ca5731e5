"""The rater path's statements written out in SQL (annotations/statements.py) give what their
ORM twins (here) give, in every state the path meets, on the database the suite runs on."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from annotations import context as context_text
from annotations import statements
from annotations.assignment import in_order_needed, lease_next, unseen, vote_record
from annotations.models import Answer, Lease, Rater, Slot, Study
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant

pytestmark = pytest.mark.django_db

_RATER_FIELDS = [field.attname for field in Rater._meta.concrete_fields]
_STUDY_FIELDS = [field.attname for field in Study._meta.concrete_fields]
_LEASE_FIELDS = [field.attname for field in Lease._meta.concrete_fields]


def rater_in_study_orm(rater_id, slug):
    return Rater.objects.select_related("study").filter(pk=rater_id, study__slug=slug).first()


def pending_lease_orm(rater_id):
    page = ("item__question", "item__answer_a1", "item__answer_a2")
    return Lease.objects.pending().select_related(*page).filter(rater_id=rater_id).first()


def lease_to_vote_orm(rater_id, slug, token):
    leases = Lease.objects.select_related("rater__study", "item__answer_a1", "item__answer_a2")
    leases = leases.select_for_update(of=("self", "rater"))
    return leases.filter(rater_id=rater_id, rater__study__slug=slug, token=token).first()


def free_slot_orm(*, study, rater, claimed_before):
    free = Q(rater__isnull=True) | Q(claimed_at__lte=claimed_before)
    slots = in_order_needed(unseen(Slot.objects.filter(free, study=study).rateable(), rater), rater)
    return slots.order_by("round", "rank").values_list("pk", "item_id", "question_id", "shown_first")


def _rater_values(rater):
    if rater is None:
        return None
    return [getattr(rater, name) for name in _RATER_FIELDS], [getattr(rater.study, name) for name in _STUDY_FIELDS]


def test_the_rater_read_matches_the_orm_for_every_field_in_and_out_of_the_study():
    # Every field away from its default, so that a column read wrongly (or left out) shows.
    study = make_study(
        one_variant_per_question=False,
        per_rater_codes=True,
        fast_notice=True,
        allow_mturk_frame=True,
        gold_min_accuracy=0.625,
        completion_code="C0DE",
    )
    other = make_study()
    rater = make_rater(study, source=Rater.Source.PROLIFIC, source_meta={"STUDY_ID": "x"}, flagged=True)
    cases = [(rater.pk, study.slug), (rater.pk, other.slug), (rater.pk + 1000, study.slug)]
    for _ in range(2):
        for rater_id, slug in cases:
            ours, orm = statements.rater_in_study(rater_id, slug), rater_in_study_orm(rater_id, slug)
            assert _rater_values(ours) == _rater_values(orm)
        Rater.objects.filter(pk=rater.pk).update(finished_at=timezone.now(), completion_code="AB12", votes_done=3)
    read = statements.rater_in_study(rater.pk, study.slug)
    assert read.study.per_rater_codes is True and read.study.one_variant_per_question is False
    assert read.finished_at is not None and read.source_meta == {"STUDY_ID": "x"}
    assert read.pending_lease is None
    assert statements.rater_in_study(rater.pk, other.slug) is None


def test_the_rater_read_is_the_same_with_a_pending_lease_and_finds_no_one_elses():
    study = make_study(votes_per_item=2)
    make_question(study)
    make_question(study)
    rater, other = make_rater(study, flagged=True), make_rater(study)
    lease_next(rater=other)
    bare = statements.rater_in_study(rater.pk, study.slug)
    assert bare.pending_lease is None, "the other rater's lease is not theirs"
    lease = lease_next(rater=rater)
    read = statements.rater_in_study(rater.pk, study.slug)
    assert _rater_values(read) == _rater_values(bare) == _rater_values(rater_in_study_orm(rater.pk, study.slug))
    assert _lease_values(read.pending_lease) == _lease_values(pending_lease_orm(rater.pk))
    assert read.pending_lease.token == lease.token and read.pending_lease.page == lease.page


def _lease_values(lease):
    if lease is None:
        return None
    return [getattr(lease, name) for name in _LEASE_FIELDS]


def test_the_pending_lease_read_matches_the_orm_and_shows_the_answers_in_the_order_given():
    study = make_study(votes_per_item=2)
    for n in range(3):
        make_question(study, a1=f"**A1** of {n}", a2=f"A2 of {n}")
    rater = make_rater(study)
    assert statements.pending_lease(rater) is None and pending_lease_orm(rater.pk) is None
    for _ in range(3):
        lease = lease_next(rater=rater)
        ours, orm = statements.pending_lease(rater), pending_lease_orm(rater.pk)
        assert _lease_values(ours) == _lease_values(orm)
        item = orm.item
        first, second = (
            (item.answer_a1, item.answer_a2) if orm.shown_first == "a1" else (item.answer_a2, item.answer_a1)
        )
        assert ours.page["left"].html == first.html and ours.page["right"].html == second.html
        assert ours.page["question"].html == item.question.html
        assert ours.page["context"] == context_text.for_rater(item.context, orm.shown_first)
        vote_record(rater_id=rater.pk, slug=rater.study.slug, token=lease.token, choice_shown="tie", client_ms=9000)
        # Voted: no longer pending, in either read.
        assert statements.pending_lease(rater) is None and pending_lease_orm(rater.pk) is None
    # Released (its slot went to someone else): not pending either.
    make_question(study)
    lease = lease_next(rater=rater)
    Lease.objects.filter(pk=lease.pk).update(released_at=timezone.now())
    assert statements.pending_lease(rater) is None and pending_lease_orm(rater.pk) is None


def test_a_text_edited_after_it_was_rendered_is_rendered_afresh_on_the_page():
    study = make_study()
    question = make_question(study, a1="old *one*", a2="two")
    rater = make_rater(study)
    lease_next(rater=rater)
    first = Answer.objects.get(question=question, external_id__endswith="-a1")
    Answer.objects.filter(pk=first.pk).update(text="new **one**")  # update() skips the stored render
    page = statements.pending_lease(rater).page
    assert "<strong>one</strong>" in str(page["left"].html) + str(page["right"].html)


def _lease_to_vote_both(rater, token, slug=None):
    """Both reads of the lease, the rater and their study, as field values."""
    slug = slug or rater.study.slug
    with transaction.atomic():
        ours, orm = statements.lease_to_vote(rater.pk, slug, token), lease_to_vote_orm(rater.pk, slug, token)
    if ours is None or orm is None:
        return ours, orm
    assert _rater_values(ours.rater) == _rater_values(orm.rater)
    assert _lease_values(ours) == _lease_values(orm)
    return ours, orm


def test_the_lease_to_vote_matches_the_orm_with_the_rater_and_study_in_every_state_of_the_lease():
    study = make_study(votes_per_item=2, gold_every=0, fast_notice=True, completion_code="C0DE")
    for n in range(3):
        make_question(study, a1=f"one two three {n}", a2="four five")
    rater = make_rater(study, flagged=True, flag_reason="by hand", source_meta={"STUDY_ID": "x"})
    other = make_rater(study)
    lease = lease_next(rater=rater)
    ours, orm = _lease_to_vote_both(rater, lease.token)
    assert ours.words == orm.item.answer_a1.len_words + orm.item.answer_a2.len_words
    assert ours.human_pool_id is None, "no human pool yet"
    assert ours.rater.flag_reason == "by hand" and ours.rater.study.completion_code == "C0DE"
    pool = human_pool(study)
    vote_record(rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="tie", client_ms=9000)
    ours, orm = _lease_to_vote_both(rater, lease.token)  # voted
    assert ours.voted_at is not None and ours.human_pool_id == pool.pk and ours.rater.votes_done == 1
    released = lease_next(rater=rater)
    Lease.objects.filter(pk=released.pk).update(released_at=timezone.now())
    ours, orm = _lease_to_vote_both(rater, released.token)
    assert ours.released_at is not None
    for token in (released.token, "made-up"):  # another rater's lease, or none at all
        assert _lease_to_vote_both(other, token) == (None, None)
    assert _lease_to_vote_both(rater, lease.token, slug=make_study().slug) == (None, None), "another study"


def _both_free_slots(study, rater, claimed_before, now):
    """(the slot the claim takes, the first of its ORM twin), as (slot id, item id, question id,
    order); the claim is rolled back after its slot is read back as it left it."""
    orm = free_slot_orm(study=study, rater=rater, claimed_before=claimed_before).first()
    with transaction.atomic():
        order = rater.order_needed()
        claim = statements.slot_claim(
            study=study, rater_id=rater.pk, order=order, now=now, claimed_before=claimed_before
        )
        taken = Slot.objects.filter(rater=rater, claimed_at=now, vote__isnull=True)
        ours = taken.values_list("pk", "item_id", "question_id", "shown_first").first()
        assert (claim is None and ours is None) or (ours[1:] == claim and taken.count() == 1)
        transaction.set_rollback(True)
    return ours, orm


@pytest.mark.parametrize("one_variant_per_question", [True, False])
def test_the_free_slot_matches_the_orm_through_a_whole_study(one_variant_per_question):
    """Seen questions or items, expired claims, unapproved variants, held slots, the hand-out
    order: at every step of raters working through a study, the same slot comes first."""
    study = make_study(votes_per_item=2, one_variant_per_question=one_variant_per_question, lease_seconds=60)
    for n in range(4):
        question = make_question(study)
        make_variant(question, kind="reference")
        if n == 0:
            make_variant(question, kind="rich_content", review_status=Answer.Review.PENDING)
    raters = [make_rater(study) for _ in range(3)]
    now = timezone.now()
    for step in range(40):
        rater = raters[step % len(raters)]
        rater.refresh_from_db()  # the order their balance needs, as their last vote left it
        for claimed_before in (now - timedelta(seconds=60), now + timedelta(seconds=1)):
            ours, orm = _both_free_slots(study, rater, claimed_before, now)
            assert ours == orm
        lease = lease_next(rater=rater, now=now)
        if lease is not None and step % 4 != 3:  # every fourth lease is left to expire
            vote_record(
                rater_id=rater.pk,
                slug=rater.study.slug,
                token=lease.token,
                choice_shown="first",
                client_ms=9000,
                now=now,
            )
        now += timedelta(seconds=20)
    assert Slot.objects.filter(study=study, vote__isnull=False).count() > 10
    assert Slot.objects.filter(study=study, vote__isnull=True).exists()
