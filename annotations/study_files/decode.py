"""Text and JSON from a file that may be hostile: every way reading it can fail becomes a
StudyFileError naming the file and line, and a JSON Lines file's bad lines are problems of their
own."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from annotations.study_files.problems import Problems, StudyFileError
from annotations.study_files.validate import MAX_DEPTH


def jsonl(path: Path, problems: Problems):
    """(line number, object) of each line of a JSON Lines file; a line that is not a JSON object
    is a problem of its own, and the lines after it are read all the same."""
    text = problems.check(read_text, path)
    for line_no, line in enumerate((text or "").splitlines(), start=1):
        if line.strip():
            row = problems.check(_jsonl_row, line, path, line_no)
            if row is not None:
                yield line_no, row


def _jsonl_row(line: str, path: Path, line_no: int) -> dict:
    row = loads(line, path, line=line_no)
    if not isinstance(row, dict):
        raise StudyFileError(path, "each line must be a JSON object", line=line_no)
    return row


def loads(text: str, path: Path, *, line: int | None = None) -> Any:
    """json.loads, with every way it can fail on hostile input turned into a StudyFileError:
    syntax, NaN and Infinity (not JSON, though Python reads them), integers of thousands of
    digits, and nesting deep enough to exhaust the parser's recursion."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise StudyFileError(path, f"not valid JSON ({exc.msg})", line=line or exc.lineno) from None
    except RecursionError:
        raise StudyFileError(path, f"not readable: nested too deeply (at most {MAX_DEPTH} levels)", line=line) from None
    except ValueError as exc:
        raise StudyFileError(path, f"not valid JSON ({exc})", line=line) from None


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")


def read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyFileError(path, "no such file") from None
    except UnicodeDecodeError as exc:
        raise StudyFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
