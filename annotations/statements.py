"""The rater path's busiest statements, written out as static SQL.

Every vote runs these, and on a small server the ORM's work to build them (joins, select
lists) cost more than the database did: about half a vote's CPU; even `raw()`, which matches
every column to a field, cost more than running the statement. So each is a constant string
run on a cursor, its row turned into model instances by `_loaded`, and
tests/test_rater_statements.py holds each equal to its ORM twin on both databases. Everything
else on the path uses the ORM.

- `RATER_WITH_LEASE`: the rater a cookie names, with their study and their pending lease
  with what the task page shows of its item: a task page that finds its lease is one statement.
- `LEASE_TO_VOTE`: the lease a vote names, with the rater (from their cookie's id) and their
  study, rater and lease locked: a vote reads the rater only there.
- `CLAIM_SLOT`: the next slot a rater may claim (the hand-out order, in the display order
  their own balance needs), claimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection, models
from django.utils import timezone
from django.utils.safestring import SafeString
from psycopg.rows import dict_row

from annotations import context as context_text
from annotations.models import Lease, Rater, Slot, Study, stored_html


def _row(statement: str, params: list | dict) -> dict | None:
    """The statement's first row as {column name: value}, or None."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            # psycopg's `description` builds a Column object with its type for each of the
            # rater's fifty-odd columns (a third of a millisecond of CPU, three times a vote);
            # its dict_row row factory reads only their names.
            cursor.cursor.row_factory = dict_row
            cursor.execute(statement, params)
            return cursor.fetchone()
        cursor.execute(statement, params)
        row = cursor.fetchone()
        return None if row is None else dict(zip((column[0] for column in cursor.description), row, strict=True))


def _loaded(model: type[models.Model], row: dict, prefix: str = "") -> models.Model:
    """An instance of `model` from its columns in `row` (each named `<prefix><column>`), as the
    ORM loads one: JSON decoded, datetimes aware (SQLite gives them naive, in the connection's
    time zone). Booleans, numbers and text come from both databases as they are. The values go
    to the model in the order of its fields, as the ORM gives them (half the cost of keywords)."""
    values = []
    for field in model._meta.concrete_fields:
        value = row[prefix + field.column]
        if isinstance(value, datetime) and timezone.is_naive(value):
            value = timezone.make_aware(value, connection.timezone)
        elif isinstance(field, models.JSONField):
            value = field.from_db_value(value, None, connection)
        values.append(value)
    return model(*values)


# The rater (`r.*`) with their study's columns as `study_<column>` (its id is the rater's
# study_id) and a lease's as `lease_<column>`: the select list both reads of the rater share
# (a constant, part of each statement as written; nothing is assembled when they run).
_RATER_STUDY_LEASE = """
SELECT r.*,
       s.title AS study_title, s.slug AS study_slug, s.status AS study_status,
       s.instructions AS study_instructions, s.consent AS study_consent,
       s.votes_per_item AS study_votes_per_item, s.min_response_ms AS study_min_response_ms,
       s.ms_per_word AS study_ms_per_word, s.target_per_rater AS study_target_per_rater,
       s.one_variant_per_question AS study_one_variant_per_question, s.lease_seconds AS study_lease_seconds,
       s.completion_code AS study_completion_code, s.per_rater_codes AS study_per_rater_codes,
       s.prolific_completion_url AS study_prolific_completion_url, s.gold_every AS study_gold_every,
       s.gold_min_accuracy AS study_gold_min_accuracy, s.max_length_ratio AS study_max_length_ratio,
       s.fast_notice AS study_fast_notice, s.allow_mturk_frame AS study_allow_mturk_frame,
       s.created_at AS study_created_at,
       l.id AS lease_id, l.study_id AS lease_study_id, l.rater_id AS lease_rater_id, l.item_id AS lease_item_id,
       l.question_id AS lease_question_id, l.token AS lease_token, l.shown_first AS lease_shown_first,
       l.is_gold AS lease_is_gold, l.created_at AS lease_created_at, l.expires_at AS lease_expires_at,
       l.voted_at AS lease_voted_at, l.released_at AS lease_released_at"""

# The rater a cookie names, with their study and their pending lease (at most one: a constraint;
# its columns all NULL without one) with the texts of its item. A plain read: the vote path
# locks with LEASE_TO_VOTE.
RATER_WITH_LEASE = (
    _RATER_STUDY_LEASE  # noqa: S608 - constants only, joined once at import
    + """,
       q.text AS question_text, q.text_html AS question_html, q.text_html_key AS question_key,
       a1.text AS a1_text, a1.text_html AS a1_html, a1.text_html_key AS a1_key,
       a2.text AS a2_text, a2.text_html AS a2_html, a2.text_html_key AS a2_key, a2.context AS a2_context
FROM annotations_rater r
JOIN annotations_study s ON s.id = r.study_id
LEFT JOIN annotations_lease l ON l.rater_id = r.id AND l.voted_at IS NULL AND l.released_at IS NULL
LEFT JOIN annotations_comparisonitem i ON i.id = l.item_id
LEFT JOIN annotations_question q ON q.id = i.question_id
LEFT JOIN annotations_answer a1 ON a1.id = i.answer_a1_id
LEFT JOIN annotations_answer a2 ON a2.id = i.answer_a2_id
WHERE r.id = %s AND s.slug = %s
"""
)


@dataclass(frozen=True)
class Shown:
    """One text of the task page, rendered."""

    html: SafeString


def rater_in_study(rater_id: int, slug: str) -> Rater | None:
    """The rater with this id in the study with this slug, `rater.study` filled, and
    `rater.pending_lease`: their pending lease, expired or not, with `page` (the question and
    the two answers in the order shown, rendered, and the item's context line, or ''), or None.
    None if there is no such rater there."""
    row = _row(RATER_WITH_LEASE, [rater_id, slug])
    if row is None:
        return None
    rater, lease = _rater_and_lease(row)
    rater.pending_lease = None if lease is None else _with_page(lease, row)
    return rater


def _rater_and_lease(row: dict) -> tuple[Rater, Lease | None]:
    """The rater with their study, and the lease (None when its columns are NULL), from a row
    of `_RATER_STUDY_LEASE`."""
    rater = _loaded(Rater, row)
    rater.study = _loaded(Study, row, prefix="study_")
    return rater, None if row["lease_id"] is None else _loaded(Lease, row, prefix="lease_")


def pending_lease(rater: Rater) -> Lease | None:
    """The rater's pending lease as `rater_in_study` reads it (None too if the rater is gone)."""
    fresh = rater_in_study(rater.pk, rater.study.slug)
    return None if fresh is None else fresh.pending_lease


def _with_page(lease: Lease, row: dict) -> Lease:
    a1, a2 = (Shown(stored_html(row[f"{a}_text"], row[f"{a}_html"], row[f"{a}_key"])) for a in ("a1", "a2"))
    left, right = (a1, a2) if lease.shown_first == "a1" else (a2, a1)
    question = Shown(stored_html(row["question_text"], row["question_html"], row["question_key"]))
    # A context kind's line, with the answers named as this page names them (plain text).
    context = context_text.for_rater(row["a2_context"] or "", lease.shown_first)
    lease.page = {"question": question, "left": left, "right": right, "context": context}
    return lease


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

# The rater's row and the lease are locked together, the rater first as in every transaction of
# the rater path: a statement that waited for the lock then reads both rows as the transaction
# it waited for left them (PostgreSQL reads a locked row afresh, the other rows of a join not;
# the study is not locked, and read as it was when the statement began).
LEASE_TO_VOTE = (
    _RATER_STUDY_LEASE  # noqa: S608 - constants only, joined once at import
    + """,
       a1.len_words + a2.len_words AS words,
       (SELECT MIN(j.id) FROM annotations_judge j WHERE j.study_id = r.study_id AND j.kind = 'human') AS human_pool_id
FROM annotations_rater r
JOIN annotations_study s ON s.id = r.study_id
JOIN annotations_lease l ON l.rater_id = r.id
JOIN annotations_comparisonitem i ON i.id = l.item_id
JOIN annotations_answer a1 ON a1.id = i.answer_a1_id
JOIN annotations_answer a2 ON a2.id = i.answer_a2_id
WHERE r.id = %s AND s.slug = %s AND l.token = %s
"""
)


def lease_to_vote(rater_id: int, slug: str, token: str) -> Lease | None:
    """The lease with this token of the rater with this id in the study with this slug,
    whatever its state, with `lease.rater` (and `rater.study`) read from their row, `words`
    (both answers' lengths, for the too-fast threshold) and `human_pool_id` (the study's human
    Judge, None before there is one); None if there is no such rater there or they have no such
    lease. Locks the rater's row and the lease (on SQLite the transaction holds the database's
    one write lock): run it inside the vote's transaction."""
    statement = LEASE_TO_VOTE + ("FOR UPDATE OF r, l\n" if connection.features.has_select_for_update_of else "")
    row = _row(statement, [rater_id, slug, token])
    if row is None:
        return None
    rater, lease = _rater_and_lease(row)
    lease.rater = rater
    lease.words, lease.human_pool_id = row["words"], row["human_pool_id"]
    return lease


# The claim in one statement: the slot is chosen, locked and taken together (by the rater, not
# their lease, which is made after it). SKIP LOCKED: a claim never waits for another rater's
# claim of the same slot, it takes the next one. SQLite has no row locks and needs no clause: the
# transaction already holds the database's one write lock. `{lock}` is the one vendor clause.
# What the rater has seen is asked per candidate slot (NOT EXISTS, one probe of the lease's
# (rater, item) or (rater, question) index), not as a list of all their leases (NOT IN), which
# PostgreSQL hashed on every claim: 1.2 ms per claim after 2,000 votes of one rater, 0.4 ms now.
# `order` is the display order the rater's own balance needs ('' when either will do,
# Rater.order_needed): the walk of `slot_open_in_order` skips slots in the other order, about
# one in two, and stops at the first it may take, as before.
CLAIM_SLOT = """
UPDATE annotations_slot SET rater_id = %(rater)s, claimed_at = %(now)s
WHERE id = (
  SELECT s.id
  FROM annotations_slot s
  JOIN annotations_comparisonitem i ON i.id = s.item_id
  JOIN annotations_answer a1 ON a1.id = i.answer_a1_id
  JOIN annotations_answer a2 ON a2.id = i.answer_a2_id
  WHERE s.study_id = %(study)s AND s.vote_id IS NULL
    AND a1.review_status = 'approved' AND a2.review_status = 'approved'
    AND (s.rater_id IS NULL OR s.claimed_at <= %(expired)s)
    AND (%(order)s = '' OR s.shown_first = %(order)s)
    AND NOT EXISTS (SELECT 1 FROM annotations_lease l WHERE l.rater_id = %(rater)s AND l.item_id = s.item_id)
    AND NOT (%(by_question)s AND EXISTS (
      SELECT 1 FROM annotations_lease l WHERE l.rater_id = %(rater)s AND l.question_id = s.question_id))
  ORDER BY s.round, s.rank
  LIMIT 1 {lock}
)
RETURNING item_id, question_id, shown_first
"""


def slot_claim(
    *, study: Study, rater_id: int, order: str, now: datetime, claimed_before: datetime
) -> tuple[int, int, str] | None:
    """Claim for the rater, at `now`, the next open slot on an approved item that is free
    (never claimed, or claimed before `claimed_before`) on a question (with
    `one_variant_per_question` off: an item) the rater has not been handed, in display order
    `order` ('' for either); lowest round, then rank, first. Returns its (item id, question id,
    order), or None when there is none. Run it inside the transaction that makes the lease."""
    claimed_at = Slot._meta.get_field("claimed_at")
    params = {
        "study": study.pk,
        "rater": rater_id,
        "by_question": study.one_variant_per_question,
        "order": order,
        # The field's own conversion, as the ORM would send it (text on SQLite).
        "now": claimed_at.get_db_prep_value(now, connection),
        "expired": claimed_at.get_db_prep_value(claimed_before, connection),
    }
    skip_locked = connection.features.has_select_for_update_skip_locked
    with connection.cursor() as cursor:
        cursor.execute(CLAIM_SLOT.format(lock="FOR UPDATE OF s SKIP LOCKED" if skip_locked else ""), params)
        return cursor.fetchone()
