"""Background work of the analysis app (a thin wrapper): computing a big study's report again
(current_report.study_results queues it)."""

from __future__ import annotations

from django_tasks import task

from analysis import stored_reports


@task()
def report_refresh(*, report_id: int) -> None:
    stored_reports.study_report_refresh(report_id=report_id)
