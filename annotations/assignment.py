"""Handing items to human raters and recording their votes: a queue of slots.

Every item has one `Slot` per counted vote it needs, half in each display order, made with the
item (`Slot.objects.sync`). A rater claims the first slot, lowest round first so that items fill
evenly, that is open (no counted vote yet) and free (never claimed, freed by an uncounted vote,
or claimed longer ago than the study's lease time) on a question they have not seen: the slot
then names them. They get a `Lease`: their token and the order shown. A counted vote closes the
slot; an uncounted one (not familiar, too fast) frees it. So each item's order balance and
quotas hold by construction, and expiry is a condition of the claim. Each rater's own balance
holds too: a rater who has voted on more items with the A2 side first than with the A1 side
(`Rater.a2_first_lead`, kept with each vote) may claim only an A1-first slot next, and the
other way round, so that over their items the two orders differ by at most one (when no slot in
the order they need is left for them, they get nothing more: `in_order_needed`). Attention
checks have no slots: every (gold_every + 1)-th item is a gold item the rater has not seen, in
either order at random.

Races are settled by the database. Every transaction here first locks the rater's row, so one
rater's requests (two tabs, a double click) run one after the other; a claim locks its slot with
SKIP LOCKED on PostgreSQL, so it never waits for another rater's claim, and takes it with an
UPDATE that names the state it found (its row count says whether it won). On SQLite every
transaction begins IMMEDIATE (settings): one writer at a time. A vote that arrives after its
slot went to someone else is stored all the same, flagged late; if it counts, it gets a slot of
its own and the item one more free slot in the other order, so that the orders are equal again
once that one is filled.
"""

from __future__ import annotations

import math
import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import Exists, FilteredRelation, Model, OuterRef, Q, QuerySet, Subquery
from django.utils import timezone

from annotations.models import Judge, Lease, Rater, Shown, Slot, Study, Vote, choice_from_shown


class LeaseNotFound(Exception):
    """The token is not one of this rater's leases: nothing is recorded."""

    def __init__(self, rater: Rater):
        super().__init__("this item is not one of yours; nothing was recorded")
        self.rater = rater  # with their study


class TooManyVotes(Exception):
    """The rater sent more votes than the rate allows: nothing is recorded."""

    def __init__(self, retry_after: int, rater: Rater):
        super().__init__(f"too many votes; try again in {retry_after} s")
        self.retry_after, self.rater = retry_after, rater


@dataclass(frozen=True)
class VoteOutcome:
    vote: Vote
    rater: Rater  # read from their locked row, with their study
    created: bool  # False when this was a resubmission of an already stored vote
    counted: bool  # counts towards the item's quota (familiar and not too fast)
    late: bool  # arrived after the lease had expired


# What the task page shows of a lease: its item's question and both answers.
_PAGE = ("item__question", "item__answer_a1", "item__answer_a2")


def at_most_one(queryset: QuerySet) -> Model | None:
    """The row of a query that matches at most one (a key or a unique constraint), or None.
    Not ``first()``: it adds ORDER BY pk, and compiling an ORDER BY over a select_related
    query hashes each of its ~80 columns, 1-2 ms of CPU a query on the rater path."""
    return next(iter(queryset.order_by()[:1]), None)


def rater_in_study(rater_id: int, slug: str) -> Rater | None:
    """The rater with this id in the study with this slug, with their study and
    `pending_lease`: their pending lease (expired or not) with its item's texts, or None; in
    one query. None if there is no such rater there."""
    pending = FilteredRelation("leases", condition=Q(leases__voted_at__isnull=True, leases__released_at__isnull=True))
    raters = Rater.objects.annotate(pending_lease=pending)
    raters = raters.select_related("study", *(f"pending_lease__{path}" for path in _PAGE))
    # At most one pending lease (a constraint), so at most one row.
    rater = at_most_one(raters.filter(pk=rater_id, study__slug=slug))
    if rater is not None and not hasattr(rater, "pending_lease"):
        rater.pending_lease = None  # select_related sets a filtered relation only when it found a row
    return rater


def pending_lease(rater: Rater) -> Lease | None:
    """The rater's pending lease, expired or not, with its item's texts (Lease.page)."""
    return at_most_one(Lease.objects.pending().select_related(*_PAGE).filter(rater=rater))


def lease_next(*, rater: Rater, pending: Lease | None = None, now: datetime | None = None) -> Lease | None:
    """The rater's current item: their pending lease if it still holds (or can be renewed),
    else a new one, with its item's texts (Lease.page). None when the rater gets nothing now:
    target reached, study not collecting, or no slot free for them. `pending` is their pending
    lease if the caller has just read it (rater_in_study reads it with the rater), to save
    reading it again; never one read before a vote."""
    now = now or timezone.now()
    lease = pending or pending_lease(rater)
    if lease is not None and lease.expires_at > now:
        return lease
    # As little as can be under the write lock (SQLite's is the whole database's): the page is
    # read after it.
    with transaction.atomic():
        _lock(rater)
        lease = Lease.objects.pending().filter(rater=rater).first()  # again: another tab may have taken one
        if lease is not None and lease.expires_at <= now and not _lease_renew(lease, study=rater.study, now=now):
            lease.released_at = now  # its slot went to someone else; a vote on it is still stored
            lease.save(update_fields=["released_at"])
            lease = None
        if lease is None and _lease_claim(rater, now=now) is None:
            return None
    return pending_lease(rater)


def vote_record(
    *,
    rater_id: int,
    slug: str,
    token: str,
    choice_shown: str,
    not_familiar: bool = False,
    client_ms: int | None = None,
    now: datetime | None = None,
    hand_out_next: bool = False,
    rate: tuple[int, int] | None = None,
    drafts: bool = True,
) -> VoteOutcome:
    """Store the vote of the rater with this id in the study with this slug on one of their own
    leases, exactly once (the rater is read here, with the lease, from their locked row).

    A resubmission returns the vote already stored. A vote on an expired (even released) lease
    is stored all the same and flagged late in `meta`. Not-familiar votes and votes faster than
    the study's threshold (the browser's time, at most the server's) are stored
    but do not count, and free the slot for someone else. With `hand_out_next` the rater's next
    item is claimed in the same transaction, so that the page after the vote is a read. With
    `rate` = (votes, seconds), a vote beyond that many in any such span raises TooManyVotes
    (counted from the rater's stored votes under their lock: exact across every worker and
    host, no cache needed). Raises Rater.DoesNotExist when there is no such rater in that
    study, Study.DoesNotExist when the study is a draft and not `drafts`; nothing is recorded.
    """
    now = now or timezone.now()
    with transaction.atomic():
        lease = _lease_to_vote(rater_id, slug, token)
        rater = _voter(lease, rater_id=rater_id, slug=slug, drafts=drafts)
        if lease.voted_at is not None:
            return _stored_outcome(lease)
        if rate is not None and rater.votes_done >= rate[0]:  # fewer votes in all cannot be too many
            _check_rate(rater, rate, now)
        vote = _vote_create(lease, choice_shown=choice_shown, not_familiar=not_familiar, client_ms=client_ms, now=now)
        _vote_close(lease, vote, now=now)
        # A released lease was not the rater's pending one: they have another item already.
        if hand_out_next and lease.released_at is None:
            _lease_claim(rater, now=now)
        # Last: the study's row stays locked only while the transaction commits (every vote
        # of the study waits for it), and after the slots, as a study's save takes them.
        Study.objects.filter(pk=rater.study_id).data_changed()
    info = vote.meta["assignment"]
    return VoteOutcome(vote, rater, created=True, counted=info["counted"], late=info["late"])


def _lease_to_vote(rater_id: int, slug: str, token: str) -> Lease | None:
    """The lease with this token of the rater with this id in the study with this slug,
    whatever its state, with `rater` (and their study) and the item's answers (their lengths
    set the too-fast threshold), and `human_pool_id`, the study's human Judge (None before
    there is one). Locks the rater's row and the lease, the rater first as in every
    transaction of the rater path: a read that waited for the lock then sees both rows as the
    transaction it waited for left them (PostgreSQL reads a locked row afresh; the study and
    answers are not locked). On SQLite the transaction already holds the one write lock."""
    human_pool = Judge.objects.filter(study=OuterRef("study_id"), kind=Judge.Kind.HUMAN).order_by("pk").values("pk")
    leases = Lease.objects.select_related("rater__study", "item__answer_a1", "item__answer_a2")
    leases = leases.select_for_update(of=("rater", "self")).annotate(human_pool_id=Subquery(human_pool[:1]))
    return at_most_one(leases.filter(rater_id=rater_id, rater__study__slug=slug, token=token))


def _voter(lease: Lease | None, *, rater_id: int, slug: str, drafts: bool) -> Rater:
    """The rater of the lease to vote on, or the reason there is nothing to record: no such
    rater in the study (Rater.DoesNotExist), a draft (Study.DoesNotExist), no such lease of
    theirs (LeaseNotFound)."""
    rater = (
        lease.rater if lease else Rater.objects.select_related("study").filter(pk=rater_id, study__slug=slug).first()
    )
    if rater is None:
        raise Rater.DoesNotExist(f"no rater {rater_id} in the study {slug!r}")
    if rater.study.status == Study.Status.DRAFT and not drafts:
        raise Study.DoesNotExist(f"the study {slug!r} is a draft")
    if lease is None:
        raise LeaseNotFound(rater)
    return rater


def _stored_outcome(lease: Lease) -> VoteOutcome:
    """A resubmission: the vote already stored on the lease, as it was recorded."""
    vote = Vote.objects.get(rater=lease.rater, item_id=lease.item_id)
    info = vote.meta.get("assignment", {})
    return VoteOutcome(
        vote, lease.rater, created=False, counted=info.get("counted", False), late=info.get("late", False)
    )


def _vote_create(lease: Lease, *, choice_shown: str, not_familiar: bool, client_ms: int | None, now: datetime) -> Vote:
    """Store the vote on the lease, with whether it counts (familiar and not too fast) and
    whether it came late in `meta["assignment"]`."""
    study = lease.rater.study
    server_ms = max(0, int((now - lease.created_at).total_seconds() * 1000))
    # The browser's time, at most the server's (models.RESPONSE_MS), else the server's.
    decided_ms = server_ms if client_ms is None else min(client_ms, server_ms)
    too_fast = decided_ms < study.threshold_ms(lease.item.answer_a1.len_words + lease.item.answer_a2.len_words)
    counted = not not_familiar and not too_fast
    late = lease.released_at is not None or lease.expires_at <= now
    vote = Vote(
        item_id=lease.item_id,
        judge_id=lease.human_pool_id or judge_human_pool(study=study).pk,
        rater=lease.rater,
        shown_first=lease.shown_first,
        choice_shown=choice_shown,
        choice=choice_from_shown(lease.shown_first, choice_shown) if choice_shown else None,
        not_familiar=not_familiar,
        client_ms=client_ms,
        server_ms=server_ms,
        received_at=now,
        meta={"assignment": {"counted": counted, "too_fast": too_fast, "late": late}},
    )
    vote.save(force_insert=True, data_changed=False)  # vote_record moves it, last
    return vote


def _vote_close(lease: Lease, vote: Vote, *, now: datetime) -> None:
    """What a stored vote changes: its lease is voted; a counted vote closes its slot (or one
    of its own, when the slot went to someone else), an uncounted one frees it; the rater's
    counts and balance move on."""
    rater = lease.rater
    Lease.objects.filter(pk=lease.pk).update(voted_at=now)
    held = _held(lease)
    if lease.is_gold:
        rater.score_attention_check(correct=vote.choice == "a1" and not vote.not_familiar)
    else:
        # Seen is seen: a not-familiar or too-fast vote moves the rater's balance too.
        rater.a2_first_lead += 1 if lease.shown_first == Shown.A2_FIRST else -1
        if not vote.meta["assignment"]["counted"]:
            held.update(rater=None, claimed_at=None)
        elif not held.update(vote=vote):
            _slot_for_late_vote(lease, vote)
    rater.votes_done += 1
    rater.last_seen_at = now
    saved = ["votes_done", "a2_first_lead", "last_seen_at", "gold_seen", "gold_correct", "flagged", "flag_reason"]
    # An update(), not a save(): the vote moves the study's data version itself (vote_record).
    Rater.objects.filter(pk=rater.pk).update(**{name: getattr(rater, name) for name in saved})


def rater_leases_release(*, rater: Rater, now: datetime | None = None) -> int:
    """The rater has left the study for good (their platform says so: a submission returned,
    timed out or rejected): free the slot their pending item holds, at once, so that the quota
    fills with others, and hand them nothing more (their target becomes what they have done).
    Their pending lease is released, not deleted: a vote still coming on it is stored as any
    late vote is (flagged late; if it counts, it gets a slot of its own). Returns how many
    leases were released (0 or 1). Idempotent."""
    now = now or timezone.now()
    with transaction.atomic():
        _lock(rater)
        pending = list(Lease.objects.pending().filter(rater=rater))
        for lease in pending:
            _held(lease).update(rater=None, claimed_at=None)
        Lease.objects.filter(pk__in=[lease.pk for lease in pending]).update(released_at=now)
        if rater.target > rater.votes_done:
            Rater.objects.filter(pk=rater.pk).update(target=rater.votes_done)
            rater.target = rater.votes_done
            # A rater's target is read by the study's reports (the monitor): they move on.
            Study.objects.filter(pk=rater.study_id).data_changed()
    return len(pending)


def judge_human_pool(*, study: Study) -> Judge:
    """The study's human rater pool, where every human vote goes."""
    judge, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
    return judge


def unseen(queryset: QuerySet, rater: Rater) -> QuerySet:
    """The slots or items of `queryset` on questions the rater has not been handed (with
    `one_variant_per_question` off: items they have not been handed). Asked of each candidate
    (NOT EXISTS, one probe of the lease's (rater, question) or (rater, item) index), not as a
    list of all the rater's leases, which PostgreSQL hashed on every claim."""
    seen = Lease.objects.filter(rater_id=rater.pk)
    if rater.study.one_variant_per_question:
        return queryset.filter(~Exists(seen.filter(question_id=OuterRef("question_id"))))
    item = "item_id" if queryset.model is Slot else "pk"
    return queryset.filter(~Exists(seen.filter(item_id=OuterRef(item))))


def in_order_needed(slots: QuerySet, rater: Rater) -> QuerySet:
    """The slots of `slots` in the display order the rater's own balance needs next (all of
    them when either order will do)."""
    order = rater.order_needed()
    return slots.filter(shown_first=order) if order else slots


# What a rater's other requests change, refreshed from their row whenever it is locked.
LOCKED_RATER_FIELDS = (
    "votes_done",
    "a2_first_lead",
    "target",
    "gold_seen",
    "gold_correct",
    "flagged",
    "flag_reason",
)


def _lock(rater: Rater) -> None:
    """Lock the rater's row (only theirs: locking the study joined in would make every rater
    wait for every other one) and refresh what their other requests change, and the study's
    status."""
    locked = Rater.objects.select_for_update(of=("self",)).filter(pk=rater.pk)
    row = locked.values(*LOCKED_RATER_FIELDS, "study__status").get()
    rater.study.status = row.pop("study__status")
    for name, value in row.items():
        setattr(rater, name, value)


def _check_rate(rater: Rater, rate: tuple[int, int], now: datetime) -> None:
    limit, seconds = rate
    recent = Vote.objects.filter(rater=rater, received_at__gt=now - timedelta(seconds=seconds))
    # The limit-th latest vote in the span, if there is one: it must leave the span first.
    for oldest in recent.order_by("-received_at").values_list("received_at", flat=True)[limit - 1 : limit]:
        raise TooManyVotes(max(1, math.ceil((oldest + timedelta(seconds=seconds) - now).total_seconds())), rater)


def _lease_renew(lease: Lease, *, study: Study, now: datetime) -> bool:
    """An expired lease comes back to its rater if nobody else has claimed its slot since."""
    if not lease.is_gold and not _held(lease).update(claimed_at=now):
        return False
    lease.expires_at = now + timedelta(seconds=study.lease_seconds)
    lease.save(update_fields=["expires_at"])
    return True


def _lease_claim(rater: Rater, *, now: datetime) -> Lease | None:
    """Under the rater's lock, with no pending lease: hand out their next item, if any."""
    study = rater.study
    if not rater.may_get_items():
        return None
    if study.is_gold_turn(rater.votes_done):  # attention checks are few: any unseen one
        gold = unseen(study.items.approved().gold(), rater).order_by("?").values_list("pk", "question_id").first()
        if gold is not None:
            return _lease_create(rater, *gold, random.choice(Shown.values), now, gold=True)
    claim = _slot_claim(rater, now=now)
    return None if claim is None else _lease_create(rater, *claim, now)


def free_slots(rater: Rater, *, now: datetime) -> QuerySet:
    """The slots the rater may claim at `now`, first first: open (no counted vote) on an
    approved item, free (never claimed, or claimed longer ago than the study's lease time), on
    a question (an item) they have not been handed, in the display order their own balance
    needs; lowest round, then rank. The walk of `slot_open_in_order` stops at the first."""
    slots = Slot.objects.filter(_free(rater.study, now), study=rater.study).rateable()
    return in_order_needed(unseen(slots, rater), rater).order_by("round", "rank")


def _free(study: Study, now: datetime) -> Q:
    """An open slot that nobody holds at `now`: never claimed, freed, or claimed longer ago than
    the study's lease time."""
    expired = now - timedelta(seconds=study.lease_seconds)
    return Q(vote__isnull=True) & (Q(rater__isnull=True) | Q(claimed_at__lte=expired))


# Tries of a claim whose slot was taken between its choice and its UPDATE: none is expected
# (the choice locks the slot, or SQLite's transaction holds the write lock), but the UPDATE's
# row count, not that expectation, decides.
CLAIM_TRIES = 3


def _slot_claim(rater: Rater, *, now: datetime) -> tuple[int, int, str] | None:
    """Claim for the rater the first of `free_slots` (by the rater, not their lease, which is
    made after it); its (item id, question id, order), or None when there is none. SKIP LOCKED:
    a claim never waits for another rater's claim of the same slot, it takes the next one."""
    slots = free_slots(rater, now=now).select_for_update(skip_locked=True, of=("self",))
    for _ in range(CLAIM_TRIES):
        first = slots.values_list("pk", "item_id", "question_id", "shown_first").first()
        if first is None:
            return None
        pk, *claim = first
        if Slot.objects.filter(_free(rater.study, now), pk=pk).update(rater_id=rater.pk, claimed_at=now):
            return tuple(claim)
    return None


def _held(lease: Lease) -> QuerySet:
    """The slot the lease holds, while it still does (no vote, nobody else's claim): a rater is
    handed an item once, so their id and the item's name it."""
    return Slot.objects.filter(item_id=lease.item_id, rater_id=lease.rater_id, vote__isnull=True)


def _lease_create(
    rater: Rater, item_id: int, question_id: int, order: str, now: datetime, *, gold: bool = False
) -> Lease:
    return Lease.objects.create(
        study=rater.study,
        rater=rater,
        item_id=item_id,
        question_id=question_id,
        token=secrets.token_urlsafe(24),
        shown_first=order,
        is_gold=gold,
        created_at=now,
        expires_at=now + timedelta(seconds=rater.study.lease_seconds),
    )


def _slot_for_late_vote(lease: Lease, vote: Vote) -> None:
    """A counted vote whose slot went to someone else: it gets a slot of its own, closed by it,
    and the item one more free slot in the other order, so that the orders are equal again
    once that one is filled too."""
    other = Shown.A2_FIRST if lease.shown_first == Shown.A1_FIRST else Shown.A1_FIRST
    round_ = Slot.objects.filter(item_id=lease.item_id).count()
    common = {"study_id": lease.study_id, "item_id": lease.item_id, "question_id": lease.question_id}
    Slot.objects.bulk_create(
        [
            Slot(**common, shown_first=lease.shown_first, round=round_, vote=vote),
            Slot(**common, shown_first=other, round=round_ + 1),
        ]
    )
