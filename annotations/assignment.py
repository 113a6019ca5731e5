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
SKIP LOCKED on PostgreSQL, so it never waits for another rater's claim. On SQLite every
transaction begins IMMEDIATE (settings): one writer at a time. A vote that arrives after its
slot went to someone else is stored all the same, flagged late; if it counts, it gets a slot of
its own and the item one more free slot in the other order, so that the orders are equal again
once that one is filled.
"""

from __future__ import annotations

import fcntl
import math
import random
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from annotations import statements
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


def lease_next(*, rater: Rater, pending: Lease | None = None, now: datetime | None = None) -> Lease | None:
    """The rater's current item: their pending lease if it still holds (or can be renewed),
    else a new one, with its `page` (what the task page shows). None when the rater gets
    nothing now: target reached, study not collecting, or no slot free for them. `pending` is
    their pending lease if the caller has just read it (statements.rater_in_study reads it
    with the rater), to save reading it again; never one read before a vote."""
    now = now or timezone.now()
    lease = pending or statements.pending_lease(rater)
    if lease is not None and lease.expires_at > now:
        return lease
    # As little Python as can be under the write lock (SQLite's is the whole database's): the
    # page is read after it.
    with write_transaction():
        _lock(rater)
        lease = Lease.objects.pending().filter(rater=rater).first()  # again: another tab may have taken one
        if lease is not None and lease.expires_at <= now and not _lease_renew(lease, study=rater.study, now=now):
            lease.released_at = now  # its slot went to someone else; a vote on it is still stored
            lease.save(update_fields=["released_at"])
            lease = None
        if lease is None and _lease_claim(rater, now=now) is None:
            return None
    return statements.pending_lease(rater)


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
    with write_transaction():
        lease = statements.lease_to_vote(rater_id, slug, token)
        rater = lease.rater if lease else statements.rater_in_study(rater_id, slug)  # then only to tell why
        if rater is None:
            raise Rater.DoesNotExist(f"no rater {rater_id} in the study {slug!r}")
        study = rater.study
        if study.status == Study.Status.DRAFT and not drafts:
            raise Study.DoesNotExist(f"the study {slug!r} is a draft")
        if lease is None:
            raise LeaseNotFound(rater)
        if lease.voted_at is not None:
            vote = Vote.objects.get(rater=rater, item_id=lease.item_id)
            info = vote.meta.get("assignment", {})
            counted, late = info.get("counted", False), info.get("late", False)
            return VoteOutcome(vote, rater, created=False, counted=counted, late=late)
        if rate is not None and rater.votes_done >= rate[0]:  # fewer votes in all cannot be too many
            _check_rate(rater, rate, now)
        server_ms = max(0, int((now - lease.created_at).total_seconds() * 1000))
        # The browser's time, at most the server's (models.RESPONSE_MS), else the server's.
        decided_ms = server_ms if client_ms is None else min(client_ms, server_ms)
        too_fast = decided_ms < study.threshold_ms(lease.words)
        counted = not not_familiar and not too_fast
        late = lease.released_at is not None or lease.expires_at <= now
        vote = Vote.objects.create(
            item_id=lease.item_id,
            judge_id=lease.human_pool_id or judge_human_pool(study=study).pk,
            rater=rater,
            shown_first=lease.shown_first,
            choice_shown=choice_shown,
            choice=choice_from_shown(lease.shown_first, choice_shown) if choice_shown else None,
            not_familiar=not_familiar,
            client_ms=client_ms,
            server_ms=server_ms,
            received_at=now,
            meta={"assignment": {"counted": counted, "too_fast": too_fast, "late": late}},
        )
        Lease.objects.filter(pk=lease.pk).update(voted_at=now)
        held = _held(lease)
        if lease.is_gold:
            rater.score_attention_check(correct=vote.choice == "a1" and not not_familiar)
        else:
            # Seen is seen: a not-familiar or too-fast vote moves the rater's balance too.
            rater.a2_first_lead += 1 if lease.shown_first == Shown.A2_FIRST else -1
            if counted and not held.update(vote=vote):
                _slot_for_late_vote(lease, vote)
            elif not counted:
                held.update(rater=None, claimed_at=None)
        rater.votes_done += 1
        rater.last_seen_at = now
        saved = ["votes_done", "a2_first_lead", "last_seen_at", "gold_seen", "gold_correct", "flagged", "flag_reason"]
        rater.save(update_fields=saved)
        # A released lease was not the rater's pending one: they have another item already.
        if hand_out_next and lease.released_at is None:
            _lease_claim(rater, now=now)
    return VoteOutcome(vote, rater, created=True, counted=counted, late=late)


def judge_human_pool(*, study: Study) -> Judge:
    """The study's human rater pool, where every human vote goes."""
    judge, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
    return judge


def unseen(queryset: QuerySet, rater: Rater) -> QuerySet:
    """The slots or items of `queryset` on questions the rater has not been handed (with
    `one_variant_per_question` off: items they have not been handed)."""
    seen = Lease.objects.filter(rater=rater)
    if rater.study.one_variant_per_question:
        return queryset.exclude(question_id__in=seen.values("question_id"))
    item = "item_id" if queryset.model is Slot else "pk"
    return queryset.exclude(**{f"{item}__in": seen.values("item_id")})


def in_order_needed(slots: QuerySet, rater: Rater) -> QuerySet:
    """The slots of `slots` in the display order the rater's own balance needs next (all of
    them when either order will do)."""
    order = rater.order_needed()
    return slots.filter(shown_first=order) if order else slots


@contextmanager
def write_transaction() -> Iterator[None]:
    """A transaction of the rater path. On SQLite (one writer at a time for the whole database)
    raters' writers first queue for a lock file beside the database: the kernel hands it to the
    next waiter the moment it is free, where SQLite's busy handler would have slept between
    tries (at 32 raters that sleeping, not work, set the pace). Other writers (judge runs,
    imports) still meet the raters at SQLite's own lock."""
    path = str(connection.settings_dict["NAME"])
    in_memory = ":memory:" in path or "mode=memory" in path
    if connection.vendor != "sqlite" or not transaction.get_autocommit() or in_memory:
        with transaction.atomic():
            yield
        return
    with open(f"{path}.writers", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, whatever happens
        with transaction.atomic():
            yield


def _lock(rater: Rater) -> None:
    """Lock the rater's row (only theirs: locking the study joined in would make every rater
    wait for every other one) and refresh what their other requests change, and the study's
    status."""
    locked = Rater.objects.select_for_update(of=("self",)).filter(pk=rater.pk)
    row = locked.values(*statements.LOCKED_RATER_FIELDS, "study__status").get()
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
    expired = now - timedelta(seconds=study.lease_seconds)
    claim = statements.slot_claim(
        study=study, rater_id=rater.pk, order=rater.order_needed(), now=now, claimed_before=expired
    )
    return None if claim is None else _lease_create(rater, *claim, now)


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
