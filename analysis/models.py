"""The study's report as last computed, per filters and options: what the dashboard, its
figures, the CSV exports, the API and ``manage.py analyze`` read (current_report.study_results)."""

from __future__ import annotations

import json

from django.db import models


class StudyReport(models.Model):
    """One study's report for one set of filters and options (``asked``: a digest of them), with
    the version it was computed at (``stored_reports.report_version``: the study's data version and the
    analysis code). A request whose version differs computes it again, or, for a big study,
    queues the task that does and reads this one meanwhile (``refresh_queued_at`` set: the task
    is queued or running). A study keeps its default view's and a few others
    (``stored_reports.OTHER_VIEWS_KEPT``)."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="reports")
    asked = models.CharField(max_length=64, help_text="sha256 of the filters and options as JSON")
    request = models.JSONField(help_text="the filters and options, for the task to compute the report from")
    version = models.CharField(max_length=64, blank=True, help_text="data version the body was computed from")
    body = models.TextField(blank=True, help_text="the report as JSON; empty before the first computation")
    computed_at = models.DateTimeField(null=True, blank=True)
    n_votes = models.PositiveIntegerField(default=0, help_text="the study's votes when it was computed")
    cpu_seconds = models.FloatField(default=0.0, help_text="CPU time the last computation took")
    computations = models.PositiveIntegerField(default=0, help_text="how many times it was computed")
    refresh_queued_at = models.DateTimeField(null=True, blank=True, help_text="a refresh task is queued or running")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["study", "asked"], name="analysis_one_report_per_request")]

    def __str__(self) -> str:
        return f"report of {self.study_id} computed {self.computed_at}"

    @property
    def report(self) -> dict | None:
        return json.loads(self.body) if self.body else None


class AlpacaDifficulty(models.Model):
    """A study's frozen instruction difficulty for one judge's AlpacaEval-compatible LC
    (analysis.lc_alpaca, "Frozen difficulty"; analysis.alpaca_difficulty): fitted on the models
    present when the LC was first computed, or loaded from a file, and kept until refitted on
    request, so that a model added later is scored against it and moves no other model's LC."""

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="alpaca_difficulties")
    judge = models.CharField(max_length=120, help_text="the judge whose votes it was fitted on")
    difficulty = models.JSONField(help_text="instruction (its prompt key) → difficulty γ, on the logit scale")
    common_slope = models.FloatField(help_text="the common length slope φ̄ the models' slopes are pooled towards")
    slope_penalty = models.FloatField(help_text="λ_φ: the pooling penalty's weight (slope pooling × instructions)")
    slope_pooling = models.FloatField(help_text="the constant κ it was fitted with")
    difficulty_ridge = models.FloatField(help_text="the ridge on γ it was fitted with")
    fitted_models = models.JSONField(default=list, help_text="the models it was fitted on")
    source = models.CharField(max_length=300, help_text="fitted on the study's votes, or the file it was loaded from")
    fitted_at = models.DateTimeField(help_text="when it was fitted or loaded")

    class Meta:
        verbose_name = "frozen AlpacaEval difficulty"
        verbose_name_plural = "frozen AlpacaEval difficulties"
        constraints = [models.UniqueConstraint(fields=["study", "judge"], name="analysis_one_alpaca_difficulty")]

    def __str__(self) -> str:
        return f"{self.judge}: difficulty of {len(self.difficulty)} instructions, {self.source}"


class StyleScaling(models.Model):
    """A study's frozen standardisation of the style features (analysis.ratings.Scaling: each
    feature's mean and standard deviation over the study's votes between systems), fixed when
    its first style-controlled rating is computed so that adding a system does not move the
    others' ratings through it; recomputed only on request (analysis.ratings_service)."""

    study = models.OneToOneField("annotations.Study", on_delete=models.CASCADE, related_name="style_scaling")
    scaling = models.JSONField(help_text="features, mean, std, n (votes), left_out")
    computed_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"style scaling of {self.study_id} computed {self.computed_at}"
