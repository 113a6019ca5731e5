"""Background generation: model-based rewrites of a whole study take minutes, so the admin queues
them. A thin wrapper around `perturbation_generate`.
"""

from __future__ import annotations

from functools import partial

from django.contrib.auth import get_user_model
from django.db import transaction
from django_tasks import task

from annotations.models import Study
from judges.models import LLMJudge
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
) -> dict:
    study = Study.objects.get(pk=study_id)
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
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
    )
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
    API both queue through here (here, not in services, which the task calls: no import cycle)."""
    transaction.on_commit(
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
        )
    )
