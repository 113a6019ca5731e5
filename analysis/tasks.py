"""Background work of the analysis app (thin wrappers): importing an uploaded vote file, and
computing a big study's report again (services.study_results queues it)."""

from __future__ import annotations

from functools import partial

from django_tasks import task

from analysis import importers, reports, vote_import
from analysis.uploads import VotesUpload, votes_upload_get, votes_upload_import, votes_upload_queued
from annotations.uploads import UploadError, upload_discard
from biasstudy.queue import enqueue_on_commit


@task()
def import_votes_upload(*, token: str) -> dict | None:
    try:
        study, counts = votes_upload_import(upload=votes_upload_get(token=token))
    except (importers.ImportProblem, vote_import.StudyNotFound, UploadError):
        return None  # the reason is in the upload's progress, which the admin's page and the API show
    return {"study": study.slug, **counts}


def votes_upload_import_queue(*, upload: VotesUpload) -> None:
    """Import the upload in the task worker once the current transaction commits. Raises
    biasstudy.queue.QueueUnavailable when the queue does not take it: the upload is discarded
    (no progress page waits for an import that will never run)."""
    votes_upload_queued(upload=upload)
    enqueue_on_commit(
        partial(import_votes_upload.enqueue, token=upload.token),
        undo=partial(upload_discard, upload.folder),
        what=f"the import of {upload.name}",
    )


@task()
def report_refresh(*, report_id: int) -> None:
    reports.study_report_refresh(report_id=report_id)
