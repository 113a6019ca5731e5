"""Background work of the core app: importing a large uploaded study (a thin wrapper)."""

from __future__ import annotations

from functools import partial

from django.db import transaction
from django_tasks import task

from annotations.study_files import StudyFileError
from annotations.uploads import Upload, UploadError, study_upload_get, study_upload_import, study_upload_queued


@task()
def import_study_upload(*, token: str) -> str | None:
    try:
        upload = study_upload_get(token=token)
        return study_upload_import(upload=upload).slug
    except (StudyFileError, UploadError):
        return None  # the reason is in the upload's progress, which the admin's page shows


def study_upload_import_queue(*, upload: Upload) -> None:
    """Import the upload in the task worker once the current transaction commits."""
    study_upload_queued(upload=upload)
    transaction.on_commit(partial(import_study_upload.enqueue, token=upload.token))
