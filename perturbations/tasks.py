"""Background generation: model-based rewrites of a whole study take minutes, so the admin queues
them. A thin wrapper around `perturbation_generate`.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django_tasks import task

from annotations.models import Study
from judges.models import LLMJudge
from perturbations.services import perturbation_generate


@task()
def generate_perturbations_task(
    *, study_id: int, kind: str, seed: int, method: str, of: str, user_id: int | None, generator_id: int | None = None
) -> dict:
    study = Study.objects.get(pk=study_id)
    user = get_user_model().objects.filter(pk=user_id).first() if user_id else None
    generator = LLMJudge.objects.select_related("judge").get(pk=generator_id) if generator_id else None
    result = perturbation_generate(
        study=study, kind=kind, seed=seed, method=method, of=of, user=user, generator=generator
    )
    return {
        "created": [a.external_id for a in result.created],
        "flagged": [a.external_id for a in result.flagged],
        "skipped": result.skipped,
        "failed": [list(failure) for failure in result.failed],
    }
