"""Importing a study sent over HTTP: the bytes go to a private temporary folder and through
annotations.study_files.study_import, the very function `manage.py import_study` calls, so the API
accepts and refuses exactly what the command does."""

from __future__ import annotations

import tempfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings
from django.db import DatabaseError

from annotations.archives import ArchiveError, ArchiveTooLarge
from annotations.models import Study
from annotations.study_files import StudyFileError, study_import
from annotations.uploads import chen_archive_unpack

_CHUNK = 1024 * 1024


class UploadTooLarge(Exception):
    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"larger than the {limit // _CHUNK} MB the API accepts (API_IMPORT_MAX_MB)")


def study_import_upload(
    *,
    stream: BinaryIO,
    fmt: str,
    name: str,
    slug: str | None = None,
    title: str | None = None,
    status: str | None = None,
) -> Study:
    """Import a study from an uploaded file: a biasstudy JSON document, or for chen2024 a zip of
    the folder. `name` is what error messages call the file. Raises StudyFileError (paths
    shown relative to the upload) or UploadTooLarge; writes nothing when it raises."""
    limit = settings.API_IMPORT_MAX_MB * _CHUNK
    name = PurePosixPath(name.replace("\\", "/")).name or "upload"
    with tempfile.TemporaryDirectory(prefix="biasstudy-import-") as tmp:
        root = Path(tmp)
        upload = root / "upload"
        _copy_bounded(stream, upload, limit)
        if fmt == "chen2024":
            try:
                path = chen_archive_unpack(archive=upload, target=root / "folder")
            except ArchiveTooLarge:
                raise UploadTooLarge(limit) from None
            except ArchiveError as exc:
                raise StudyFileError(name, str(exc)) from None
            shown_root = root / "folder"
        else:
            path = root / name
            upload.rename(path)
            shown_root = root
        try:
            return study_import(path=path, fmt=fmt, slug=slug, title=title, status=status)
        except StudyFileError as exc:
            raise _relative(exc, shown_root, name) from None
        except (DatabaseError, OverflowError) as exc:
            # A value the checks let through but a column cannot hold (a too-long text, a number
            # out of range): the transaction rolled back, so nothing was written.
            raise StudyFileError(name, f"the database refused a value: {exc}") from None


def _copy_bounded(stream: BinaryIO, target: Path, limit: int) -> None:
    size = 0
    with target.open("wb") as out:
        while chunk := stream.read(_CHUNK):
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(limit)
            out.write(chunk)


def _relative(exc: StudyFileError, root: Path, name: str) -> StudyFileError:
    def shown(path: str) -> str:
        try:
            inside = Path(path).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return name
        return inside if inside != "." else name

    return exc.renamed(shown)
