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


@transaction.atomic
def question_better_answer_follow(*, control: ComparisonItem, old: str) -> int:
    """After the question's better answer (its control item's `gold_label`) changed from `old`:
    each perturbed item that still has what it inherited from `old` inherits the new one; one a
    researcher set otherwise keeps theirs. Returns how many items changed."""
    changed = 0
    items = control.question.items.filter(kind__isnull=False).select_related("kind", "answer_a1")
    for item in items.select_for_update(of=("self",)):
        now = item.inherited_better_answer(control)
        if item.gold_label == item.inherited_better_answer(control, old) and item.gold_label != now:
            item.gold_label = now
            item.save(update_fields=["gold_label"])
            changed += 1
    return changed
