"""Workflows of the core app that touch several models."""

from __future__ import annotations

from django.db import transaction

from annotations.models import Answer, ComparisonItem, Question


@transaction.atomic
def question_answers_create(*, question: Question, a1: str, a2: str, gold_label: str = "") -> ComparisonItem:
    """Give a saved question its two original answers (`<id>-a1`, `<id>-a2`) and its control
    item, the pair every study compares first, with the answer known to be better if one is
    (``gold_label``: "a1", "a2" or "" for unknown). For an attention check, A1 is the better answer."""
    first = Answer.objects.create(question=question, external_id=f"{question.external_id}-a1", text=a1.strip())
    second = Answer.objects.create(question=question, external_id=f"{question.external_id}-a2", text=a2.strip())
    return ComparisonItem.objects.create(
        study=question.study, question=question, answer_a1=first, answer_a2=second, gold_label=gold_label
    )
