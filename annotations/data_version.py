"""Which writes move a study's data version (``Study.data_version``), the number its stored
reports are current at (analysis.stored_reports): every save and delete of a row a report reads, in
the transaction that writes it, through these receivers (AnnotationsConfig.ready connects them;
the judges app connects its runs' and configurations' the same way, with ``studies_judged_by``).

Writes that send no signal move it themselves with ``StudyQuerySet.data_changed``: a
``bulk_create`` (vote and study imports, simulated judges, a judge run's votes) or an
``update()`` (the rater admin's flag actions). A vote's save moves it in ``Vote.save``; the
rater's vote is one UPDATE more, at the end of its transaction (assignment.vote_record), and
the rater's counts it moves are written with ``update()``, covered by it.

A delete whose origin is the study itself moves nothing: the study and its reports are going.
"""

from __future__ import annotations

from django.db.models import Exists, OuterRef, QuerySet, Subquery
from django.db.models.signals import post_delete, post_save

from annotations.models import Answer, ComparisonItem, Judge, PerturbationKind, Question, Rater, Study, Vote

# What a report reads of a rater: a save that names only other fields (their counts, when they
# were last seen, their completion code) changes no report.
RATER_FIELDS_READ = frozenset({"participant_id", "flagged", "study"})


def studies_judged_by(judge_id: int) -> QuerySet[Study]:
    """The studies a judge has votes in (an LLM or simulated judge may vote on any study)."""
    return Study.objects.filter(Exists(Vote.objects.filter(judge_id=judge_id, item__study=OuterRef("pk"))))


def _studies_of(instance) -> QuerySet[Study]:
    """The studies whose reports read ``instance``."""
    if isinstance(instance, Study):
        return Study.objects.filter(pk=instance.pk)
    if isinstance(instance, (Question, ComparisonItem, Rater)):
        return Study.objects.filter(pk=instance.study_id)
    if isinstance(instance, Answer):
        return Study.objects.filter(pk=Subquery(Question.objects.filter(pk=instance.question_id).values("study_id")))
    if isinstance(instance, Vote):
        return Study.objects.of_item(instance.item_id)
    if isinstance(instance, Judge):
        return Study.objects.filter(pk=instance.study_id) if instance.study_id else studies_judged_by(instance.pk)
    if isinstance(instance, PerturbationKind):  # a built-in kind is every study's that has its items
        items = ComparisonItem.objects.filter(kind_id=instance.pk, study=OuterRef("pk"))
        return Study.objects.filter(pk=instance.study_id) if instance.study_id else Study.objects.filter(Exists(items))
    raise TypeError(f"no report reads a {type(instance).__name__}")


def _saved(sender, instance, created: bool, update_fields=None, **kwargs) -> None:
    if created and isinstance(instance, (Judge, Rater)):
        return  # no votes yet: in no figure
    if isinstance(instance, Rater) and update_fields is not None and not RATER_FIELDS_READ & set(update_fields):
        return
    _studies_of(instance).data_changed()


def _deleted(sender, instance, origin=None, **kwargs) -> None:
    if isinstance(origin, Study) or (isinstance(origin, QuerySet) and origin.model is Study):
        return
    _studies_of(instance).data_changed()


# A vote's save moves the version in Vote.save, which the vote path tells not to: it moves it
# itself, last in its transaction (assignment.vote_record), because a receiver of the vote's
# save would lock the study's row from the vote's INSERT to its commit, through the next
# hand-out, and every vote of the study waits for that lock. A vote's delete is received here.
SAVED = (Study, Question, Answer, ComparisonItem, PerturbationKind, Judge, Rater)
DELETED = (*SAVED, Vote)


def connect() -> None:
    for model in SAVED:
        post_save.connect(_saved, sender=model, dispatch_uid=f"data_version_saved_{model.__name__}")
    for model in DELETED:
        post_delete.connect(_deleted, sender=model, dispatch_uid=f"data_version_deleted_{model.__name__}")
