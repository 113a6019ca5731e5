"""Handing items to human raters and recording their votes, correct with many raters at once.

Locking discipline (the reason this is safe on PostgreSQL and on SQLite):
- every transaction here first locks the rater row, so one rater's requests (two tabs, a
  double click, a retry) run one after the other; only the rater row (`of=("self",)`): the
  study joined in by select_related must not be locked, or every rater of the study waits
  for every other one on PostgreSQL (docs/BENCHMARKS.md);
- whoever changes how full an item is (a new lease, a counted vote) holds that item's row
  lock, so the counts read under the lock are the truth; locks are always taken in the order
  rater -> lease -> item, so two transactions never wait on each other in a circle;
- on SQLite every transaction begins IMMEDIATE (see settings), which serialises writers.
An item's fullness is its counted votes (`ComparisonItem.human_a1_first/human_a2_first`) plus
the leases still holding a slot; `annotations.balance` decides the display order from them.

Choosing which item to try reads a few rows of one index, whatever the study's size: each item
keeps `fill` (counted votes + leases with `holds_slot`), changed in the same transaction as
the lease or vote that changes it, and expired leases stop holding through a sweep before each
hand-out. `fill` only orders the candidates; the decision is taken under the item's lock from
the votes and leases themselves. When the quick candidates give nothing (an item out of balance
after a late vote, a study nearly complete), the exact scan over the study's items decides.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Abs, Coalesce
from django.utils import timezone

from annotations import balance
from annotations.models import Answer, ComparisonItem, Judge, Lease, Rater, Shown, Study, Vote

# Gold accuracy is judged only after this many attention checks, so one slip does not flag.
GOLD_MIN_SEEN = 3
# How many of the emptiest items to try (each under its own lock) before giving up.
CANDIDATES_TRIED = 8
# At most this many expired leases are let go per hand-out (the rest by the next ones).
SWEEP_BATCH = 50


class LeaseNotFound(Exception):
    """The token is not one of this rater's leases: nothing is recorded."""


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
    *,
    study: Study,
    participant_id: str,
    source: str = Rater.Source.DIRECT,
    source_meta: dict | None = None,
    target: int | None = None,
) -> Rater:
    """Find or create the rater with this participant id: coming back with the same id resumes."""
    participant_id = participant_id.strip()
    if not participant_id:
        raise ValueError("rater_enter: participant_id is empty")
    if target is not None and target < 1:
        raise ValueError(f"rater_enter: target must be at least 1, got {target}")
    now = timezone.now()
    with transaction.atomic():
        judge_human_pool(study=study)
        rater, created = Rater.objects.get_or_create(
            study=study,
            participant_id=participant_id,
            defaults={
                "source": source,
                "source_meta": source_meta or {},
                "target": target or study.target_per_rater,
                "consent_at": now,
                "last_seen_at": now,
            },
        )
        if not created:
            rater.last_seen_at = now
            rater.consent_at = rater.consent_at or now
            rater.source_meta = {**rater.source_meta, **(source_meta or {})}
            if target:
                rater.target = target
            rater.save(update_fields=["last_seen_at", "consent_at", "source_meta", "target"])
    return rater


def _rater_locked(rater: Rater) -> None:
    """Lock the rater's row and refresh the caller's instance (and its study) from it. Only the
    rater row: the study joined in must not be locked, or every rater of the study waits for
    every other one on PostgreSQL (docs/BENCHMARKS.md)."""
    rater.refresh_from_db(from_queryset=Rater.objects.select_for_update(of=("self",)).select_related("study"))


def _lease_queryset() -> QuerySet[Lease]:
    return Lease.objects.select_related("item__question", "item__answer_a1", "item__answer_a2")


def lease_next(*, rater: Rater, now: datetime | None = None) -> Lease | None:
    """The rater's current item: the pending lease if it still holds, else a new one.

    Returns None when the rater is finished: target reached, study not collecting, or no item
    left that they may rate.
    """
    now = now or timezone.now()
    # Fast path without the write lock: reloading the page while the lease holds.
    held = Lease.objects.pending().filter(rater=rater).values_list("pk", "expires_at").first()
    if held is not None and held[1] > now:
        return _lease_queryset().get(pk=held[0])
    study = rater.study
    quick = None
    if study.status == Study.Status.COLLECTING and rater.votes_done < rater.target:  # decided again under the lock
        _sweep_expired(study.pk, now=now)
        # The candidates are read before the lock is taken, so that the write lock (the whole
        # database's on SQLite) is held for the decision only; they stay valid as long as the
        # rater has voted nothing since (checked under the lock).
        if held is None:
            quick = _quick_candidates(rater, study, gold=_gold_turn(rater, study))
    with transaction.atomic():
        lease_id = _lease_next_locked(rater, now=now, quick=quick)
    # The page's question and answers are read after the lock is let go.
    return None if lease_id is None else _lease_queryset().get(pk=lease_id)


def _gold_turn(rater: Rater, study: Study) -> bool:
    return study.gold_every > 0 and (rater.votes_done + 1) % (study.gold_every + 1) == 0


def _lease_next_locked(rater: Rater, *, now: datetime, quick: list[int] | None) -> int | None:
    """Under the rater's lock: keep, renew or let go of the pending lease, or hand out a new
    one. `quick` are candidates read before the lock for the turn (gold or not) seen then."""
    votes_seen = rater.votes_done
    _rater_locked(rater)
    study = rater.study
    current = Lease.objects.select_for_update(of=("self",)).pending().filter(rater=rater).order_by().first()
    if current is not None:
        if current.expires_at > now or _lease_renew(current, study=study, now=now):
            return current.pk
        _lease_let_go(current, released_at=now)
    if study.status != Study.Status.COLLECTING or rater.votes_done >= rater.target:
        return None
    if rater.votes_done != votes_seen or current is not None:
        quick = None  # they voted (another tab) or let a lease go meanwhile: read them again
    lease = None
    if _gold_turn(rater, study):
        lease = _lease_hand_out(rater, study, gold=True, now=now, quick=quick)
        quick = None
    if lease is None:
        lease = _lease_hand_out(rater, study, gold=False, now=now, quick=quick)
    return None if lease is None else lease.pk


def _slots_locked(item_id: int, *, now: datetime, exclude_lease: int | None = None) -> tuple[int, int]:
    """Lock the item and return (A1-left, A2-left) = counted votes + leases holding a slot.

    Two statements: on PostgreSQL a statement's snapshot is taken before it waits for the row
    lock, so leases counted in the same statement as the lock would miss those committed by the
    transaction we waited for. Written out in SQL because this runs under the write lock on
    every hand-out, and building it through the ORM cost 2 ms of the lock's time against 0.1 ms
    for the statements. The lease conditions are those of LeaseQuerySet.holding().
    """
    ops = connection.ops
    item, lease = ops.quote_name(ComparisonItem._meta.db_table), ops.quote_name(Lease._meta.db_table)
    lock = " FOR UPDATE" if connection.features.has_select_for_update else ""
    params = [ops.adapt_datetimefield_value(now), item_id]
    holding = (
        f"SELECT shown_first, COUNT(*) FROM {lease} WHERE expires_at > %s AND item_id = %s"  # noqa: S608
        " AND voted_at IS NULL AND released_at IS NULL"
    )
    if exclude_lease is not None:
        holding += " AND id <> %s"
        params.append(exclude_lease)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT human_a1_first, human_a2_first FROM {item} WHERE id = %s{lock}", [item_id])  # noqa: S608
        a1, a2 = cursor.fetchone()
        cursor.execute(holding + " GROUP BY shown_first", params)
        open_by_order = dict(cursor.fetchall())
    return a1 + open_by_order.get(Shown.A1_FIRST, 0), a2 + open_by_order.get(Shown.A2_FIRST, 0)


def _lease_renew(lease: Lease, *, study: Study, now: datetime) -> bool:
    """An expired lease is given back to its rater if its slot is still wanted."""
    if not lease.is_gold:
        savepoint = transaction.savepoint()
        a1, a2 = _slots_locked(lease.item_id, now=now, exclude_lease=lease.pk)
        if balance.next_order(a1, a2, study.votes_per_item, tie_break=lease.shown_first) != lease.shown_first:
            transaction.savepoint_rollback(savepoint)  # let go of the item's lock (see _lease_hand_out)
            return False
        transaction.savepoint_commit(savepoint)
    lease.expires_at = now + timedelta(seconds=study.lease_seconds)
    # If the sweep had let it go, it holds its slot again.
    lease.save(update_fields=["expires_at", *_holding_set(lease, True)])
    return True


def _lease_let_go(lease: Lease, *, released_at: datetime) -> None:
    """The rater came back after their expired lease's slot went to someone else."""
    lease.released_at = released_at
    lease.save(update_fields=["released_at", *_holding_set(lease, False)])


def _holding_set(lease: Lease, holds: bool) -> list[str]:
    """Make the (locked) lease hold its slot or not, keeping its item's `fill` with it; returns
    the lease fields to save."""
    if lease.holds_slot == holds:
        return []
    lease.holds_slot = holds
    _fill_add(lease.item_id, 1 if holds else -1)
    return ["holds_slot"]


def _fill_add(item_id: int, delta: int, **counted) -> None:
    """Change an item's `fill` (and, through `counted`, its counted votes) in one statement."""
    ComparisonItem.objects.filter(pk=item_id).update(fill=F("fill") + delta, **counted)


def _sweep_expired(study_id: int, *, now: datetime) -> None:
    """Expired leases stop holding their slot, so their items come first again in the hand-out.

    Each lease is let go in its own short transaction (conditional on still holding, so two
    raters sweeping at once count it once), before the caller takes any lock: a sweep never
    holds one item while the hand-out waits for another. Usually no lease has expired and this
    is one indexed read.
    """
    expired = list(
        Lease.objects.filter(study_id=study_id, holds_slot=True, expires_at__lte=now)
        .order_by()
        .values_list("pk", "item_id")[:SWEEP_BATCH]
    )
    for lease_id, item_id in expired:
        with transaction.atomic():
            if Lease.objects.filter(pk=lease_id, holds_slot=True, expires_at__lte=now).update(holds_slot=False):
                _fill_add(item_id, -1)


def _open_count(order: str, now: datetime, study: Study) -> Case:
    holding = (
        Lease.objects.holding(now)
        .filter(item=OuterRef("pk"), shown_first=order)
        .order_by()
        .values("item")
        .annotate(n=Count("pk"))
        .values("n")
    )
    # Most items have no open lease. Counting only where the study's (few) open leases are
    # makes the candidate query one pass over the items; counting for every item scanned the
    # open leases once per item on PostgreSQL, which collapsed under load (docs/BENCHMARKS.md).
    with_open = Lease.objects.holding(now).filter(study=study).values("item_id")
    return Case(
        When(pk__in=with_open, then=Coalesce(Subquery(holding, output_field=IntegerField()), Value(0))),
        default=Value(0),
        output_field=IntegerField(),
    )


def _eligible_items(rater: Rater, study: Study, *, gold: bool) -> QuerySet[ComparisonItem]:
    """Items this rater may still be given, whatever their quota."""
    seen = Lease.objects.filter(rater=rater)
    items = ComparisonItem.objects.filter(
        study=study,
        question__is_gold=gold,
        answer_a1__review_status=Answer.Review.APPROVED,
        answer_a2__review_status=Answer.Review.APPROVED,
    ).exclude(pk__in=seen.values("item_id"))
    if study.one_variant_per_question:
        items = items.exclude(question_id__in=seen.values("item__question_id"))
    return items


def rater_may_wait(*, rater: Rater) -> bool:
    """True when the rater has no item now only because other raters' leases hold the free
    slots: an item they may rate still lacks counted votes. Such a rater is asked to come back
    in a moment, not sent off with the completion code."""
    study = rater.study
    if study.status != Study.Status.COLLECTING or rater.votes_done >= rater.target:
        return False
    counted = F("human_a1_first") + F("human_a2_first")
    return (
        _eligible_items(rater, study, gold=False)
        .annotate(counted=counted)
        .filter(counted__lt=study.votes_per_item)
        .exists()
    )


def _quick_candidates(rater: Rater, study: Study, *, gold: bool) -> list[int]:
    """Ids of the emptiest items this rater may get by their `fill`: a walk of the
    `item_hand_out_order` index that stops after a few rows."""
    items = _eligible_items(rater, study, gold=gold)
    if not gold:  # attention checks have no quota: any unseen one will do
        items = items.filter(fill__lt=study.votes_per_item)
    return list(items.order_by("fill", "rank").values_list("pk", flat=True)[:CANDIDATES_TRIED])


def _exact_candidates(rater: Rater, study: Study, *, gold: bool, now: datetime) -> list[int]:
    """The emptiest items this rater may get counted from the votes and leases themselves (a
    scan of the study's items), including items that only need a vote to restore balance."""
    items = (
        _eligible_items(rater, study, gold=gold)
        .annotate(
            a1=F("human_a1_first") + _open_count(Shown.A1_FIRST, now, study),
            a2=F("human_a2_first") + _open_count(Shown.A2_FIRST, now, study),
        )
        .annotate(total=F("a1") + F("a2"), gap=Abs(F("a1") - F("a2")))
    )
    if not gold:
        quota = study.votes_per_item
        items = items.filter(Q(total__lt=quota) | Q(gap__gt=quota % 2))
    return list(items.order_by("total", "rank").values_list("pk", flat=True)[:CANDIDATES_TRIED])


def _lease_hand_out(
    rater: Rater, study: Study, *, gold: bool, now: datetime, quick: list[int] | None = None
) -> Lease | None:
    if quick is None:
        quick = _quick_candidates(rater, study, gold=gold)
    for item_id in quick:
        if (lease := _lease_try(rater, study, item_id, gold=gold, now=now)) is not None:
            return lease
    for item_id in _exact_candidates(rater, study, gold=gold, now=now):
        if item_id not in quick and (lease := _lease_try(rater, study, item_id, gold=gold, now=now)) is not None:
            return lease
    return None


def _lease_try(rater: Rater, study: Study, item_id: int, *, gold: bool, now: datetime) -> Lease | None:
    """Lease this item to the rater if, under the item's lock, it still wants a vote."""
    # The candidate lists are read without locks; decide again under the item's lock. A full
    # item's lock is let go at once (rolling back to the savepoint releases it on PostgreSQL),
    # so a transaction never holds one item while waiting for another: two raters trying
    # candidates in different orders cannot deadlock.
    savepoint = transaction.savepoint()
    a1, a2 = _slots_locked(item_id, now=now)
    tie_break = random.choice([Shown.A1_FIRST, Shown.A2_FIRST])
    if gold:
        order = tie_break if a1 == a2 else (Shown.A1_FIRST if a1 < a2 else Shown.A2_FIRST)
    else:
        order = balance.next_order(a1, a2, study.votes_per_item, tie_break=tie_break)
    if order is None:
        transaction.savepoint_rollback(savepoint)
        return None
    transaction.savepoint_commit(savepoint)
    lease = Lease.objects.create(
        study=study,
        rater=rater,
        item_id=item_id,
        token=secrets.token_urlsafe(24),
        shown_first=order,
        is_gold=gold,
        created_at=now,
        expires_at=now + timedelta(seconds=study.lease_seconds),
    )
    _fill_add(item_id, 1)
    return lease


def vote_record(
    *,
    rater: Rater,
    token: str,
    choice_shown: str,
    not_familiar: bool = False,
    client_ms: int | None = None,
    now: datetime | None = None,
) -> VoteOutcome:
    """Store the rater's vote on one of their own leases, exactly once.

    A resubmission returns the vote already stored. A vote on an expired (even released)
    lease is stored all the same and flagged late in `meta`. Not-familiar votes and votes
    faster than the study's threshold are stored but do not count towards the item's quota,
    so the item is offered again. The threshold uses the browser's time when it was sent,
    else the server's.
    """
    now = now or timezone.now()
    with transaction.atomic():
        _rater_locked(rater)
        study = rater.study
        # The lease alone, with its two answers' word counts for the timing threshold: the
        # answers' texts and renders are not needed to record a vote.
        lease = (
            Lease.objects.select_for_update(of=("self",))
            .filter(rater=rater, token=token)
            .annotate(words=F("item__answer_a1__len_words") + F("item__answer_a2__len_words"))
            .first()
        )
        if lease is None:
            raise LeaseNotFound("this item is not one of yours; nothing was recorded")
        if lease.voted_at is not None:
            vote = Vote.objects.get(rater=rater, item_id=lease.item_id)
            meta = vote.meta.get("assignment", {})
            return VoteOutcome(
                vote=vote, created=False, counted=meta.get("counted", False), late=meta.get("late", False)
            )
        server_ms = max(0, int((now - lease.created_at).total_seconds() * 1000))
        too_fast = (client_ms if client_ms is not None else server_ms) < study.threshold_ms(lease.words)
        counted = not not_familiar and not too_fast
        late = lease.released_at is not None or lease.expires_at <= now
        vote = Vote.objects.create(
            item_id=lease.item_id,
            judge=judge_human_pool(study=study),
            rater=rater,
            shown_first=lease.shown_first,
            choice_shown=choice_shown,
            not_familiar=not_familiar,
            client_ms=client_ms,
            server_ms=server_ms,
            received_at=now,
            meta={"assignment": {"counted": counted, "too_fast": too_fast, "late": late}},
        )
        # The lease stops holding its slot; a counted vote takes the slot for good.
        fill_delta = int(counted) - int(lease.holds_slot)
        lease.voted_at = now
        lease.holds_slot = False
        lease.save(update_fields=["voted_at", "holds_slot"])
        counted_field = {}
        if counted:
            field = "human_a1_first" if lease.shown_first == Shown.A1_FIRST else "human_a2_first"
            counted_field[field] = F(field) + 1
        if fill_delta or counted_field:
            _fill_add(lease.item_id, fill_delta, **counted_field)
        rater.last_seen_at = now
        rater.votes_done += 1
        fields = ["last_seen_at", "votes_done"]
        if lease.is_gold:
            _rater_score_gold(rater, study=study, correct=vote.choice == "a1" and not not_familiar)
            fields += ["gold_seen", "gold_correct", "flagged", "flag_reason"]
        rater.save(update_fields=fields)
    return VoteOutcome(vote=vote, created=True, counted=counted, late=late)


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
