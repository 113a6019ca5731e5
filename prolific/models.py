"""What the prolific app keeps: the link between a study and its Prolific study, the Prolific
submissions as last seen, every call made (the study's call log), and the bonuses asked for and
paid, one per rater, so that none is ever paid twice."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from annotations.models import Rater, Study


class ProlificStudy(models.Model):
    """Our study's study on Prolific: made as a draft from the admin's Prolific page."""

    study = models.OneToOneField(Study, on_delete=models.CASCADE, related_name="prolific_study")
    prolific_id = models.CharField(max_length=64, unique=True)
    # Prolific's own words: UNPUBLISHED, ACTIVE, PAUSED, AWAITING REVIEW, COMPLETED, ...
    status = models.CharField(max_length=32)
    reward_cents = models.PositiveIntegerField()
    places = models.PositiveIntegerField()
    estimated_minutes = models.PositiveIntegerField()
    devices = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    synced_at = models.DateTimeField(null=True, blank=True)
    # The worker's current chain of periodic syncs (prolific.tasks): a job of an older chain,
    # queued before the study was published again or resumed, stops at its next look, so that
    # chains never multiply.
    sync_chain = models.CharField(max_length=32, blank=True, editable=False)

    class Meta:
        verbose_name = "Prolific study"
        verbose_name_plural = "Prolific studies"

    def __str__(self) -> str:
        return f"{self.study} on Prolific ({self.prolific_id})"

    @property
    def running(self) -> bool:
        """Participants may be taking it: its submissions are kept in step."""
        return self.status in RUNNING


RUNNING = {"PUBLISHING", "ACTIVE", "SCHEDULED", "PAUSED"}


class ProlificCall(models.Model):
    """One call made to Prolific for a study: what, when, by whom, and its result."""

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="prolific_calls")
    what = models.CharField(max_length=64)
    at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    ok = models.BooleanField()
    result = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.what} at {self.at:%Y-%m-%d %H:%M}: {'ok' if self.ok else 'failed'}"


class ProlificSubmission(models.Model):
    """A participant's submission to the Prolific study, as the last sync saw it."""

    # Statuses that free the rater's leased items at once (prolific.services).
    GONE = {"RETURNED", "TIMED-OUT", "REJECTED"}

    prolific_study = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="submissions")
    submission_id = models.CharField(max_length=64)
    participant_id = models.CharField(max_length=128)
    rater = models.ForeignKey(
        Rater, null=True, blank=True, on_delete=models.SET_NULL, related_name="prolific_submissions"
    )
    status = models.CharField(max_length=32)
    # When the rater's leases were freed because the submission was returned, timed out or rejected.
    freed_at = models.DateTimeField(null=True, blank=True)
    synced_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["participant_id"]
        constraints = [
            models.UniqueConstraint(fields=["prolific_study", "submission_id"], name="prolific_submission_once"),
        ]

    def __str__(self) -> str:
        return f"{self.participant_id}: {self.status}"


class BonusBatch(models.Model):
    """One press of "pay the bonuses": its bonuses (one per rater, `Bonus`) are recorded before
    Prolific is called, so that a second press, a retried task or another staff member at the
    same time finds them taken and pays nothing more."""

    class State(models.TextChoices):
        REQUESTED = "requested", "recorded, not yet sent to Prolific"
        SET_UP = "set_up", "set up on Prolific, not paid"
        PAYING = "paying", "pay sent to Prolific, no answer yet"
        PAID = "paid", "paid"
        FAILED = "failed", "failed on Prolific's answer: nothing paid"
        UNKNOWN = "unknown", "pay sent, no answer: check on Prolific before anything else"

    prolific_study = models.ForeignKey(ProlificStudy, on_delete=models.CASCADE, related_name="bonus_batches")
    state = models.CharField(max_length=10, choices=State.choices, default=State.REQUESTED)
    bulk_id = models.CharField(max_length=64, blank=True, help_text="Prolific's bulk bonus payment id.")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(default=timezone.now)
    paid_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            # A bulk bonus payment is paid by one batch only.
            models.UniqueConstraint(fields=["bulk_id"], condition=~Q(bulk_id=""), name="bonus_batch_bulk_once"),
        ]

    def __str__(self) -> str:
        return f"bonuses of {self.requested_at:%Y-%m-%d %H:%M}: {self.get_state_display()}"


class Bonus(models.Model):
    """The bonus of one rater: at most one per rater, ever (the unique constraint is the guard);
    gone again only when Prolific answered that it was not paid."""

    batch = models.ForeignKey(BonusBatch, on_delete=models.CASCADE, related_name="bonuses")
    rater = models.ForeignKey(Rater, on_delete=models.PROTECT, related_name="prolific_bonuses")
    participant_id = models.CharField(max_length=128)
    amount = models.DecimalField(max_digits=8, decimal_places=2)

    class Meta:
        ordering = ["participant_id"]
        constraints = [
            models.UniqueConstraint(fields=["rater"], name="bonus_once_per_rater"),
            models.CheckConstraint(condition=Q(amount__gt=0), name="bonus_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"{self.participant_id}: {self.amount}"
