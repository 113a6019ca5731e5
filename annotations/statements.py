"""The rater path's three busiest reads, written out as static SQL.

Every vote runs these, and on a small server the ORM's work to build them (joins, select
lists, model instances with their JSON fields) cost more than the database did: about half a
vote's CPU. Each statement here is one constant string, run through Django's public `raw()` or
a cursor, and tests/test_rater_statements.py checks each against its ORM twin (`*_orm`, kept
beside it) on both databases. Everything else on the path uses the ORM.

- `RATER_IN_STUDY`: the rater a cookie names, with their study (one row, or none).
- `PENDING_LEASE`: the rater's pending lease with what the task page shows of its item.
- `FREE_SLOT`: the next slot a rater may claim (the hand-out order), locked on PostgreSQL.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import OuterRef, Q, QuerySet, Subquery
from django.utils.safestring import SafeString

from annotations.models import Answer, Judge, Lease, Rater, Slot, Study, stored_html

# The study's columns, read with the rater as `study_<name>`; the study's creation time is not
# needed on the rater path and is left out (None), so such a Study is never saved.
_STUDY_COLUMNS = (
    "title", "slug", "status", "instructions", "consent", "votes_per_item", "min_response_ms", "ms_per_word",
    "target_per_rater", "one_variant_per_question", "lease_seconds", "completion_code", "per_rater_codes",
    "prolific_completion_url", "gold_every", "gold_min_accuracy", "max_length_ratio", "fast_notice",
    "allow_mturk_frame",
)  # fmt: skip
_STUDY_BOOLEANS = (
    "one_variant_per_question",
    "per_rater_codes",
    "fast_notice",
    "allow_mturk_frame",
)  # 0/1 on SQLite: raw() converts model fields only

RATER_IN_STUDY = """
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
       (SELECT MIN(j.id) FROM annotations_judge j WHERE j.study_id = r.study_id AND j.kind = 'human') AS human_pool_id
FROM annotations_rater r
JOIN annotations_study s ON s.id = r.study_id
WHERE r.id = %s AND s.slug = %s
"""


def rater_in_study(rater_id: int, slug: str) -> Rater | None:
    """The rater with this id in the study with this slug, `rater.study` filled and
    `rater.human_pool_id` (the study's human Judge, where their votes go); None if there is no
    such rater there."""
    rater = next(iter(Rater.objects.raw(RATER_IN_STUDY, [rater_id, slug])), None)
    if rater is None:
        return None
    values = {name: getattr(rater, f"study_{name}") for name in _STUDY_COLUMNS}
    values.update({name: bool(values[name]) for name in _STUDY_BOOLEANS})
    rater.study = Study(id=rater.study_id, created_at=None, **values)
    return rater


def rater_in_study_orm(rater_id: int, slug: str) -> Rater | None:
    pool = Judge.objects.filter(study_id=OuterRef("study_id"), kind=Judge.Kind.HUMAN).order_by("pk").values("pk")[:1]
    queryset = Rater.objects.select_related("study").annotate(human_pool_id=Subquery(pool))
    return queryset.filter(pk=rater_id, study__slug=slug).first()


PENDING_LEASE = """
SELECT l.*,
       q.text AS question_text, q.text_html AS question_html, q.text_html_key AS question_key,
       a1.text AS a1_text, a1.text_html AS a1_html, a1.text_html_key AS a1_key,
       a2.text AS a2_text, a2.text_html AS a2_html, a2.text_html_key AS a2_key,
       a1.len_words + a2.len_words AS words
FROM annotations_lease l
JOIN annotations_comparisonitem i ON i.id = l.item_id
JOIN annotations_question q ON q.id = i.question_id
JOIN annotations_answer a1 ON a1.id = i.answer_a1_id
JOIN annotations_answer a2 ON a2.id = i.answer_a2_id
WHERE l.rater_id = %s AND l.voted_at IS NULL AND l.released_at IS NULL
"""


@dataclass(frozen=True)
class Shown:
    """One text of the task page, rendered."""

    html: SafeString


def pending_lease(rater_id: int) -> Lease | None:
    """The rater's pending lease (at most one: a constraint), expired or not, with `words`
    (both answers' lengths, for the too-fast threshold) and `page`: the question and the two
    answers in the order shown, rendered."""
    lease = next(iter(Lease.objects.raw(PENDING_LEASE, [rater_id])), None)
    if lease is None:
        return None
    a1 = Shown(stored_html(lease.a1_text, lease.a1_html, lease.a1_key))
    a2 = Shown(stored_html(lease.a2_text, lease.a2_html, lease.a2_key))
    left, right = (a1, a2) if lease.shown_first == "a1" else (a2, a1)
    question = Shown(stored_html(lease.question_text, lease.question_html, lease.question_key))
    lease.page = {"question": question, "left": left, "right": right}
    return lease


def pending_lease_orm(rater_id: int) -> Lease | None:
    page = ("item__question", "item__answer_a1", "item__answer_a2")
    return Lease.objects.pending().select_related(*page).filter(rater_id=rater_id).first()


# SKIP LOCKED: a claim never waits for another rater's claim of the same slot, it takes the
# next one. On SQLite the transaction already holds the database's one write lock.
FREE_SLOT = """
SELECT s.id, s.item_id, s.question_id, s.shown_first
FROM annotations_slot s
JOIN annotations_comparisonitem i ON i.id = s.item_id
JOIN annotations_answer a1 ON a1.id = i.answer_a1_id
JOIN annotations_answer a2 ON a2.id = i.answer_a2_id
WHERE s.study_id = %(study)s AND s.vote_id IS NULL
  AND a1.review_status = 'approved' AND a2.review_status = 'approved'
  AND (s.lease_id IS NULL OR s.claimed_at <= %(expired)s)
  AND s.item_id NOT IN (SELECT item_id FROM annotations_lease WHERE rater_id = %(rater)s)
  AND s.question_id NOT IN (SELECT question_id FROM annotations_lease WHERE rater_id = %(rater)s AND %(by_question)s)
ORDER BY s.round, s.rank
LIMIT 1
"""
_FREE_SLOT_LOCKED = FREE_SLOT + "FOR UPDATE OF s SKIP LOCKED\n"


def free_slot(*, study: Study, rater_id: int, claimed_before: datetime) -> tuple[int, int, int, str] | None:
    """(slot id, item id, question id, order) of the next open slot on an approved item that
    is free (never claimed, or claimed before `claimed_before`) on a question (with
    `one_variant_per_question` off: an item) the rater has not been handed; lowest round, then
    rank, first. Run it inside the transaction that claims the slot."""
    params = {
        "study": study.pk,
        "rater": rater_id,
        "by_question": study.one_variant_per_question,
        # The field's own conversion, as the ORM would send it (text on SQLite).
        "expired": Slot._meta.get_field("claimed_at").get_db_prep_value(claimed_before, connection),
    }
    statement = _FREE_SLOT_LOCKED if connection.features.has_select_for_update_skip_locked else FREE_SLOT
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchone()


def free_slot_orm(*, study: Study, rater_id: int, claimed_before: datetime) -> QuerySet:
    approved = Answer.Review.APPROVED
    seen = Lease.objects.filter(rater_id=rater_id)
    slots = Slot.objects.open().filter(
        Q(lease__isnull=True) | Q(claimed_at__lte=claimed_before),
        study=study,
        item__answer_a1__review_status=approved,
        item__answer_a2__review_status=approved,
    )
    if study.one_variant_per_question:
        slots = slots.exclude(question_id__in=seen.values("question_id"))
    else:
        slots = slots.exclude(item_id__in=seen.values("item_id"))
    return slots.order_by("round", "rank").values_list("pk", "item_id", "question_id", "shown_first")
