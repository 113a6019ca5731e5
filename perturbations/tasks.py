"""Background generation: model-based rewrites of a whole study take minutes, so the admin queues
them. A thin wrapper around `perturbation_generate`.
"""

from __future__ import annotations

from functools import partial

from django.contrib.auth import get_user_model
from django.utils import timezone
from django_tasks import task

from annotations.models import Study
from biasstudy.queue import enqueue_on_commit
from judges.models import LLMJudge
from perturbations.models import GenerationReport
from perturbations.services import perturbation_generate


@task()
def generate_perturbations_task(
    *,
    study_id: int,
    kind: str,
    seed: int,
    method: str,
    of: str,
    user_id: int | None,
    generator_id: int | None = None,
    constrain_format: bool = False,
    report_id: int | None = None,
) -> dict:
    study = Study.objects.get(pk=study_id)
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    report = GenerationReport.objects.filter(pk=report_id).first() if report_id else None
    try:
        generator = LLMJudge.objects.select_related("judge").get(pk=generator_id) if generator_id else None
        result = perturbation_generate(
            study=study,
            kind=kind,
            seed=seed,
            method=method,
            of=of,
            user=user,
            generator=generator,
            constrain_format=constrain_format,
            report=report,
        )
    except Exception as exc:
        # Nothing was generated: the review page says why instead of waiting for it forever.
        if report is not None:
            report.failures = [{"question": "(every question)", "reason": str(exc), "raw_output": ""}]
            report.finished_at = timezone.now()
            report.save(update_fields=["failures", "finished_at"])
        raise
    return {
        "created": [a.external_id for a in result.created],
        "flagged": [a.external_id for a in result.flagged],
        "skipped": result.skipped,
        "failed": [list(failure) for failure in result.failed],
        "blocked": [list(entry) for entry in result.blocked],
    }


def perturbation_generate_queue(
    *, study: Study, kind: str, seed: int, of: str, user=None, generator=None, constrain_format: bool = False
) -> None:
    """Queue model-based generation for the task worker, once the current transaction commits:
    a model rewrites one answer at a time, which must not hold a web request. The admin and the
    API both queue through here (here, not in services, which the task calls: no import cycle).
    Its GenerationReport is made now, so the review page shows it queued, then its progress.
    Raises biasstudy.queue.QueueUnavailable when the queue does not take the job: the report,
    untouched since, is deleted (no review page waits for a generation that will never run)."""
    report = GenerationReport.objects.create(
        study=study, kind=kind, method="model", seed=seed, user=user if getattr(user, "pk", None) else None
    )
    enqueue_on_commit(
        partial(
            generate_perturbations_task.enqueue,
            study_id=study.pk,
            kind=kind,
            seed=seed,
            method="model",
            of=of,
            user_id=user.pk if user is not None else None,
            generator_id=generator.pk if generator is not None else None,
            constrain_format=constrain_format,
            report_id=report.pk,
        ),
        undo=GenerationReport.objects.filter(pk=report.pk, done=0, finished_at__isnull=True).delete,
        what=f"the model-based generation of {kind} variants of {study.slug}",
    )
