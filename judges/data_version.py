"""A judge run's and an LLM judge configuration's saves and deletes move the data version of the
studies whose reports read them (annotations.data_version says which writes do, and why)."""

from __future__ import annotations

from django.db.models.signals import post_delete, post_save

from annotations.data_version import studies_judged_by
from annotations.models import Study
from judges.models import JudgeRun, LLMJudge


def _run_changed(sender, instance: JudgeRun, created: bool = False, **kwargs) -> None:
    if not created:  # a new run has no votes yet
        Study.objects.filter(pk=instance.study_id).data_changed()


def _config_changed(sender, instance: LLMJudge, **kwargs) -> None:
    studies_judged_by(instance.judge_id).data_changed()


def connect() -> None:
    post_save.connect(_run_changed, sender=JudgeRun, dispatch_uid="data_version_saved_JudgeRun")
    post_delete.connect(_run_changed, sender=JudgeRun, dispatch_uid="data_version_deleted_JudgeRun")
    post_save.connect(_config_changed, sender=LLMJudge, dispatch_uid="data_version_saved_LLMJudge")
    post_delete.connect(_config_changed, sender=LLMJudge, dispatch_uid="data_version_deleted_LLMJudge")
