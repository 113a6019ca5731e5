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
from typing import NamedTuple

from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.models import Case, Count, F, IntegerField, OuterRef, Q, QuerySet, Subquery, Value, When
from django.db.models.functions import Abs, Coalesce
from django.utils import timezone

from annotations import balance
from annotations.models import (
    Answer,
    ComparisonItem,
    Judge,
    Lease,
    Question,
    Rater,
    Shown,
    Study,
    Vote,
    choice_from_shown,
)
from biasstudy import rawsql

# Gold accuracy is judged only after this many attention checks, so one slip does not flag.
GOLD_MIN_SEEN = 3
# How many of the emptiest items to try (each under its own lock) before giving up.
CANDIDATES_TRIED = 8
# At most this many expired leases are let go per hand-out (the rest by the next ones).
SWEEP_BATCH = 50
# A process looks for expired leases of a study at most this often (`fill` only orders the
# candidates, so an item coming back a second late changes nothing but the order).
SWEEP_EVERY = timedelta(seconds=1)
_last_sweep: dict[int, datetime] = {}


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


# The hot path's statements are written out (biasstudy/rawsql.py says why); these are the
# columns they read, and the table names they read them from.
_RATER = rawsql.Columns(Rater, "r")
# The study without its instructions and consent texts, which no statement here needs.
_STUDY = rawsql.Columns(
    Study, "s", [f.attname for f in Study._meta.concrete_fields if f.name not in ("instructions", "consent")]
)
_LEASE = rawsql.Columns(Lease, "l")
_ITEM = rawsql.Columns(
    ComparisonItem, "i", ["id", "study_id", "question_id", "kind_id", "answer_a1_id", "answer_a2_id"]
)
_QUESTION = rawsql.Columns(Question, "q", ["id", "study_id", "text", "text_html", "text_html_key", "is_gold"])
_TEXT = ["id", "question_id", "text", "text_html", "text_html_key", "len_words"]
_ANSWER_1 = rawsql.Columns(Answer, "a1", _TEXT)
_ANSWER_2 = rawsql.Columns(Answer, "a2", _TEXT)


def _lock(alias: str, *, skip_locked: bool = False) -> str:
    """` FOR UPDATE OF <alias>` where the database has row locks (PostgreSQL); SQLite's
    IMMEDIATE transactions already hold the whole database's write lock."""
    if not rawsql.row_locks():
        return ""
    return f" FOR UPDATE OF {alias}" + (" SKIP LOCKED" if skip_locked else "")


def _rater_and_study_row(where: str, params: list, *, also: str = "", joins: str = "") -> tuple | None:
    """The row of one rater and their study (`_RATER` then `_STUDY` columns, then `also`)."""
    return rawsql.fetchone(
        f"SELECT {_RATER.sql}, {_STUDY.sql}{also} FROM {rawsql.table(Rater)} r"  # noqa: S608
        f" JOIN {rawsql.table(Study)} s ON s.id = r.study_id{joins} WHERE {where}",
        params,
    )


@dataclass(frozen=True)
class RaterRef:
    """A rater as their cookie names them, not read yet: their id, and the id and slug of the
    study of the URL. The statements that read the rater (`rater_with_study`, and the lock of
    `vote_record`) check that the rater is in that study, and that the study is open to them:
    not a draft, unless `drafts` (staff may see drafts)."""

    rater_id: int
    study_id: int
    slug: str
    drafts: bool = False

    def where(self) -> tuple[str, list]:
        """The condition on `r` (rater) and `s` (study), and its parameters."""
        sql, params = "r.id = %s AND s.id = %s AND s.slug = %s", [self.rater_id, self.study_id, self.slug]
        if not self.drafts:
            sql, params = f"{sql} AND s.status <> %s", [*params, Study.Status.DRAFT]
        return sql, params


def rater_with_study(ref: RaterRef) -> Rater | None:
    """The rater with their study (read in one statement, without the study's long texts), if
    the reference holds."""
    row = _rater_and_study_row(*ref.where())
    if row is None:
        return None
    rater, rater.study = rawsql.build_all(row, _RATER, _STUDY)
    return rater


class _Unread:
    """`lease_next(pending=UNREAD)`: the pending lease has not been read yet."""


UNREAD = _Unread()


def rater_with_study_and_page(ref: RaterRef) -> tuple[Rater, Lease | None] | None:
    """As `rater_with_study`, and in the same statement the rater's pending lease with what the
    task page shows (None when they have none), for `lease_next(pending=...)`."""
    where, params = ref.where()
    row = _rater_and_study_row(
        where,
        params,
        also=f", {_page_sql()}",
        joins=f" LEFT JOIN {rawsql.table(Lease)} l ON l.rater_id = r.id AND {_PENDING}{_page_joins('LEFT JOIN')}",
    )
    if row is None:
        return None
    rater, rater.study = rawsql.build_all(row, _RATER, _STUDY)
    start = _RATER.width + _STUDY.width
    return rater, None if row[start] is None else _page_build(row, start)


def _rater_where(rater: Rater, ref: RaterRef | None) -> tuple[str, list]:
    """The condition on `r` and `s` for this rater: their id, or the reference's checks."""
    return ("r.id = %s", [rater.pk]) if ref is None else ref.where()


def _rater_locked(rater: Rater, ref: RaterRef | None = None) -> int | None:
    """Lock the rater's row and refresh the caller's instance (and its study) from it; returns
    the id of the study's human pool (None before the first rater entered). Only the rater row:
    the study joined in must not be locked, or every rater of the study waits for every other
    one on PostgreSQL (docs/BENCHMARKS.md). Raises Rater.DoesNotExist when the rater is gone
    (or `ref` does not hold)."""
    where, params = _rater_where(rater, ref)
    row = _rater_and_study_row(f"{where}{_lock('r')}", [Judge.Kind.HUMAN, *params], also=_human_pool_sql())
    if row is None:
        raise Rater.DoesNotExist(f"rater {rater.pk} is gone" if ref is None else f"no such rater: {ref}")
    return _rater_refresh(rater, row)


def _human_pool_sql() -> str:
    """A column with the id of the rater's study's human pool (one %s: the Judge kind)."""
    return f", (SELECT j.id FROM {rawsql.table(Judge)} j WHERE j.study_id = s.id AND j.kind = %s)"  # noqa: S608


def _rater_refresh(rater: Rater, row: tuple) -> int | None:
    """Set the rater and their study from a `_rater_and_study_row` with `_human_pool_sql()`;
    returns the pool's id."""
    for name, value in zip(_RATER.attnames, _RATER.values(row), strict=True):
        setattr(rater, name, value)
    rater.study = _STUDY.build(row, _RATER.width)
    return row[_RATER.width + _STUDY.width]


def _rater_and_lease_locked(rater: Rater, token: str, ref: RaterRef | None = None) -> tuple[int | None, Lease, int]:
    """For a vote: lock the rater's row and then their lease of this token, in one statement
    (PostgreSQL locks the rows of `FOR UPDATE OF r, l` in that order, the order every other
    transaction here takes them in), refresh the rater as `_rater_locked` does, and return the
    human pool's id, the lease, and its two answers' word count (for the timing threshold:
    the answers' texts and renders are not needed to record a vote)."""
    where, params = _rater_where(rater, ref)
    row = _rater_and_study_row(
        f"{where}{_lock('r, l')}",
        [Judge.Kind.HUMAN, token, *params],
        also=f"{_human_pool_sql()}, {_LEASE.sql}, a1.len_words + a2.len_words",
        joins=f" JOIN {rawsql.table(Lease)} l ON l.rater_id = r.id AND l.token = %s"
        f" JOIN {rawsql.table(ComparisonItem)} i ON i.id = l.item_id"
        f" JOIN {rawsql.table(Answer)} a1 ON a1.id = i.answer_a1_id JOIN {rawsql.table(Answer)} a2 ON a2.id = i.answer_a2_id",
    )
    if row is None:
        _rater_locked(rater, ref)  # raises if there is no such rater; else the token is not theirs
        raise LeaseNotFound("this item is not one of yours; nothing was recorded")
    human_pool_id = _rater_refresh(rater, row)
    start = _RATER.width + _STUDY.width + 1
    return human_pool_id, _LEASE.build(row, start), row[start + _LEASE.width]


# What the task page shows of a lease `l`: its item, question and two answers (the texts and
# their renders).
_PAGE = (_LEASE, _ITEM, _QUESTION, _ANSWER_1, _ANSWER_2)
_PENDING = "l.voted_at IS NULL AND l.released_at IS NULL"


def _page_sql() -> str:
    return ", ".join(columns.sql for columns in _PAGE)


def _page_joins(join: str) -> str:
    """The tables of `_PAGE` after the lease's, each joined with `join` (JOIN, LEFT JOIN)."""
    return (
        f" {join} {rawsql.table(ComparisonItem)} i ON i.id = l.item_id"
        f" {join} {rawsql.table(Question)} q ON q.id = i.question_id"
        f" {join} {rawsql.table(Answer)} a1 ON a1.id = i.answer_a1_id"
        f" {join} {rawsql.table(Answer)} a2 ON a2.id = i.answer_a2_id"
    )


def _page_build(row: tuple, start: int = 0) -> Lease:
    lease, lease.item, question, answer_a1, answer_a2 = rawsql.build_all(row[start:], *_PAGE)
    lease.item.question, lease.item.answer_a1, lease.item.answer_a2 = question, answer_a1, answer_a2
    return lease


def _lease_page(where: str, params: list) -> Lease | None:
    """One lease with what the task page shows, in one statement."""
    row = rawsql.fetchone(
        f"SELECT {_page_sql()} FROM {rawsql.table(Lease)} l{_page_joins('JOIN')} WHERE {where}",  # noqa: S608
        params,
    )
    return None if row is None else _page_build(row)


def lease_next(*, rater: Rater, now: datetime | None = None, pending: Lease | None | _Unread = UNREAD) -> Lease | None:
    """The rater's current item: the pending lease if it still holds, else a new one.
    `pending`: the rater's pending lease page if the caller has just read it (None: none).

    Returns None when the rater is finished: target reached, study not collecting, or no item
    left that they may rate.
    """
    now = now or timezone.now()
    # Fast path without the write lock: the lease handed out with the last vote, or a reload
    # of the page while the lease holds.
    held = _lease_page(f"l.rater_id = %s AND {_PENDING}", [rater.pk]) if pending is UNREAD else pending
    if held is not None and held.expires_at > now:
        return held
    study = rater.study
    quick = None
    if _may_have_more(rater, study):  # decided again under the lock
        _sweep_expired(study.pk, now=now)
        # The candidates are read before the lock is taken, so that the write lock (the whole
        # database's on SQLite) is held for the decision only; they stay valid as long as the
        # rater has voted nothing since (checked under the lock).
        if held is None:
            quick = _quick_candidates(rater, study, gold=_gold_turn(study, rater.votes_done))
    with transaction.atomic():
        lease_id = _lease_next_locked(rater, now=now, quick=quick)
    # The page's question and answers are read after the lock is let go.
    return None if lease_id is None else _lease_page("l.id = %s", [lease_id])


def _gold_turn(study: Study, votes_done: int) -> bool:
    """Whether the item after `votes_done` votes is an attention check."""
    return study.gold_every > 0 and (votes_done + 1) % (study.gold_every + 1) == 0


def _lease_next_locked(rater: Rater, *, now: datetime, quick: list[_Candidate] | None) -> int | None:
    """Under the rater's lock: keep, renew or let go of the pending lease, or hand out a new
    one. `quick` are candidates read before the lock for the turn (gold or not) seen then."""
    votes_seen = rater.votes_done
    _rater_locked(rater)
    study = rater.study
    row = rawsql.fetchone(
        f"SELECT {_LEASE.sql} FROM {rawsql.table(Lease)} l"  # noqa: S608
        f" WHERE l.rater_id = %s AND l.voted_at IS NULL AND l.released_at IS NULL{_lock('l')}",
        [rater.pk],
    )
    current = None if row is None else _LEASE.build(row)
    if current is not None:
        if current.expires_at > now or _lease_renew(current, study=study, now=now):
            return current.pk
        _lease_let_go(current, released_at=now)
    if not _may_have_more(rater, study):
        return None
    if rater.votes_done != votes_seen or current is not None:
        quick = None  # they voted (another tab) or let a lease go meanwhile: read them again
    lease = None
    if _gold_turn(study, rater.votes_done):
        lease = _lease_hand_out(rater, study, gold=True, now=now, quick=quick)
        quick = None
    if lease is None:
        lease = _lease_hand_out(rater, study, gold=False, now=now, quick=quick)
    return None if lease is None else lease.pk


class _Slots(NamedTuple):
    a1: int  # counted votes + leases holding a slot, A1 shown left
    a2: int  # the same, A2 shown left
    question_id: int  # the item's


def _slots_locked(
    item_id: int, *, now: datetime, exclude_lease: int | None = None, skip_locked: bool = False
) -> _Slots | None:
    """Lock the item and return how full it is in each order; None when `skip_locked` and
    another transaction holds the item (PostgreSQL).

    Two statements: on PostgreSQL a statement's snapshot is taken before it waits for the row
    lock, so leases counted in the same statement as the lock would miss those committed by the
    transaction we waited for. Written out in SQL because this runs under the write lock on
    every hand-out, and building it through the ORM cost 2 ms of the lock's time against 0.1 ms
    for the statements. The lease conditions are those of LeaseQuerySet.holding().

    The leases are not counted when the locked row says none holds a slot: `fill` is the
    counted votes plus the leases with `holds_slot`, changed in the same transaction as they
    are, so `fill == human_a1_first + human_a2_first` means no lease holds one, and a lease
    that does not is either voted, released or expired (only a renewal, which sets
    `holds_slot` again, moves `expires_at` on). The row is the latest committed version (it is
    locked), so this needs no second statement. Most hand-outs go to such items.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT human_a1_first, human_a2_first, fill, question_id FROM {rawsql.table(ComparisonItem)} i"  # noqa: S608
            f" WHERE id = %s{_lock('i', skip_locked=skip_locked)}",
            [item_id],
        )
        locked = cursor.fetchone()
        if locked is None:
            return None
        a1, a2, fill, question_id = locked
        if fill == a1 + a2 and exclude_lease is None:
            return _Slots(a1, a2, question_id)
        holding = (
            f"SELECT shown_first, COUNT(*) FROM {rawsql.table(Lease)} WHERE expires_at > %s AND item_id = %s"  # noqa: S608
            " AND voted_at IS NULL AND released_at IS NULL"
        )
        params = [rawsql.datetime_param(now), item_id]
        if exclude_lease is not None:
            holding += " AND id <> %s"
            params.append(exclude_lease)
        cursor.execute(holding + " GROUP BY shown_first", params)
        open_by_order = dict(cursor.fetchall())
    return _Slots(a1 + open_by_order.get(Shown.A1_FIRST, 0), a2 + open_by_order.get(Shown.A2_FIRST, 0), question_id)


def _lease_renew(lease: Lease, *, study: Study, now: datetime) -> bool:
    """An expired lease is given back to its rater if its slot is still wanted."""
    if not lease.is_gold:
        savepoint = transaction.savepoint()
        a1, a2, _ = _slots_locked(lease.item_id, now=now, exclude_lease=lease.pk)
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


def _fill_add(item_id: int, delta: int) -> None:
    rawsql.execute(*_fill_change(item_id, delta))


def _fill_change(item_id: int, delta: int, *, counted: str | None = None) -> rawsql.Statement:
    """The statement that changes an item's `fill` (and counts one vote in the `counted` order)."""
    bump = ""
    if counted is not None:
        field = "human_a1_first" if counted == Shown.A1_FIRST else "human_a2_first"
        bump = f", {field} = {field} + 1"
    return f"UPDATE {rawsql.table(ComparisonItem)} SET fill = fill + %s{bump} WHERE id = %s", [delta, item_id]  # noqa: S608


def _sweep_expired(study_id: int, *, now: datetime) -> None:
    """Expired leases stop holding their slot, so their items come first again in the hand-out.

    Each lease is let go in its own short transaction (conditional on still holding, so two
    raters sweeping at once count it once), before the caller takes any lock: a sweep never
    holds one item while the hand-out waits for another. Usually no lease has expired and this
    is one indexed read, at most once per SWEEP_EVERY and process.
    """
    last = _last_sweep.get(study_id)
    if last is not None and last <= now < last + SWEEP_EVERY:
        return
    expired = rawsql.fetchall(
        f"SELECT id, item_id FROM {rawsql.table(Lease)} WHERE study_id = %s AND holds_slot AND expires_at <= %s"  # noqa: S608
        f" LIMIT {SWEEP_BATCH}",
        [study_id, rawsql.datetime_param(now)],
    )
    for lease_id, item_id in expired:
        with transaction.atomic():
            if Lease.objects.filter(pk=lease_id, holds_slot=True, expires_at__lte=now).update(holds_slot=False):
                _fill_add(item_id, -1)
    if len(expired) < SWEEP_BATCH:  # else the next hand-out goes on with the rest
        _last_sweep[study_id] = now


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
        items = items.exclude(question_id__in=seen.values("question_id"))
    return items


def rater_may_wait(*, rater: Rater) -> bool:
    """True when the rater has no item now only because other raters' leases hold the free
    slots: an item they may rate still lacks counted votes. Such a rater is asked to come back
    in a moment, not sent off with the completion code."""
    study = rater.study
    if not _may_have_more(rater, study):
        return False
    counted = F("human_a1_first") + F("human_a2_first")
    return (
        _eligible_items(rater, study, gold=False)
        .annotate(counted=counted)
        .filter(counted__lt=study.votes_per_item)
        .exists()
    )


class _Candidate(NamedTuple):
    """An item to try, as the candidate walk read it (without locks)."""

    id: int
    fill: int
    a1: int  # counted votes, A1 shown left
    a2: int  # counted votes, A2 shown left
    question_id: int


def _quick_candidates(rater: Rater, study: Study, *, gold: bool, start_rank: int | None = None) -> list[_Candidate]:
    """The emptiest items this rater may get by their `fill`: walks of the
    `item_hand_out_order` index that stop after a few rows. The conditions are those of
    `_eligible_items`, written out (tests/test_rawsql.py compares the two).

    The study's emptiest fill level is read from `start_rank` (random unless given) on; only
    when that gives fewer than CANDIDATES_TRIED is the index walked from its start (the rest
    of the level, then the fuller levels). A walk that always began at the lowest rank stepped,
    for a rater with many votes, over every item they had already seen in the level (and the
    other variants of their questions): one more rejected row per earlier vote. From a random
    rank those rows are spread over the level instead (docs/BENCHMARKS.md, section 1.5).
    """
    item = rawsql.table(ComparisonItem)
    # With one variant per question, the rater's questions: that covers their items too.
    seen = "l.question_id = i.question_id" if study.one_variant_per_question else "l.item_id = i.id"
    select = (
        f"SELECT i.id, i.fill, i.human_a1_first, i.human_a2_first, i.question_id FROM {item} i JOIN {rawsql.table(Question)} q ON q.id = i.question_id"  # noqa: S608
        f" JOIN {rawsql.table(Answer)} a1 ON a1.id = i.answer_a1_id JOIN {rawsql.table(Answer)} a2 ON a2.id = i.answer_a2_id"
        " WHERE i.study_id = %s AND q.is_gold = %s AND a1.review_status = %s AND a2.review_status = %s"
        # NOT EXISTS: one index probe for each of the few rows the walk reads, where NOT IN
        # would first list all of the rater's leases.
        f" AND NOT EXISTS (SELECT 1 FROM {rawsql.table(Lease)} l WHERE l.rater_id = %s AND {seen})"
    )
    params = [study.pk, gold, Answer.Review.APPROVED, Answer.Review.APPROVED, rater.pk]
    in_order = f" ORDER BY i.fill, i.rank LIMIT {CANDIDATES_TRIED}"
    if gold:  # attention checks have no quota (any unseen one will do) and are few
        return _spread(rawsql.fetchall(select + in_order, params))
    # The emptiest level under the quota (none when every item has its quota), compared with
    # `=` and without the quota's range, so that SQLite too walks the level's ranks.
    level = f"(SELECT MIN(m.fill) FROM {item} m WHERE m.study_id = %s AND m.fill < %s)"  # noqa: S608
    rows = rawsql.fetchall(
        f"{select} AND i.fill = {level} AND i.rank >= %s ORDER BY i.rank LIMIT {CANDIDATES_TRIED}",
        [*params, study.pk, study.votes_per_item, random.randrange(2**31) if start_rank is None else start_rank],
    )
    if len(rows) < CANDIDATES_TRIED:
        # The rest of the level and the fuller levels: the walk from the start, needed only
        # when the level holds fewer candidates than wanted after the random rank.
        found = {row[0] for row in rows}
        from_start = rawsql.fetchall(f"{select} AND i.fill < %s{in_order}", [*params, study.votes_per_item])
        rows += [row for row in from_start if row[0] not in found]
    return _spread(rows[:CANDIDATES_TRIED])


def _spread(rows: list[tuple]) -> list[_Candidate]:
    """Candidates from walk rows in hand-out order, the emptiest ones shuffled: every rater
    reads the same first rows of the index, and trying them all in that order made raters
    queue on one item's lock at a time (docs/BENCHMARKS.md, section 1.5)."""
    candidates = [_Candidate(*row) for row in rows]
    emptiest = [c for c in candidates if c.fill == candidates[0].fill]
    random.shuffle(emptiest)
    return emptiest + candidates[len(emptiest) :]


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
    rater: Rater, study: Study, *, gold: bool, now: datetime, quick: list[_Candidate] | None = None
) -> Lease | None:
    if quick is None:
        quick = _quick_candidates(rater, study, gold=gold)
    for candidate in quick:
        if (lease := _lease_try(rater, study, candidate.id, gold=gold, now=now)) is not None:
            return lease
    tried = {candidate.id for candidate in quick}
    for item_id in _exact_candidates(rater, study, gold=gold, now=now):
        if item_id not in tried and (lease := _lease_try(rater, study, item_id, gold=gold, now=now)) is not None:
            return lease
    return None


def _order(a1: int, a2: int, study: Study, *, gold: bool) -> str | None:
    """The display order of the next lease of an item this full in each order (None: full)."""
    tie_break = random.choice([Shown.A1_FIRST, Shown.A2_FIRST])
    if gold:  # attention checks have no quota
        return tie_break if a1 == a2 else (Shown.A1_FIRST if a1 < a2 else Shown.A2_FIRST)
    return balance.next_order(a1, a2, study.votes_per_item, tie_break=tie_break)


def _new_lease(
    rater: Rater, study: Study, item_id: int, question_id: int, order: str, *, gold: bool, now: datetime
) -> Lease:
    return Lease(
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


def _claim(
    rater: Rater, study: Study, seen: _Candidate, *, gold: bool, now: datetime
) -> tuple[Lease, rawsql.Statement] | None:
    """A lease of an item no other transaction holds, and the guard it goes in with
    (`rawsql.insert_if`), if the item is still as the candidate walk read it and no lease holds
    a slot of it (`fill` equal to its counted votes; see `_slots_locked`): the order is then
    decided from the walk's counts, and the item's lock is taken (SKIP LOCKED) by the same
    statement that adds the lease to its fill. On PostgreSQL the lock re-reads the latest
    committed row and checks it against the walk's values again, so an item changed since
    gives no row and nothing is written. None: the caller decides under the item's lock
    instead."""
    if seen.fill != seen.a1 + seen.a2 or (order := _order(seen.a1, seen.a2, study, gold=gold)) is None:
        return None
    lease = _new_lease(rater, study, seen.id, seen.question_id, order, gold=gold, now=now)
    item = rawsql.table(ComparisonItem)
    guard = (
        f"UPDATE {item} SET fill = fill + 1 WHERE id = (SELECT c.id FROM {item} c WHERE c.id = %s AND c.fill = %s"  # noqa: S608
        f" AND c.human_a1_first = %s AND c.human_a2_first = %s{_lock('c', skip_locked=True)})",
        [seen.id, seen.fill, seen.a1, seen.a2],
    )
    return lease, guard


def _lease_claim(rater: Rater, study: Study, seen: _Candidate, *, gold: bool, now: datetime) -> Lease | None:
    """Lease the item by `_claim`, in one statement on PostgreSQL; None if it cannot be."""
    claim = _claim(rater, study, seen, gold=gold, now=now)
    return claim[0] if claim is not None and rawsql.insert_if(*claim) else None


def _lease_try(
    rater: Rater, study: Study, item_id: int, *, gold: bool, now: datetime, skip_locked: bool = False
) -> Lease | None:
    """Lease this item to the rater if, under the item's lock, it still wants a vote (with
    `skip_locked`, not if another transaction holds the item)."""
    # The candidate lists are read without locks; decide again under the item's lock. A full
    # item's lock is let go at once (rolling back to the savepoint releases it on PostgreSQL),
    # so a transaction never holds one item while waiting for another: two raters trying
    # candidates in different orders cannot deadlock. With `skip_locked` the transaction never
    # waits, so it may keep a full item's lock until it ends: no savepoint, and no rollback,
    # which would also make psycopg drop every prepared statement of the connection.
    savepoint = None if skip_locked else transaction.savepoint()
    slots = _slots_locked(item_id, now=now, skip_locked=skip_locked)
    order = None if slots is None else _order(slots.a1, slots.a2, study, gold=gold)
    if savepoint is not None:
        if order is None:
            transaction.savepoint_rollback(savepoint)
        else:
            transaction.savepoint_commit(savepoint)
    if order is None:
        return None
    lease = _new_lease(rater, study, item_id, slots.question_id, order, gold=gold, now=now)
    rawsql.insert(lease, also=[_fill_change(item_id, 1)])
    return lease


def vote_record(
    *,
    rater: Rater | RaterRef,
    token: str,
    choice_shown: str,
    not_familiar: bool = False,
    client_ms: int | None = None,
    now: datetime | None = None,
    hand_out_next: bool = False,
) -> VoteOutcome:
    """Store the rater's vote on one of their own leases, exactly once.

    A resubmission returns the vote already stored. A vote on an expired (even released)
    lease is stored all the same and flagged late in `meta`. Not-familiar votes and votes
    faster than the study's threshold are stored but do not count towards the item's quota,
    so the item is offered again. The threshold uses the browser's time when it was sent,
    else the server's.

    `rater`: the rater, or a `RaterRef` to one not read yet (the vote's own statements read
    it; Rater.DoesNotExist when the reference does not hold, and nothing is recorded). The
    returned vote's `rater` is the rater as the vote left them, with their study.

    With `hand_out_next` the rater's next item is leased in the same transaction when that
    can be done without waiting (see `_lease_next_with_vote`), so that the page after the vote
    is a read; otherwise the next `lease_next` hands it out.
    """
    now = now or timezone.now()
    ref = rater if isinstance(rater, RaterRef) else None
    if ref is not None:
        rater = Rater(pk=ref.rater_id, study_id=ref.study_id)  # its fields come with its lock
        rater._state.adding, rater._state.db = False, DEFAULT_DB_ALIAS
    if hand_out_next:
        _sweep_expired(rater.study_id, now=now)
    with transaction.atomic():
        human_pool_id, lease, words = _rater_and_lease_locked(rater, token, ref)
        study = rater.study
        if lease.voted_at is not None:
            vote = Vote.objects.get(rater=rater, item_id=lease.item_id)
            vote.rater = rater
            meta = vote.meta.get("assignment", {})
            return VoteOutcome(
                vote=vote, created=False, counted=meta.get("counted", False), late=meta.get("late", False)
            )
        server_ms = max(0, int((now - lease.created_at).total_seconds() * 1000))
        too_fast = (client_ms if client_ms is not None else server_ms) < study.threshold_ms(words)
        counted = not not_familiar and not too_fast
        late = lease.released_at is not None or lease.expires_at <= now
        vote = Vote(
            item_id=lease.item_id,
            judge_id=human_pool_id or judge_human_pool(study=study).pk,
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
        rater.last_seen_at = now
        rater.votes_done += 1
        if lease.is_gold:
            _rater_score_gold(rater, study=study, correct=vote.choice == "a1" and not not_familiar)
        # With the vote, in one statement on PostgreSQL: the lease stops holding its slot (a
        # counted vote takes the slot for good), and the rater's counts.
        changes = [
            (
                f"UPDATE {rawsql.table(Lease)} SET voted_at = %s, holds_slot = %s WHERE id = %s",  # noqa: S608
                [rawsql.datetime_param(now), False, lease.pk],
            ),
            (
                f"UPDATE {rawsql.table(Rater)} SET last_seen_at = %s, votes_done = %s, gold_seen = %s,"  # noqa: S608
                " gold_correct = %s, flagged = %s, flag_reason = %s WHERE id = %s",
                [
                    rawsql.datetime_param(now),
                    rater.votes_done,
                    rater.gold_seen,
                    rater.gold_correct,
                    rater.flagged,
                    rater.flag_reason,
                    rater.pk,
                ],
            ),
        ]
        fill_delta = int(counted) - int(lease.holds_slot)
        if fill_delta or counted:
            changes.append(_fill_change(lease.item_id, fill_delta, counted=lease.shown_first if counted else None))
        # The next item, from candidates read for the rater's votes with this one. The voted
        # lease was the rater's one pending lease unless it had been released.
        gold = _gold_turn(study, rater.votes_done)
        # They are read under the rater's lock, which on SQLite is the whole database's write
        # lock: reading them before it cost a second read of the rater, more than the walk
        # adds to the lock (docs/BENCHMARKS.md, section 1.9).
        candidates = []
        if hand_out_next and lease.released_at is None and _may_have_more(rater, study):
            candidates = _quick_candidates(rater, study, gold=gold)
        # The first candidate's claim goes in with the vote: one statement on PostgreSQL.
        claim = _claim(rater, study, candidates[0], gold=gold, now=now) if candidates else None
        if not rawsql.insert(vote, also=changes, also_if=claim) and candidates:
            _lease_next_with_vote(rater, study, gold=gold, now=now, quick=candidates, first_claimed=claim is not None)
    return VoteOutcome(vote=vote, created=True, counted=counted, late=late)


def _may_have_more(rater: Rater, study: Study) -> bool:
    """Whether the rater may be handed another item (decided under their lock)."""
    return study.status == Study.Status.COLLECTING and rater.votes_done < rater.target


def _lease_next_with_vote(
    rater: Rater, study: Study, *, gold: bool, now: datetime, quick: list[_Candidate], first_claimed: bool
) -> None:
    """Under the vote's locks, lease the next item from the candidates, but only an item no
    other transaction holds: this transaction already holds the voted item, so waiting for
    another item here could wait in a circle with a rater doing the reverse (on PostgreSQL;
    SQLite has one writer at a time). `first_claimed`: the first candidate's claim was tried
    with the vote. Gives up quietly: the next page hands out."""
    for n, candidate in enumerate(quick):
        if (n > 0 or not first_claimed) and _lease_claim(rater, study, candidate, gold=gold, now=now) is not None:
            return
        if _lease_try(rater, study, candidate.id, gold=gold, now=now, skip_locked=True) is not None:
            return


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
