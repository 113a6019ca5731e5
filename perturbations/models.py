"""Perturbation kinds: what a rewrite of an answer does to it, and so how judges should react."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotations.models import Answer, Study


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
    # The model-based generator's instructions for this kind; empty means our default wording
    # (perturbations.modelgen.DEFAULT_PROMPTS). {question} and {answer} are filled in.
    model_prompt = models.TextField(
        blank=True,
        help_text="Instructions for the model-based generator; empty uses the built-in wording. "
        "Placeholders: {question}, {answer}.",
    )

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


class AnswerRevision(models.Model):
    """One change to a perturbed answer made by a person: an edit of its text or a review
    decision. Together with the answer's provenance it says who changed what, and when.
    """

    class Action(models.TextChoices):
        EDIT = "edit", "Edited"
        APPROVE = "approve", "Approved"
        REJECT = "reject", "Rejected"

    answer = models.ForeignKey(Answer, on_delete=models.CASCADE, related_name="revisions")
    action = models.CharField(max_length=8, choices=Action.choices)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    text_before = models.TextField(blank=True)
    text_after = models.TextField(blank=True)
    note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["answer", "created_at", "id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(action__in=["edit", "approve", "reject"]), name="answerrevision_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.answer} {self.action} at {self.created_at:%Y-%m-%d %H:%M}"


class PerturbationStudy(Study):
    """The studies, seen from the perturbation workflow: generate, then review (admin only)."""

    class Meta:
        proxy = True
        verbose_name = "study perturbations"
        verbose_name_plural = "study perturbations"


class Variant(Answer):
    """Perturbed answers, for bulk review in the admin."""

    class Meta:
        proxy = True
        verbose_name = "perturbed answer"
