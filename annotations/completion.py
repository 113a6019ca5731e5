"""Entering a study and finishing it: the rules a paid rater cannot bend.

A rater enters with a participant id (the same id again resumes) and gets the study's target,
which they cannot change. They get the completion code only after voting at least once, when
the study can give them nothing more (their target reached counts as that): whether it can is
asked with the hand-out's own rules (annotations.assignment), whoever holds a slot now. A study
whose every slot has its counted vote is full and takes nobody new.

Every answer counts toward the target (`Rater.votes_done`): a not-familiar vote is an honest
answer, and a too-fast one is still work handed in. Neither counts for the metrics, and each
frees its slot for someone else. Speed is judged at payment, not here: the payment file
suggests review instead of approval for a rater with more than a third of their votes too fast
(analysis.rater_monitor.suggested_action, shown in the rater monitor), and a study can tell raters
at once that a vote was too fast (`fast_notice`).
"""

from __future__ import annotations

import secrets

from django.db import transaction
from django.db.models import DateTimeField, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from annotations.assignment import in_order_needed, judge_human_pool, unseen
from annotations.models import Rater, Slot, Study


def rater_enter(
    *, study: Study, participant_id: str, source: str = Rater.Source.DIRECT, source_meta: dict | None = None
) -> Rater:
    """Find or create the rater with this participant id: coming back with the same id resumes.
    The target is the study's; a rater cannot change it."""
    participant_id = participant_id.strip()
    if not participant_id:
        raise ValueError("rater_enter: participant_id is empty")
    now = timezone.now()
    with transaction.atomic():
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


def rater_can_get_more(*, rater: Rater) -> bool:
    """Whether the study may still give this rater an item, now or once other raters' claims
    are voted on or expire. A rater for whom this is False and who voted is finished."""
    study = rater.study
    if not rater.may_get_items():
        return False
    if in_order_needed(unseen(Slot.objects.filter(study=study).rateable(), rater), rater).exists():
        return True
    return study.is_gold_turn(rater.votes_done) and unseen(study.items.approved().gold(), rater).exists()


def study_is_full(*, study: Study) -> bool:
    """True when the study has slots and every one has its counted vote: nobody new can get
    anything."""
    slots = Slot.objects.filter(study=study)
    return not slots.rateable().exists() and slots.exists()


def rater_finish(*, rater: Rater) -> str:
    """Record, once, that the rater finished, with their completion code (their own with
    `per_rater_codes`, else the study's); returns the code. A rater who finished while the study
    had no code gets the study's once it has one. Only for a rater who voted and for whom
    `rater_can_get_more` is False."""
    if not rater.completion_code:
        study = rater.study
        code = secrets.token_hex(4).upper() if study.per_rater_codes else study.completion_code
        Rater.objects.filter(pk=rater.pk, completion_code="").update(
            finished_at=Coalesce("finished_at", Value(timezone.now(), output_field=DateTimeField())),
            completion_code=code,
        )
        rater.refresh_from_db(fields=["finished_at", "completion_code"])
    return rater.completion_code
