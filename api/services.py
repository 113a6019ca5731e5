"""Importing a study sent over HTTP: the bytes go to a private temporary folder and through
annotations.study_io.study_import, the very function `manage.py import_study` calls, so the API
accepts and refuses exactly what the command does."""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from django.conf import settings
from django.db import DatabaseError

from annotations.models import Study
from annotations.study_io import CHEN_CONTROL_FILE, StudyFileError, study_import
from annotations.uploads import BROKEN_ZIP, zip_problem

_CHUNK = 1024 * 1024
_MAX_ZIP_MEMBERS = 200


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
            path = _unzip_chen(upload, root / "folder", name, limit)
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


def _unzip_chen(archive: Path, folder: Path, name: str, limit: int) -> Path:
    """Extract the JSON files of a zip into `folder` and return the folder that holds raw.json
    (the zip's root or its single top-level folder). Refuses paths that leave the folder, and
    archives that unpack to more than `limit` bytes."""
    if not zipfile.is_zipfile(archive):
        raise StudyFileError(name, "format chen2024 expects a zip of the folder with raw.json and the perturbation files")
    try:
        _extract_json_members(archive, folder, name, limit)
    except UploadTooLarge:
        raise
    except BROKEN_ZIP as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # the server's own disk, not the archive
        raise StudyFileError(name, f"the archive cannot be read: {zip_problem(exc)}") from None
    if (folder / CHEN_CONTROL_FILE).exists():
        return folder
    subfolders = [p for p in folder.iterdir() if p.is_dir()] if folder.exists() else []
    if len(subfolders) == 1 and (subfolders[0] / CHEN_CONTROL_FILE).exists():
        return subfolders[0]
    raise StudyFileError(name, f"no {CHEN_CONTROL_FILE} at the top of the archive or in its single folder")


def _extract_json_members(archive: Path, folder: Path, name: str, limit: int) -> None:
    with zipfile.ZipFile(archive) as zf:
        members = [m for m in zf.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
        if len(members) > _MAX_ZIP_MEMBERS:
            raise StudyFileError(name, f"more than {_MAX_ZIP_MEMBERS} files in the archive")
        if sum(m.file_size for m in members) > limit:
            raise UploadTooLarge(limit)
        for member in members:
            parts = PurePosixPath(member.filename.replace("\\", "/")).parts
            if not parts or member.filename.startswith("/") or ".." in parts or len(parts) > 2:
                raise StudyFileError(name, f"unexpected path {member.filename!r} in the archive")
            if not parts[-1].endswith(".json"):
                continue
            target = folder.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(member) as src:
                _copy_bounded(src, target, limit)


def _relative(exc: StudyFileError, root: Path, name: str) -> StudyFileError:
    def shown(path: str) -> str:
        try:
            inside = Path(path).resolve().relative_to(root.resolve()).as_posix()
        except ValueError:
            return name
        return inside if inside != "." else name

    return exc.renamed(shown)
