"""A study file's problems: `StudyFileError` names one (file, line, field, message) or stands
for all of a file's, and `Problems` gathers them record by record so that a file's every problem
is reported at once. The vote files' importers (vote_imports.importers) report theirs the same way."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

# A file with more problems than this is reported with its first ones and "and N more".
MAX_PROBLEMS = 200


class StudyFileError(Exception):
    """A problem in an input file, located as precisely as the format allows.

    Validation goes on after a problem, record by record (a question, a setting, a line of a
    JSON Lines file), so one error can stand for a whole file: `problems` lists every problem
    found, in the order found (the first MAX_PROBLEMS; `more` counts the others), and its own
    path, line, field and message are the first's. A single problem is its own `problems`.
    The command, the admin's upload report and the API all report from `problems`."""

    def __init__(self, path: str | Path, message: str, *, line: int | None = None, field: str | None = None):
        self.path, self.line, self.field, self.message = str(path), line, field, message
        self.problems: list[StudyFileError] = [self]
        self.more = 0
        where = self.path + (f", line {line}" if line else "")
        super().__init__(f"{where}: {field + ': ' if field else ''}{message}")

    @classmethod
    def at(cls, path: str, message: str, *, line: int | None, field: str | None) -> StudyFileError:
        """An error of this class at that place (a subclass whose constructor takes its arguments
        otherwise says how to make one here)."""
        return cls(path, message, line=line, field=field)

    @classmethod
    def of(cls, problems: list[StudyFileError], more: int = 0) -> StudyFileError:
        """One error for these problems (the problem itself when there is one)."""
        if len(problems) == 1 and not more:
            return problems[0]
        first = problems[0]
        error = cls.at(first.path, first.message, line=first.line, field=first.field)
        error.problems, error.more = list(problems), more
        lines = [f"{len(problems) + more} problems:", *(str(p) for p in problems)]
        error.args = ("\n".join(lines + ([f"and {more} more"] if more else [])),)
        return error

    def renamed(self, rename: Callable[[str], str]) -> StudyFileError:
        """The same problems, each file named by `rename(path)` (as the person who sent it knows it)."""
        kind = type(self)
        return kind.of(
            [kind.at(rename(p.path), p.message, line=p.line, field=p.field) for p in self.problems], self.more
        )


class Problems:
    """The problems found so far in one file (or one data set's files). `check(function, *args)`
    runs one record's checks: the first problem in that record is kept and ends that record only.
    `raise_any()` raises them all as one ``error`` (StudyFileError, or a subclass such as the
    vote files' ImportProblem)."""

    def __init__(self, error: type[StudyFileError] = StudyFileError) -> None:
        self.error = error
        self.found: list[StudyFileError] = []
        self.more = 0

    def check(self, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except StudyFileError as exc:
            self.add(exc)
            return None

    def add(self, error: StudyFileError) -> None:
        for problem in error.problems:
            if len(self.found) < MAX_PROBLEMS:
                self.found.append(problem)
            else:
                self.more += 1
        self.more += error.more

    def count(self) -> int:
        return len(self.found) + self.more

    def raise_any(self) -> None:
        if self.found:
            raise self.error.of(self.found, self.more)
