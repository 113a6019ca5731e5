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
