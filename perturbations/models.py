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


class GenerationReport(models.Model):
    """What one generation of variants did for a study: every question that failed, with the
    reason and the model's raw output, and the questions left out because their item already has
    votes. The review page shows them; the task worker's results are not kept anywhere else."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="generation_reports")
    kind = models.CharField(max_length=64)
    method = models.CharField(max_length=8)
    seed = models.IntegerField()
    generator = models.CharField(max_length=300, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    questions = models.PositiveIntegerField(default=0)
    created = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(default=0)
    # [{"question": external id, "reason": text, "raw_output": the model's text or ""}, ...]
    failures = models.JSONField(default=list, blank=True)
    # [{"question": external id, "reason": text}, ...]: not attempted, a variant could never be approved
    blocked = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Questions handled so far, while it runs (model generation, in the task worker: the review
    # page polls it); empty finished_at: queued or running.
    done = models.PositiveIntegerField(default=0)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.study} {self.kind} ({self.method}, seed {self.seed}) at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def percent(self) -> float:
        return round(100 * self.done / self.questions, 1) if self.questions else 0.0

    @property
    def attempted(self) -> int:
        return self.questions - self.skipped - len(self.blocked)

    @property
    def failed_everywhere(self) -> bool:
        """Every question it tried failed (and it tried at least one)."""
        return self.attempted > 0 and len(self.failures) >= self.attempted


class PerturbationStudy(Study):
    """The studies, seen from the perturbation workflow: generate, then review (admin only)."""

    class Meta:
        proxy = True
        verbose_name = "study perturbations"
        verbose_name_plural = "study perturbations"


class Variant(Answer):
    """Perturbed answers, for bulk review in the admin."""

    # Generating and reviewing variants, in the admin and the API alike; reading them needs
    # the view permission (biasstudy.permissions: the change permission holds it too).
    REVIEW_PERMISSION = "perturbations.change_variant"
    VIEW_PERMISSION = "perturbations.view_variant"

    class Meta:
        proxy = True
        verbose_name = "perturbed answer"
