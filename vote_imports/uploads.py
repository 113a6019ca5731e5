"""Vote files uploaded in the admin ("Import votes") or the API (`POST /api/v1/votes/import/`):
kept on the server and imported by the task worker, which records its progress.

An upload lives where a study upload does (annotations.uploads: a folder under
STUDY_UPLOAD_DIR named by a random id, a signed token naming it and the options chosen with the
file, a progress file the admin's page and the API read). The request only stores the file,
unpacking a zipped data-set folder as it comes (a zip that cannot be unpacked is refused at
once), and checks that the study is there; the worker then calls `vote_import.votes_import_path`,
the body of `manage.py import_votes` too: one transaction, so a file with a problem writes
nothing. Small files go the same way: one code path.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from django.conf import settings

from annotations.archives import ArchiveError, ArchiveLimits, archive_root, archive_unpack
from annotations.models import Study
from annotations.uploads import (
    StoredUpload,
    upload_discard,
    upload_file_write,
    upload_folder_new,
    upload_name,
    upload_progress_read,
    upload_progress_write,
)
from vote_imports import importers, vote_import

# The salt keeps the text it had when this module was in analysis: tokens signed then stay valid.
SALT = "analysis.votes-upload"
DATA_NAME = "data"  # the vote file, or the unpacked data-set folder


@dataclass(frozen=True)
class VotesUpload(StoredUpload):
    """One stored vote file, as its token describes it: `import_votes`'s arguments."""

    salt: ClassVar[str] = SALT

    id: str
    name: str  # the file's name on the researcher's computer, for messages only
    fmt: str
    slug: str
    create: bool = False
    title: str = ""
    # The permissions for new rows (vote_import.CREATES) the user who sent the file held then.
    granted: tuple[str, ...] = ()
    add_to_collecting: bool = False
    for_raters: bool = False

    @property
    def path(self) -> Path:
        """What the format's reader opens: the vote file, or the data set's unpacked folder."""
        return self.folder / DATA_NAME


def votes_upload_store(
    *,
    chunks,
    name: str,
    fmt: str,
    slug: str,
    user,
    create: bool = False,
    title: str = "",
    add_to_collecting: bool = False,
    for_raters: bool = False,
) -> VotesUpload:
    """Keep an uploaded vote file (its bytes in `chunks`) for the task worker: a vote file, or
    for a folder format a zip of the folder, unpacked by `archives.archive_unpack`, with what
    `user` (who sent it) may make now (vote_import.votes_import_permissions: the worker's import
    is checked against them, vote_import.votes_import_check). Raises StudyNotFound,
    ImportProblem (a format no upload has, a zip that cannot be unpacked) or UploadError (too
    large); keeps nothing when it raises."""
    name = upload_name(name)
    if fmt not in vote_import.UPLOAD_FORMATS:
        raise importers.ImportProblem(name, None, "format", f"{fmt} is not a format an upload can have")
    vote_import.study_for_votes_check(slug=slug, create=create)
    upload = VotesUpload(
        id=upload_folder_new(),
        name=name,
        fmt=fmt,
        slug=slug,
        create=create,
        title=title,
        granted=tuple(sorted(vote_import.votes_import_permissions(user))),
        add_to_collecting=add_to_collecting,
        for_raters=for_raters,
    )
    try:
        if fmt in vote_import.ZIPPED_FOLDERS:
            archive = upload.folder / "upload.zip"
            upload_file_write(archive, chunks)
            _unpack(upload, archive)
        else:
            upload_file_write(upload.path, chunks)
    except BaseException:
        shutil.rmtree(upload.folder, ignore_errors=True)
        raise
    return upload


def _unpack(upload: VotesUpload, archive: Path) -> None:
    unpacked = upload.folder / "unpacked"
    limits = ArchiveLimits(
        total_bytes=settings.API_IMPORT_MAX_MB << 20, members=vote_import.ZIP_MEMBERS, depth=vote_import.ZIP_DEPTH
    )
    try:
        archive_unpack(archive=archive, target=unpacked, limits=limits, suffixes=vote_import.ZIP_SUFFIXES)
        archive_root(unpacked, vote_import.ZIPPED_FOLDERS[upload.fmt]).rename(upload.path)
    except ArchiveError as exc:
        message = f"{upload.fmt} is uploaded as a zip of its folder: {exc}"
        raise importers.ImportProblem(upload.name, None, "file", message) from None
    shutil.rmtree(unpacked, ignore_errors=True)  # what was left beside the folder moved
    archive.unlink()


def votes_upload_get(*, token: str) -> VotesUpload:
    """The upload a token names; raises UploadError (expired, forged, gone)."""
    return VotesUpload.from_token(token)


def votes_upload_queued(*, upload: VotesUpload) -> None:
    _progress(upload, state="queued", done=0, total=len(vote_import.VOTES_IMPORT_STEPS))


def votes_upload_import(*, upload: VotesUpload) -> tuple[Study, dict[str, int]]:
    """Import the upload exactly as `manage.py import_votes` would (the task worker's job),
    recording each step and then the counts, or the problem with its file, line and field;
    the uploaded data is removed afterwards, whatever happened. Raises what the import raises."""
    steps = vote_import.VOTES_IMPORT_STEPS

    def step(index: int) -> None:
        _progress(upload, state="running", step=steps[index], done=index, total=len(steps))

    try:
        study, counts = vote_import.votes_import_path(
            slug=upload.slug,
            fmt=upload.fmt,
            path=upload.path,
            create=upload.create,
            title=upload.title or None,
            progress=step,
            granted=upload.granted,
            add_to_collecting=upload.add_to_collecting,
            for_raters=upload.for_raters,
        )
    except importers.ImportProblem as exc:
        shown = _as_uploaded(exc, upload)
        problems = [{"path": p.path, "line": p.line, "field": p.field, "message": p.message} for p in shown.problems]
        _failed(upload, shown, problems, more=shown.more)
        raise shown from None
    except vote_import.StudyNotFound as exc:
        _failed(upload, exc, [{"path": None, "line": None, "field": "study", "message": str(exc)}])
        raise
    except Exception as exc:
        problem = {"path": upload.name, "line": None, "field": None, "message": str(exc)}
        _failed(upload, f"{type(exc).__name__}: {exc}", [problem])
        raise
    finally:
        upload_discard(upload.path)
    if vote_import.WARNINGS in counts:  # named as the researcher knows the file, as its problems are
        shown = _shown_path(upload)
        counts[vote_import.WARNINGS] = [{**w, "path": shown(w["path"])} for w in counts[vote_import.WARNINGS]]
    _progress(upload, state="done", done=len(steps), total=len(steps), study=study.slug, counts=counts)
    return study, counts


def votes_upload_progress(*, upload: VotesUpload) -> dict:
    """{"state": new | queued | running | done | failed, "step", "done", "total", "percent",
    then "study" and "counts", or "error" and "problems" (each with path, line, field, message)}."""
    return upload_progress_read(upload.folder)


def _as_uploaded(exc: importers.ImportProblem, upload: VotesUpload) -> importers.ImportProblem:
    """The problem named as the researcher knows the file (the upload, and the file inside a
    zip), not by its place on the server."""
    return exc.renamed(_shown_path(upload))


def _shown_path(upload: VotesUpload):
    """A place in the upload (on the server) as the researcher knows it: the upload's name, and
    the file inside a zip."""

    def shown(place: str) -> str:
        path = Path(place)
        inside = path.relative_to(upload.path).as_posix() if path.is_relative_to(upload.path) else "."
        return upload.name if inside == "." else f"{upload.name}: {inside}"

    return shown


def _failed(upload: VotesUpload, error, problems: list[dict], more: int = 0) -> None:
    """Every problem (path, line, field, message; the first MAX_PROBLEMS, ``more`` counts the others)."""
    _progress(
        upload, state="failed", error=f"import failed, nothing was written: {error}", problems=problems, more=more
    )


def _progress(upload: VotesUpload, **state) -> None:
    upload_progress_write(upload.folder, **state)
