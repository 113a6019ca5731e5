"""Study files uploaded in the admin: kept on the server between the preview and the import.

An upload is stored under settings.STUDY_UPLOAD_DIR in a folder named by a random id; the
browser only ever holds a signed token naming that id (and the options chosen with the file),
so it can neither pick a path nor change the options between the preview and the import. The
folder and the token are `StoredUpload`'s, the progress file is `upload_progress_*`: the vote
files uploaded in the admin and the API (vote_imports/uploads.py) are kept and followed the same way. A zip
(the chen2024 folder) is unpacked by `archives.archive_unpack`, the API's routine too: only JSON
files, within the size limit, no path leaving the upload's folder; the folder that holds
raw.json becomes the upload's.

Reading, validating and writing are done by annotations.study_files: the preview is `study_file_read` (what the
command checks) and the import is `study_import` (what the command writes), in the request or,
for a large study, in the task worker, which reports its progress in the upload's folder.
The validation report (the problems, or the preview) is made once, the first time it is asked
for, and kept in the upload's folder beside the file: looking at it again reads that, not the
file (`study_upload_report`).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import ClassVar, Self

from django.conf import settings
from django.core import signing
from django.db import DatabaseError

from annotations import lengths
from annotations.archives import ArchiveError, ArchiveLimits, ArchiveTooLarge, archive_root, archive_unpack
from annotations.models import Study
from annotations.study_files import (
    CHEN_CONTROL_FILE,
    StudyFileError,
    derive_items,  # the import's rule, for the preview
    study_file_read,
    study_import,
)

SALT = "annotations.study-upload"
JSON_NAME = "study.json"
CHEN_FOLDER = "chen2024"
PROGRESS_NAME = "progress.json"
REPORT_NAME = "report.json"
PREVIEW_QUESTIONS = 50  # rows shown in the preview; the totals count all of them
_CHUNK = 1 << 20


class UploadError(ValueError):
    """An upload that cannot be used (expired or tampered token, bad zip, too large)."""


class UploadTooLarge(UploadError):
    """An upload over API_IMPORT_MAX_MB, as sent or once unpacked (the API answers 413)."""


class StoredUpload:
    """What every kept upload has: a folder named by its random `id` and a signed token naming
    it with the options chosen with the file. A subclass is a frozen dataclass of those options
    (`id` first) with its own `salt`, so one kind's token never opens another kind."""

    salt: ClassVar[str]
    id: str

    @property
    def folder(self) -> Path:
        return upload_folder(self.id)

    @property
    def token(self) -> str:
        return signing.dumps(dataclasses.asdict(self), salt=self.salt)

    @classmethod
    def from_token(cls, token: str) -> Self:
        """The upload a token names, while it is still there; raises UploadError."""
        try:
            data = signing.loads(token, salt=cls.salt, max_age=settings.STUDY_UPLOAD_MAX_AGE_SECONDS)
        except signing.SignatureExpired:
            raise UploadError("this upload has expired; upload the file again") from None
        except signing.BadSignature:
            raise UploadError("this upload link is not valid; upload the file again") from None
        upload = cls(**data)
        if not upload.folder.is_dir():
            raise UploadError("this upload is no longer on the server; upload the file again")
        return upload


@dataclass(frozen=True)
class Upload(StoredUpload):
    """One stored study file, as its token describes it."""

    salt: ClassVar[str] = SALT

    id: str
    name: str  # the file's name on the researcher's computer, for messages only
    fmt: str
    slug: str = ""
    title: str = ""
    status: str = ""

    @property
    def path(self) -> Path:
        """What the reader of its format opens: the JSON file, or the unpacked chen2024 folder."""
        return self.folder / (CHEN_FOLDER if self.fmt == "chen2024" else JSON_NAME)


def study_upload_store(
    *, name: str, chunks, slug: str = "", title: str = "", status: str = "", fmt: str | None = None
) -> Upload:
    """Keep an uploaded file (an iterable of byte chunks) for preview and import. Without `fmt`,
    a name ending in .zip is the chen2024 folder, anything else our JSON format."""
    fmt = fmt or ("chen2024" if name.lower().endswith(".zip") else "biasstudy")
    upload = Upload(
        id=upload_folder_new(),
        name=upload_name(name),
        fmt=fmt,
        slug=slug,
        title=title,
        status=status,
    )
    try:
        if fmt == "chen2024":
            archive = upload.folder / "upload.zip"
            upload_file_write(archive, chunks)
            unpacked = upload.folder / "unpacked"
            try:
                chen_archive_unpack(archive=archive, target=unpacked).rename(upload.path)
            except ArchiveTooLarge as exc:
                raise UploadTooLarge(str(exc)) from None
            except ArchiveError as exc:
                raise UploadError(str(exc)) from None
            shutil.rmtree(unpacked, ignore_errors=True)  # what was left beside the folder renamed
            archive.unlink()
        else:
            upload_file_write(upload.path, chunks)
    except BaseException:
        shutil.rmtree(upload.folder, ignore_errors=True)
        raise
    return upload


def study_upload_get(*, token: str) -> Upload:
    return Upload.from_token(token)


def study_upload_read(*, upload: Upload) -> dict:
    """The validated document (raises StudyFileError naming file, line and field). Writes nothing."""
    try:
        return study_file_read(
            path=upload.path,
            fmt=upload.fmt,
            slug=upload.slug or None,
            title=upload.title or None,
            status=upload.status or None,
        )
    except StudyFileError as exc:
        raise _as_uploaded(exc, upload) from None


@dataclass
class UploadReport:
    """What the checks found in an upload: its problems, or else the preview of what an import
    would write and whether the task worker would write it."""

    problem: StudyFileError | None = None
    preview: Preview | None = None
    in_worker: bool = False

    def to_json(self) -> dict:
        problem = self.problem
        return {
            "problems": [
                {"path": p.path, "line": p.line, "field": p.field, "message": p.message} for p in problem.problems
            ]
            if problem
            else [],
            "more": problem.more if problem else 0,
            "preview": asdict(self.preview) if self.preview else None,
            "in_worker": self.in_worker,
        }

    @classmethod
    def from_json(cls, data: dict) -> UploadReport:
        problems = [StudyFileError(p["path"], p["message"], line=p["line"], field=p["field"]) for p in data["problems"]]
        return cls(
            problem=StudyFileError.of(problems, data["more"]) if problems else None,
            preview=Preview(**data["preview"]) if data["preview"] else None,
            in_worker=data["in_worker"],
        )


def study_upload_report(*, upload: Upload) -> UploadReport:
    """The upload's validation report. Reading and checking the file is done once, the first time
    (seconds for a large study); the report is kept in the upload's folder and read from there
    after that, however often the page is looked at. The import checks the file again, so a
    study made meanwhile under the same slug is still refused."""
    stored = upload.folder / REPORT_NAME
    try:
        return UploadReport.from_json(json.loads(stored.read_text(encoding="utf-8")))
    except FileNotFoundError:
        pass
    try:
        document = study_upload_read(upload=upload)
    except StudyFileError as exc:
        report = UploadReport(problem=exc)
    else:
        report = UploadReport(preview=study_preview(document), in_worker=needs_worker(document))
    _write_json(stored, report.to_json())
    return report


def study_upload_import(*, upload: Upload) -> Study:
    """Import the upload exactly as `manage.py import_study` would, recording progress for the
    admin's progress page; the uploaded file is removed afterwards, whatever happened."""
    _progress(upload, state="running", done=0, total=0)
    try:
        study = study_import(
            path=upload.path,
            fmt=upload.fmt,
            slug=upload.slug or None,
            title=upload.title or None,
            status=upload.status or None,
            progress=lambda done, total: _progress(upload, state="running", done=done, total=total),
        )
    except (DatabaseError, OverflowError) as exc:
        # A value the checks let through but a column cannot hold (a number out of range): the
        # transaction rolled back, so nothing was written.
        error = f"import failed, nothing was written: the database refused a value: {exc}"
        _progress(upload, state="failed", error=error)
        raise StudyFileError(upload.name, f"the database refused a value: {exc}") from None
    except StudyFileError as exc:
        shown = _as_uploaded(exc, upload)
        problems = [{"path": p.path, "line": p.line, "field": p.field, "message": p.message} for p in shown.problems]
        error = f"import failed, nothing was written: {shown}"
        _progress(upload, state="failed", error=error, problems=problems, more=shown.more)
        raise shown from None
    except Exception as exc:
        _progress(upload, state="failed", error=f"import failed, nothing was written: {type(exc).__name__}: {exc}")
        raise
    finally:
        upload_discard(upload.path)
    _progress(upload, state="done", study=study.slug, study_id=study.pk)
    return study


def study_upload_queued(*, upload: Upload) -> None:
    _progress(upload, state="queued", done=0, total=0)


def study_upload_unqueued(*, upload: Upload) -> None:
    """Take back `study_upload_queued` when the queue refused the job: the upload is unconfirmed
    again (its preview offers the import again) rather than "queued" for a job that never runs."""
    if upload_progress_read(upload.folder)["state"] == "queued":
        (upload.folder / PROGRESS_NAME).unlink(missing_ok=True)


def study_upload_progress(*, upload: Upload) -> dict:
    """{"state": queued | running | done | failed, "done", "total", "percent", "error", "study"}."""
    return upload_progress_read(upload.folder)


def needs_worker(document: dict) -> bool:
    return len(document.get("questions", [])) > settings.STUDY_UPLOAD_BACKGROUND_QUESTIONS


# --------------------------------------------------------------------------- preview


@dataclass
class Preview:
    study: dict
    kinds: list[dict]
    questions: list[dict]  # the first PREVIEW_QUESTIONS, each with its answers (and lengths) and items
    totals: dict[str, int]
    groups: dict[str, int] = field(default_factory=dict)  # items per group (control first)
    notes: list[str] = field(default_factory=list)  # what the import will change, such as a lowered target

    @property
    def summary(self) -> list[tuple[str, int]]:
        # A list, not the dict: a template's `totals.items` would look up the key "items".
        return list(self.totals.items())


def study_preview(document: dict) -> Preview:
    """What an import of this (validated) document would create, for a person to check."""
    questions, groups = [], {"control": 0}
    totals = {"questions": len(document["questions"]), "answers": 0, "variants": 0, "items": 0}
    totals["attention checks"] = len(document.get("gold_items", []))
    for index, record in enumerate(document["questions"]):
        # A file without items gets the ones the import derives (derive_items), so count those.
        items = record.get("items")
        items = items if items is not None else derive_items(record)
        totals["answers"] += len(record["answers"])
        totals["variants"] += sum(1 for a in record["answers"] if a.get("derived_from"))
        totals["items"] += len(items)
        for item in items:
            groups[item.get("kind") or "control"] = groups.get(item.get("kind") or "control", 0) + 1
        if index < PREVIEW_QUESTIONS:
            questions.append(
                {
                    "id": record["id"],
                    "bloom": record["bloom"],
                    "text": record["text"],
                    "answers": [
                        {
                            "id": a["id"],
                            "kind": a.get("kind") or "",
                            "derived_from": a.get("derived_from") or "",
                            "review_status": a.get("review_status", "approved"),
                            "text": a["text"],
                            "words": lengths.count_words(a["text"]),
                            "chars": lengths.count_chars(a["text"]),
                        }
                        for a in record["answers"]
                    ],
                    "items": [
                        {
                            "group": i.get("kind") or "control",
                            "a1": i["a1"],
                            "a2": i["a2"],
                            "gold": i.get("gold_label", ""),
                        }
                        for i in items
                    ],
                }
            )
    return Preview(
        study=document["study"],
        kinds=document.get("perturbation_kinds", []),
        questions=questions,
        totals=totals,
        groups=groups,
        notes=document.get("notes", []),
    )


# --------------------------------------------------------------------------- files


def _limit() -> int:
    return settings.API_IMPORT_MAX_MB * _CHUNK


def upload_folder(upload_id: str) -> Path:
    return Path(settings.STUDY_UPLOAD_DIR) / upload_id


def upload_folder_new() -> str:
    """The id of a new, empty upload folder (expired ones are removed first)."""
    _prune()
    upload_id = uuid.uuid4().hex
    upload_folder(upload_id).mkdir(parents=True)
    return upload_id


def upload_name(name: str) -> str:
    """The file's own name, without the folders a browser may send, for messages only."""
    return PurePosixPath(name.replace("\\", "/")).name[:200] or "upload"


def upload_progress_write(folder: Path, **state) -> None:
    """Record an upload's state for the pages and the API that follow it (the task worker
    writes it; `upload_progress_read` reads it)."""
    _write_json(folder / PROGRESS_NAME, state)


def upload_progress_read(folder: Path) -> dict:
    """{"state": new | queued | running | done | failed, "done", "total", "percent", ...}: what
    was last written, with the share done; "new" before anything was."""
    try:
        data = json.loads((folder / PROGRESS_NAME).read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        data = {"state": "new"}  # not confirmed yet
    done, total = data.get("done", 0), data.get("total", 0)
    data["percent"] = round(100 * done / total, 1) if total else (100.0 if data["state"] == "done" else 0.0)
    return data


def upload_file_write(path: Path, chunks) -> None:
    """Write the uploaded bytes (an iterable of chunks) to `path`, within API_IMPORT_MAX_MB."""
    limit, written = _limit(), 0
    with path.open("wb") as out:
        for chunk in chunks:
            written += len(chunk)
            if written > limit:
                raise UploadTooLarge(
                    f"the file is larger than the limit of {settings.API_IMPORT_MAX_MB} MB (API_IMPORT_MAX_MB)"
                )
            out.write(chunk)


def chen_archive_unpack(*, archive: Path, target: Path) -> Path:
    """Unpack a zipped chen2024 folder into `target` (archives.archive_unpack, with the size limit
    of an upload) and return the folder that holds raw.json: the zip's top, or its single
    top-level folder. The admin's upload and the API's import both call this. Raises
    ArchiveError."""
    archive_unpack(archive=archive, target=target, limits=ArchiveLimits(total_bytes=_limit()))
    return archive_root(target, CHEN_CONTROL_FILE)


def _as_uploaded(exc: StudyFileError, upload: Upload) -> StudyFileError:
    """The problems with the file named as the researcher knows it, not by its place on the server."""

    def shown(path: str) -> str:
        try:
            inside = Path(path).relative_to(upload.path).as_posix()
        except ValueError:
            inside = "."
        return upload.name if inside == "." else f"{upload.name}: {inside}"

    return exc.renamed(shown)


def upload_discard(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _progress(upload: Upload, **state) -> None:
    upload_progress_write(upload.folder, **state)


def _write_json(path: Path, data: dict) -> None:
    # Written whole and renamed, so a page reading it (the progress page polls) never reads half a file.
    partial = path.with_name(f"{path.name}.{uuid.uuid4().hex}.part")  # two writers never share one
    partial.write_text(json.dumps(data), encoding="utf-8")
    partial.replace(path)


def _prune() -> None:
    """Forget uploads older than their tokens can be (nobody can import them any more)."""
    root = Path(settings.STUDY_UPLOAD_DIR)
    if not root.is_dir():
        return
    oldest = time.time() - settings.STUDY_UPLOAD_MAX_AGE_SECONDS
    for folder in root.iterdir():
        if folder.is_dir() and folder.stat().st_mtime < oldest:
            shutil.rmtree(folder, ignore_errors=True)
