"""Background work of the core app: importing a large uploaded study (a thin wrapper)."""

from __future__ import annotations

from functools import partial

from django_tasks import task

from annotations.study_files import StudyFileError
from annotations.uploads import (
    Upload,
    UploadError,
    study_upload_get,
    study_upload_import,
    study_upload_queued,
    study_upload_unqueued,
)
from biasstudy.queue import enqueue_on_commit


@task()
def import_study_upload(*, token: str) -> str | None:
    try:
        upload = study_upload_get(token=token)
        return study_upload_import(upload=upload).slug
    except (StudyFileError, UploadError):
        return None  # the reason is in the upload's progress, which the admin's page shows


def study_upload_import_queue(*, upload: Upload) -> None:
    """Import the upload in the task worker once the current transaction commits. Raises
    biasstudy.queue.QueueUnavailable when the queue does not take it: the upload is then
    unconfirmed again, kept with its preview, so confirming it again tries again."""
    study_upload_queued(upload=upload)
    enqueue_on_commit(
        partial(import_study_upload.enqueue, token=upload.token),
        undo=partial(study_upload_unqueued, upload=upload),
        what=f"the import of {upload.name}",
    )
