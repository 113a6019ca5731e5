"""Workflows around perturbations: built-in kinds; generation, checks and review build on it."""

from __future__ import annotations

from perturbations.kinds import BUILTIN_KINDS
from perturbations.models import PerturbationKind


def kinds_ensure_builtin(*, using: str = "default") -> None:
    for spec in BUILTIN_KINDS:
        PerturbationKind.objects.using(using).update_or_create(
            slug=spec.slug,
            defaults={
                "name": spec.name,
                "semantics": spec.semantics,
                "description": spec.description,
                "steps": list(spec.steps),
                "builtin": True,
                "study": None,
            },
        )
