"""Unpacking a zip someone sent us, within limits: the one routine for every zip upload.

The admin's study upload, the API's study import (both the chen2024 folder, zipped) and any
later import of zipped files (a folder of vote files, say) call `archive_unpack`: it knows
nothing of what the files mean, only which ones to keep and how much they may hold. What the
caller then looks for in the folder (raw.json, vote files) is the caller's business.

Everything a hostile or broken archive can do is answered with an `ArchiveError` whose message
a researcher can act on: too many members, too many bytes (declared, or really unpacked when a
declared size lies), a path that leaves the folder or goes deeper than allowed, an encrypted
member, a compression method zipfile does not read, a corrupt member or directory.
"""

from __future__ import annotations

import lzma
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

_CHUNK = 1 << 20

# What zipfile raises on a broken archive: a corrupt directory or member, a bad CRC or a size that
# lies (BadZipFile), an encrypted member (RuntimeError), a compression method zipfile cannot read
# (NotImplementedError), a corrupt compressed stream (zlib.error, lzma.LZMAError, OSError from
# bz2) or one that ends early (EOFError).
BROKEN_ZIP = (zipfile.BadZipFile, RuntimeError, NotImplementedError, zlib.error, lzma.LZMAError, OSError, EOFError)


@dataclass(frozen=True)
class ArchiveLimits:
    """What one archive may hold. `total_bytes` bounds what the kept files unpack to, both as the
    archive declares it and as really written; `depth` is how many parts a member's path may
    have (1: files at the top only; 2: at the top or in one folder)."""

    total_bytes: int
    members: int = 200
    depth: int = 2


class ArchiveError(ValueError):
    """An archive we will not unpack; the message says why, in the researcher's words."""


class ArchiveTooLarge(ArchiveError):
    """The archive unpacks to more than its limit (the API answers 413 to this one)."""

    def __init__(self, limit: int):
        self.limit = limit
        super().__init__(f"the unpacked files are larger than the limit of {limit / _CHUNK:g} MB")


def archive_unpack(
    *, archive: Path, target: Path, limits: ArchiveLimits, suffixes: tuple[str, ...] = (".json",)
) -> list[Path]:
    """Unpack the members of the zip `archive` whose names end in one of `suffixes` into the folder
    `target` (made if missing), keeping their paths inside the archive, and return the files
    written. General on purpose: any zipped upload (a study's folder, a folder of vote files)
    goes through here with its own limits and suffixes.

    Folders and macOS's `__MACOSX/` metadata are skipped; every other member counts towards
    `limits.members` and must have a relative path of at most `limits.depth` parts without
    "..", or the whole archive is refused. Raises ArchiveError (ArchiveTooLarge for size);
    an OSError from the server's own disk passes through. On error, files already written stay
    in `target`: callers unpack into a folder of their own and remove it."""
    if not zipfile.is_zipfile(archive):
        raise ArchiveError("not a zip archive")
    try:
        return _unpack(archive, target, limits, suffixes)
    except BROKEN_ZIP as exc:
        if isinstance(exc, OSError) and exc.errno is not None:
            raise  # the server's own disk, not the archive
        raise ArchiveError(f"the archive cannot be read: {zip_problem(exc)}") from None


def archive_root(target: Path, marker: str) -> Path:
    """The folder an unpacked archive's data lives in: `target` itself when `marker` (a file or
    folder the data always has) is at its top, else its single folder when the marker is there
    (a folder zipped whole). Raises ArchiveError naming the marker."""
    if (target / marker).exists():
        return target
    subfolders = [path for path in target.iterdir() if path.is_dir()] if target.is_dir() else []
    if len(subfolders) == 1 and (subfolders[0] / marker).exists():
        return subfolders[0]
    raise ArchiveError(f"no {marker} at the top of the archive or in its single folder")


def zip_problem(exc: Exception) -> str:
    """What went wrong with a broken archive, in words the researcher can act on."""
    if isinstance(exc, RuntimeError) and "encrypted" in str(exc):
        return "a member is encrypted (send it without a password)"
    if isinstance(exc, NotImplementedError):
        return f"a member uses a compression method this server does not read ({exc}); use deflate"
    return f"a member is corrupt ({exc or type(exc).__name__})"


def _unpack(archive: Path, target: Path, limits: ArchiveLimits, suffixes: tuple[str, ...]) -> list[Path]:
    with zipfile.ZipFile(archive) as zipped:
        members = [m for m in zipped.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
        if len(members) > limits.members:
            raise ArchiveError(f"more than {limits.members} files in the archive")
        wanted = []
        for member in members:
            parts = _parts(member.filename, limits.depth)
            if parts[-1].endswith(suffixes):
                wanted.append((member, parts))
        if sum(member.file_size for member, _ in wanted) > limits.total_bytes:
            raise ArchiveTooLarge(limits.total_bytes)
        target.mkdir(parents=True, exist_ok=True)
        budget, written = limits.total_bytes, []
        for member, parts in wanted:
            path = target.joinpath(*parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            with zipped.open(member) as source, path.open("wb") as out:
                budget = _copy_within(source, out, budget, limits.total_bytes)
            written.append(path)
        return written


def _parts(filename: str, depth: int) -> tuple[str, ...]:
    """A member's path as parts, refusing one that is absolute, climbs out or is too deep."""
    name = filename.replace("\\", "/")
    parts = PurePosixPath(name).parts
    if not parts or name.startswith("/") or ".." in parts or len(parts) > depth or ":" in parts[0]:
        raise ArchiveError(f"unexpected path {filename!r} in the archive")
    return parts


def _copy_within(source: IO[bytes], out: IO[bytes], budget: int, limit: int) -> int:
    # A declared size can lie (a "zip bomb"): count what really comes out.
    while chunk := source.read(_CHUNK):
        budget -= len(chunk)
        if budget < 0:
            raise ArchiveTooLarge(limit)
        out.write(chunk)
    return budget
