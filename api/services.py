"""Importing a study sent over HTTP: the same path as the admin's upload (annotations.uploads).
The bytes are kept as an upload, checked as `manage.py import_study` checks a file, and then
imported here or, for a study of more than STUDY_UPLOAD_BACKGROUND_QUESTIONS questions, by the
task worker (a 600-question file held its request for 17-19 s): the API accepts and refuses
exactly what the admin and the command do."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import BinaryIO

from annotations.models import Study
from annotations.study_files import StudyFileError
from annotations.tasks import study_upload_import_queue
from annotations.uploads import (
    Upload,
    UploadError,
    UploadTooLarge,
    study_upload_import,
    study_upload_report,
    study_upload_store,
    upload_discard,
)

_CHUNK = 1024 * 1024


@dataclass
class StudyImport:
    """What a study import sent over HTTP became: the study (imported in the request) or the
    upload the task worker imports (its progress at the API's import URL)."""

    study: Study | None = None
    queued: Upload | None = None


def study_import_upload(
    *,
    stream: BinaryIO,
    fmt: str,
    name: str,
    slug: str | None = None,
    title: str | None = None,
    status: str | None = None,
) -> StudyImport:
    """Import a study from an uploaded file: a biasstudy JSON document, or for chen2024 a zip of
    the folder. `name` is what error messages call the file. Raises StudyFileError (paths as
    the researcher knows them) or UploadTooLarge (over API_IMPORT_MAX_MB); writes
    nothing when it raises."""
    name = PurePosixPath(name.replace("\\", "/")).name or "upload"
    try:
        upload = study_upload_store(
            name=name, chunks=_chunks(stream), fmt=fmt, slug=slug or "", title=title or "", status=status or ""
        )
    except UploadTooLarge:
        raise
    except UploadError as exc:  # a zip that cannot be unpacked: a problem with the file, by its name
        raise StudyFileError(name, str(exc)) from None
    report = study_upload_report(upload=upload)
    if report.problem is not None:
        upload_discard(upload.folder)
        raise report.problem
    if report.in_worker:
        study_upload_import_queue(upload=upload)
        return StudyImport(queued=upload)
    return StudyImport(study=study_upload_import(upload=upload))


def _chunks(stream: BinaryIO) -> Iterator[bytes]:
    while chunk := stream.read(_CHUNK):
        yield chunk
