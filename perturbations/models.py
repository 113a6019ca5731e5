"""Perturbation kinds: what a rewrite of an answer does to it, and so how judges should react."""

from django.db import models


class Semantics(models.TextChoices):
    # A good judge moves away from the perturbed answer (factual error, gender bias).
    DEGRADING = "degrading", "degrading"
    # A good judge does not move (fake reference, rich content, compounds of them).
    NON_SEMANTIC = "non_semantic", "non-semantic"


class PerturbationKind(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    semantics = models.CharField(max_length=16, choices=Semantics.choices)
    # For compound kinds, the slugs of the kinds applied in order (e.g. ["reference",
    # "rich_content"]); empty for a simple kind.
    steps = models.JSONField(default=list, blank=True)
    # Built-in kinds belong to no study; a study may define its own.
    study = models.ForeignKey(
        "annotations.Study",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="perturbation_kinds",
    )
    builtin = models.BooleanField(default=False)

    class Meta:
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(semantics__in=["degrading", "non_semantic"]),
                name="perturbationkind_semantics_valid",
            ),
            models.CheckConstraint(
                condition=~(models.Q(builtin=True) & models.Q(study__isnull=False)),
                name="perturbationkind_builtin_has_no_study",
            ),
        ]

    def __str__(self) -> str:
        return self.slug

    @property
    def is_degrading(self) -> bool:
        return self.semantics == Semantics.DEGRADING
