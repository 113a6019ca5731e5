"""Handing items to human raters and recording their votes: a queue of slots.

Every item has one `Slot` per counted vote it needs, half in each display order, made with the
item (`Slot.objects.sync`). A rater claims the next slot that is open (no counted vote yet) and
free (never claimed, freed by an uncounted vote, or claimed longer ago than the study's lease
time) on a question they have not seen, lowest round first so that items fill evenly. They get
a `Lease`: their token and the order shown. A counted vote closes the slot; an uncounted one
(not familiar, too fast) frees it. Order balance and quotas hold by construction, and expiry is
a condition of the claim's query. Attention checks have no quota and no slots: every
(gold_every + 1)-th item is a gold item the rater has not seen.

Races are settled by the database: every transaction here first locks the rater's row, so one
rater's requests (two tabs, a double click) run one after the other, and the claim locks its
slot with SKIP LOCKED on PostgreSQL (a claim never waits, so no two transactions wait on each
other in a circle); on SQLite every transaction begins IMMEDIATE (settings), one writer at a
time. A vote that arrives after its slot went to someone else is stored all the same, flagged
late; if it counts, it gets a slot of its own and the item one more free slot in the other
order, so that the orders are equal again once that one is filled.
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
from django.db.models import F, QuerySet
from django.utils import timezone

from annotations import statements
from annotations.models import Answer, ComparisonItem, Judge, Lease, Rater, Shown, Slot, Study, Vote, choice_from_shown

# Gold accuracy is judged only after this many attention checks, so one slip does not flag.
GOLD_MIN_SEEN = 3


class LeaseNotFound(Exception):
    """The token is not one of this rater's leases: nothing is recorded."""


class TooManyVotes(Exception):
    """The rater sent more votes than the rate allows: nothing is recorded."""

    def __init__(self, retry_after: int):
        super().__init__(f"too many votes; try again in {retry_after} s")
        self.retry_after = retry_after


@dataclass(frozen=True)
class VoteOutcome:
    vote: Vote
    created: bool  # False when this was a resubmission of an already stored vote
    counted: bool  # counts towards the item's quota (familiar and not too fast)
    late: bool  # arrived after the lease had expired


def judge_human_pool(*, study: Study) -> Judge:
    """The study's human rater pool, where every human vote goes."""
    judge, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
    return judge


def rater_enter(
    *, study: Study, participant_id: str, source: str = Rater.Source.DIRECT, source_meta: dict | None = None
) -> Rater:
    """Find or create the rater with this participant id: coming back with the same id resumes.
    The target is the study's; a rater cannot change it."""
    participant_id = participant_id.strip()
    if not participant_id:
        raise ValueError("rater_enter: participant_id is empty")
    now = timezone.now()
    with _write_transaction():
        judge_human_pool(study=study)
        rater, created = Rater.objects.get_or_create(
            study=study,
            participant_id=participant_id,
            defaults={
                "source": source,
                "source_meta": source_meta or {},
                "target": study.target_per_rater,
                "consent_at": now,
                "last_seen_at": now,
            },
        )
        if not created:
            rater.last_seen_at = now
            rater.source_meta = {**rater.source_meta, **(source_meta or {})}
            rater.save(update_fields=["last_seen_at", "source_meta"])
    rater.study = study
    return rater


def lease_next(*, rater: Rater, now: datetime | None = None) -> Lease | None:
    """The rater's current item: their pending lease if it still holds (or can be renewed),
    else a new one, with its `page` (what the task page shows). None when the rater is
    finished: target reached, study not collecting, or no slot free for them now."""
    now = now or timezone.now()
    lease = statements.pending_lease(rater.pk)
    if lease is not None and lease.expires_at > now:
        return lease
    # As little Python as can be under SQLite's write lock (the whole database's): what the
    # page shows is read after it.
    with _write_transaction():
        _lock(rater)
        lease = _only(Lease.objects.pending().filter(rater=rater))  # again: another tab may have taken one
        if lease is not None and not (lease.expires_at > now or _lease_renew(lease, study=rater.study, now=now)):
            lease.released_at = now  # its slot went to someone else; a vote on it is still stored
            lease.save(update_fields=["released_at"])
            lease = None
        if lease is None:
            lease = _lease_claim(rater, now=now)
    return None if lease is None else statements.pending_lease(rater.pk)


def vote_record(
    *,
    rater: Rater,
    token: str,
    choice_shown: str,
    not_familiar: bool = False,
    client_ms: int | None = None,
    now: datetime | None = None,
    hand_out_next: bool = False,
    rate: tuple[int, int] | None = None,
) -> VoteOutcome:
    """Store the rater's vote on one of their own leases, exactly once.

    A resubmission returns the vote already stored. A vote on an expired (even released) lease
    is stored all the same and flagged late in `meta`. Not-familiar votes and votes faster than
    the study's threshold (the browser's time when it was sent, else the server's) are stored
    but do not count, and free the slot for someone else. With `hand_out_next` the rater's next
    item is claimed in the same transaction, so that the page after the vote is a read. The
    rater's fields are refreshed from their locked row. With `rate` = (votes, seconds), a vote
    beyond that many in any such span raises TooManyVotes (counted from the rater's stored
    votes under their lock: exact across every worker and host, no cache needed).
    """
    now = now or timezone.now()
    with _write_transaction():
        _lock(rater)
        study = rater.study
        lease = statements.pending_lease(rater.pk)  # the usual case: the vote is on the current item
        if lease is None or lease.token != token:
            words = F("item__answer_a1__len_words") + F("item__answer_a2__len_words")
            lease = _only(Lease.objects.filter(rater=rater, token=token).annotate(words=words))
        if lease is None:
            raise LeaseNotFound("this item is not one of yours; nothing was recorded")
        if lease.voted_at is not None:
            vote = Vote.objects.get(rater=rater, item_id=lease.item_id)
            info = vote.meta.get("assignment", {})
            return VoteOutcome(vote, created=False, counted=info.get("counted", False), late=info.get("late", False))
        if rate is not None and rater.votes_done >= rate[0]:  # fewer votes in all cannot be too many
            _check_rate(rater, rate, now)
        server_ms = max(0, int((now - lease.created_at).total_seconds() * 1000))
        too_fast = (client_ms if client_ms is not None else server_ms) < study.threshold_ms(lease.words)
        counted = not not_familiar and not too_fast
        late = lease.released_at is not None or lease.expires_at <= now
        vote = Vote.objects.create(
            item_id=lease.item_id,
            # Read with the rater from their cookie (statements.rater_in_study), else looked up.
            judge_id=getattr(rater, "human_pool_id", None) or judge_human_pool(study=study).pk,
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
        held = Slot.objects.filter(lease=lease, vote__isnull=True)
        if lease.is_gold:
            _rater_score_gold(rater, study=study, correct=vote.choice == "a1" and not not_familiar)
        elif counted and not held.update(vote=vote):
            _slot_for_late_vote(lease, vote)
        elif not counted:
            held.update(lease=None, claimed_at=None)
        rater.votes_done += 1
        rater.last_seen_at = now
        rater.save(update_fields=["votes_done", "last_seen_at", "gold_seen", "gold_correct", "flagged", "flag_reason"])
        # A released lease was not the rater's pending one: they have another item already.
        if hand_out_next and lease.released_at is None:
            _lease_claim(rater, now=now)
    return VoteOutcome(vote, created=True, counted=counted, late=late)


def _check_rate(rater: Rater, rate: tuple[int, int], now: datetime) -> None:
    limit, seconds = rate
    recent = Vote.objects.filter(rater=rater, received_at__gt=now - timedelta(seconds=seconds))
    # The limit-th latest vote in the span, if there is one: it must leave the span first.
    for oldest in recent.order_by("-received_at").values_list("received_at", flat=True)[limit - 1 : limit]:
        raise TooManyVotes(max(1, math.ceil((oldest + timedelta(seconds=seconds) - now).total_seconds())))


def rater_can_get_more(*, rater: Rater) -> bool:
    """Whether the study may still give this rater an item, now or once other raters' claims
    are voted on or expire. A rater for whom this is False and who voted is finished."""
    study = rater.study
    if not _may_have_more(rater, study):
        return False
    if _unseen(_rateable_slots(study), rater, study).exists():
        return True
    return _gold_turn(study, rater.votes_done) and _unseen(_gold_items(study), rater, study).exists()


def study_is_full(*, study: Study) -> bool:
    """True when the study has slots and every one has its counted vote: nobody new can get
    anything."""
    return not _rateable_slots(study).exists() and Slot.objects.filter(study=study).exists()


def rater_finish(*, rater: Rater) -> str:
    """Record, once, that the rater finished, with their completion code (their own with
    `per_rater_codes`, else the study's); returns the code. Only for a rater who voted and for
    whom `rater_can_get_more` is False."""
    if rater.finished_at is None:
        study = rater.study
        code = secrets.token_hex(4).upper() if study.per_rater_codes else study.completion_code
        Rater.objects.filter(pk=rater.pk, finished_at__isnull=True).update(
            finished_at=timezone.now(), completion_code=code
        )
        rater.refresh_from_db(fields=["finished_at", "completion_code"])
    return rater.completion_code


@contextmanager
def _write_transaction() -> Iterator[None]:
    """A transaction of the rater path. On SQLite (one writer at a time for the whole database)
    raters' writers first queue for a lock file beside the database: the kernel hands it to the
    next waiter the moment it is free, where SQLite's busy handler would have slept between
    tries (at 32 raters that sleeping, not work, set the pace). Other writers (judge runs,
    imports) still meet the raters at SQLite's own lock."""
    path = str(connection.settings_dict["NAME"])
    in_memory = ":memory:" in path or "mode=memory" in path
    queue = connection.vendor == "sqlite" and transaction.get_autocommit() and not in_memory
    if not queue:
        with transaction.atomic():
            yield
        return
    with open(f"{path}.writers", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed, whatever happens
        with transaction.atomic():
            yield


def _only(queryset: QuerySet) -> object | None:
    """The one row of `queryset` (a unique lookup), or None. Not `first()`, which orders by the
    primary key: Django's compiler then matches every selected column against the ORDER BY,
    a third of a page's time."""
    return next(iter(queryset.order_by()[:1]), None)


def _lock(rater: Rater) -> None:
    """Lock the rater's row (only theirs: locking the study joined in would make every rater
    wait for every other one) and refresh what their other requests change, and the study's
    status."""
    fields = ["votes_done", "gold_seen", "gold_correct", "flagged", "flag_reason", "target"]
    locked = Rater.objects.select_for_update(of=("self",)).filter(pk=rater.pk)
    row = locked.values(*fields, "study__status").get()
    for name in fields:
        setattr(rater, name, row[name])
    rater.study.status = row["study__status"]


def _lease_renew(lease: Lease, *, study: Study, now: datetime) -> bool:
    """An expired lease comes back to its rater if nobody else has claimed its slot since."""
    if not lease.is_gold and not Slot.objects.filter(lease=lease, vote__isnull=True).update(claimed_at=now):
        return False
    lease.expires_at = now + timedelta(seconds=study.lease_seconds)
    lease.save(update_fields=["expires_at"])
    return True


def _may_have_more(rater: Rater, study: Study) -> bool:
    return study.status == Study.Status.COLLECTING and rater.votes_done < rater.target


def _gold_turn(study: Study, votes_done: int) -> bool:
    """Whether the item after `votes_done` votes is an attention check."""
    return study.gold_every > 0 and (votes_done + 1) % (study.gold_every + 1) == 0


def _unseen(queryset: QuerySet, rater: Rater, study: Study) -> QuerySet:
    """Slots or items (both have `question_id` and an item) of questions, or with
    `one_variant_per_question` off of items, that the rater has not been handed."""
    seen = Lease.objects.filter(rater=rater)
    if study.one_variant_per_question:
        return queryset.exclude(question_id__in=seen.values("question_id"))
    item = "item_id" if queryset.model is Slot else "pk"
    return queryset.exclude(**{f"{item}__in": seen.values("item_id")})


def _rateable_slots(study: Study) -> QuerySet[Slot]:
    """The study's open slots on items raters may be shown (both answers approved)."""
    approved = Answer.Review.APPROVED
    return Slot.objects.open().filter(
        study=study, item__answer_a1__review_status=approved, item__answer_a2__review_status=approved
    )


def _gold_items(study: Study) -> QuerySet[ComparisonItem]:
    return ComparisonItem.objects.approved().filter(study=study, question__is_gold=True)


def _lease_claim(rater: Rater, *, now: datetime) -> Lease | None:
    """Under the rater's lock, with no pending lease: hand out their next item, if any."""
    study = rater.study
    if not _may_have_more(rater, study):
        return None
    lease_time = timedelta(seconds=study.lease_seconds)
    if _gold_turn(study, rater.votes_done):
        gold = _unseen(_gold_items(study), rater, study).order_by("?")  # attention checks are few
        item = gold.values_list("pk", "question_id").first()
        if item is not None:
            order = random.choice([Shown.A1_FIRST, Shown.A2_FIRST])
            return _lease_create(rater, study, *item, order, now, gold=True)
    slot = statements.free_slot(study=study, rater_id=rater.pk, claimed_before=now - lease_time)
    if slot is None:
        return None
    slot_id, *claim = slot
    lease = _lease_create(rater, study, *claim, now)
    Slot.objects.filter(pk=slot_id).update(lease=lease, claimed_at=now)
    return lease


def _lease_create(
    rater: Rater, study: Study, item_id: int, question_id: int, order: str, now: datetime, *, gold: bool = False
) -> Lease:
    return Lease.objects.create(
        study=study,
        rater=rater,
        item_id=item_id,
        question_id=question_id,
        token=secrets.token_urlsafe(24),
        shown_first=order,
        is_gold=gold,
        created_at=now,
        expires_at=now + timedelta(seconds=study.lease_seconds),
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


_GOLD_FLAG = "attention checks"


def _rater_score_gold(rater: Rater, *, study: Study, correct: bool) -> None:
    """Record one attention check and (un)flag the rater against the study's bar."""
    rater.gold_seen += 1
    rater.gold_correct += int(correct)
    if rater.gold_seen < GOLD_MIN_SEEN:
        return
    accuracy = rater.gold_correct / rater.gold_seen
    if accuracy < study.gold_min_accuracy:
        rater.flagged = True
        rater.flag_reason = (
            f"{_GOLD_FLAG}: {rater.gold_correct}/{rater.gold_seen} correct, under {study.gold_min_accuracy:.0%}"
        )
    elif rater.flagged and rater.flag_reason.startswith(_GOLD_FLAG):
        rater.flagged = False
        rater.flag_reason = ""
