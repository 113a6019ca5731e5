"""The perturbation workflow's own records: who changed a variant, and the admin's views of a study.
The kinds themselves are part of the item and live in the core app (annotations.models)."""

from django.conf import settings
from django.db import models
from django.utils import timezone

from annotations.models import Answer, Study


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
