"""Background work of the vote import (a thin wrapper): importing a vote file uploaded in the
admin or the API, which `uploads.py` keeps."""

from __future__ import annotations

from functools import partial

from django_tasks import task

from annotations.uploads import UploadError, upload_discard
from biasstudy.queue import enqueue_on_commit
from vote_imports import importers, vote_import
from vote_imports.uploads import VotesUpload, votes_upload_get, votes_upload_import, votes_upload_queued


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
