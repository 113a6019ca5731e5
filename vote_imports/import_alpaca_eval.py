"""AlpacaEval's own annotation files (``annotations.json``: Dubois et al.; see
``../shared/datasets/alpaca_eval/README.md``) as parsed records for ``vote_import.votes_import_path``:
``manage.py import_votes FILE_OR_FOLDER... --format alpaca_eval --study S``.

Each file is a JSON list of records (``.json``, or gzip-compressed ``.json.gz``); a folder is
every such file under it. What becomes what:

- One question per (model, instruction), external id ``<model>#<n>``, with ``n`` the
  instruction's number in order of first appearance (by its text, over the files in name
  order), and the model as the question's ``subset``, so every figure can be cut by model and
  the questions of one instruction are known as one (``analysis.lc_alpaca`` reads its
  difficulty from them). A model's answer is not a rewrite of the baseline's, so it is not a
  perturbation group: like PRD's and MT-bench's model pairs, each pair is its own question.
  The questions of one instruction share its prompt key (``Question.prompt_key``), so the
  analysis clusters them as one: AlpacaEval names an instruction by its text alone, so the key
  is the text's digest (``importers.prompt_key``), the same in every file and import.
  No Bloom levels: every question is ``understanding``.
- A1 is ``output_1`` (the baseline, ``Answer.system`` = ``generator_1``), A2 ``output_2`` (the
  model, ``generator_2``). Every record must name the same baseline: the LC compares each model
  with it.
- The judge is ``annotator``, one imported judge per name. ``preference`` (1 = baseline
  better, 2 = model better; AlpacaEval's "weighted" judges give the probability in between) is
  kept as such: the vote's option probabilities are P(A1) = 2 − preference and P(A2) =
  preference − 1, and its choice is the more likely answer (exactly 1.5: a tie). AlpacaEval's
  older draw code 0 is a tie with probabilities ½; a null preference (no annotation) is a vote
  without a choice. The order the judge saw is not recorded: the vote is stored A1 first with
  ``order_known: false`` (left out of the positional table and of the mean probabilities on
  first/second, ``metrics.option_probs``; its probabilities are A1's as "first" and A2's as
  "second", and count for A1/A2).
- Every other field of a record (``dataset``, ``price_per_example``, ``time_per_example``,
  ``raw_completion``, and the raw ``preference``) is kept in the vote's ``meta`` with the file's
  name (``source``) and the record's position (``record``). A record's own ``source`` or
  ``record`` field is kept as ``record.source`` / ``record.record``, and the import's warnings
  say so: the provenance we store is never overwritten.
- A value no database can store (NaN, Infinity, a NUL character, a lone surrogate) is a problem
  naming the record and the field.

A file is read as a stream, one record at a time (``_records``): AlpacaEval's files run to
hundreds of megabytes, and a ``.json.gz`` decompressed whole took three copies of it in memory.
"""

from __future__ import annotations

import codecs
import gzip
import json
import math
import re
import zlib
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

from annotations.models import BloomLevel
from annotations.study_files import Problems, first_unstorable
from vote_imports.importers import (
    MAX_ID_CHARS,
    AnswerRecord,
    ImportProblem,
    Parsed,
    QuestionRecord,
    VoteRecord,
    _add_answer,
    _add_item,
    _add_question,
    every_problem,
    prompt_key,
)

TEXTS = ("instruction", "output_1", "output_2", "generator_1", "generator_2", "annotator")
REQUIRED = (*TEXTS, "preference")
SUFFIXES = (".json", ".json.gz")
# What the vote's meta says of where it came from: the file's name and the record's position.
PROVENANCE = ("source", "record")
# Bytes read (and characters parsed) at a time: with the record being read, what a file costs
# in memory however large it is.
CHUNK = 1 << 20


@every_problem
def parse_alpaca_eval(
    path: Path | Sequence[Path],
    *,
    problems: Problems,
    limit: int | None = None,
    known_groups: set[str] = frozenset(),
) -> Parsed:
    """``path``: an annotations file, a folder of them, or a list of files and folders.
    ``limit``: only the first N records (files in name order). No perturbations, so
    ``known_groups`` is not used."""
    paths = [Path(path)] if isinstance(path, (str, Path)) else [Path(p) for p in path]
    files = _files(paths)
    questions: dict[str, QuestionRecord] = {}
    votes: list[VoteRecord] = []
    numbers: dict[str, int] = {}  # instruction text → its number
    seen: dict[tuple[str, str, int], str] = {}  # (annotator, model, instruction) → where
    baseline: dict[str, str] = {}
    renamed: set[str] = set()  # record fields kept under another name (PROVENANCE)
    for file in files:
        if limit is not None and len(votes) >= limit:
            break
        # A file that cannot be read on (not gzip, not JSON) is one problem; its records before
        # that point were checked one by one.
        try:
            with closing(_records(file)) as records:
                for n, rec in enumerate(records):
                    if limit is not None and len(votes) >= limit:
                        break
                    vote = problems.check(_vote, file, n, rec, questions, numbers, seen, baseline, renamed)
                    if vote is not None:
                        votes.append(vote)
        except ImportProblem as exc:
            problems.add(exc)
    if not votes and not problems.count():
        raise ImportProblem(_source(paths), None, None, "no annotations in the file(s)")
    warnings = [
        ImportProblem(
            _source(paths),
            None,
            key,
            f"each record's own {key!r} field is kept in its vote's meta as {'record.' + key!r} (the vote's "
            f"{key!r} is {'the file it came from' if key == 'source' else 'its position in the file'})",
        )
        for key in sorted(renamed)
    ]
    return Parsed(source=_source(paths), questions=questions, votes=votes, warnings=warnings)


def _source(paths: list[Path]) -> str:
    return str(paths[0]) if len(paths) == 1 else f"{paths[0]} and {len(paths) - 1} more"


def _files(paths: list[Path]) -> list[Path]:
    files = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(SUFFIXES))
            if not found:
                raise ImportProblem(path, None, None, "no .json or .json.gz files in this folder")
            files += found
        elif path.name.endswith(SUFFIXES):
            files.append(path)
        else:
            raise ImportProblem(path, None, None, "expected an AlpacaEval annotations file (.json or .json.gz)")
    return files


def _records(file: Path) -> Iterator[Any]:
    """The records of the file's JSON list, one at a time: the file (gzip or not) is read in
    chunks of CHUNK bytes, so at most a chunk and the record being read are held, never the file."""
    chunks = _text(file)
    with closing(chunks):
        yield from _JsonList(chunks, file)


def _text(file: Path) -> Iterator[str]:
    """The file's text (gzip-compressed when its name ends in .gz), CHUNK bytes at a time; a UTF-8
    byte-order mark is dropped. Every way reading it can fail is an ImportProblem."""
    opener = gzip.open if file.name.endswith(".gz") else open
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    offset = 0  # bytes decoded before this chunk
    try:
        with opener(file, "rb") as stream:
            while data := stream.read(CHUNK):
                held = len(decoder.getstate()[0])  # a character cut by the last chunk's end
                try:
                    text = decoder.decode(data)
                except UnicodeDecodeError as exc:
                    byte = offset - held + exc.start
                    raise ImportProblem(file, None, None, f"not UTF-8 text (byte {byte}: {exc.reason})") from None
                offset += len(data)
                yield text
            try:
                decoder.decode(b"", final=True)
            except UnicodeDecodeError as exc:
                raise ImportProblem(file, None, None, f"not UTF-8 text (the last bytes: {exc.reason})") from None
    except OSError as exc:  # unreadable, or not gzip (BadGzipFile is an OSError)
        raise ImportProblem(file, None, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    except (EOFError, zlib.error) as exc:
        raise ImportProblem(file, None, None, f"cannot read: the gzip data is cut off or damaged ({exc})") from exc


_SPACE = re.compile(r"[ \t\n\r]*")  # JSON's whitespace


class _JsonList:
    """The elements of a JSON list, parsed one at a time from text that comes in chunks, with
    the json module's own decoder (NaN and Infinity read as Python reads them, for the record's
    check to name). Holds the unread rest of a chunk and the element being read; an element
    that runs past what was read is parsed again once twice as much is held, so a long one
    costs a few times its length, not its length squared."""

    def __init__(self, chunks: Iterator[str], file: Path) -> None:
        self.chunks, self.file = chunks, file
        self.text, self.pos, self.line, self.ended = "", 0, 1, False  # line: of text[0]
        self.decoder = json.JSONDecoder()

    def __iter__(self) -> Iterator[Any]:
        if self._next_char() != "[":
            raise self._problem("expected a JSON list of annotation records")
        self.pos += 1
        if self._next_char() == "]":
            self.pos += 1
        else:
            while True:
                yield self._element()
                char = self._next_char()
                if not char:
                    raise self._problem("not JSON: the file ends inside the list")
                self.pos += 1
                if char == "]":
                    break
                if char != ",":
                    raise self._problem("not JSON: expected ',' or ']' after a record", self.pos - 1)
                self._next_char()
        if self._next_char():
            raise self._problem("not JSON: extra data after the list")

    def _read(self, at_least: int) -> None:
        """Drop what was parsed and read at least ``at_least`` more characters (fewer at the end)."""
        self.line += self.text.count("\n", 0, self.pos)
        parts, size = [self.text[self.pos :]], len(self.text) - self.pos
        self.pos, wanted = 0, size + at_least
        while size < wanted and not self.ended:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.ended = True
            else:
                parts.append(chunk)
                size += len(chunk)
        self.text = "".join(parts)

    def _next_char(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            self.pos = _SPACE.match(self.text, self.pos).end()
            if self.pos < len(self.text) or self.ended:
                return self.text[self.pos : self.pos + 1]
            self._read(CHUNK)

    def _element(self) -> Any:
        while True:
            try:
                value, end = self.decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.ended:
                    raise self._problem(f"not JSON: {exc.msg}", exc.pos) from None
            except (ValueError, RecursionError) as exc:  # a number of thousands of digits; nesting
                raise self._problem(f"not JSON: {exc or 'nested too deeply'}") from None
            else:
                # A number that ends where the text read so far does may go on in the next chunk.
                if end < len(self.text) or self.ended:
                    self.pos = end
                    return value
            self._read(max(CHUNK, len(self.text) - self.pos))

    def _problem(self, message: str, at: int | None = None) -> ImportProblem:
        line = self.line + self.text.count("\n", 0, self.pos if at is None else at)
        return ImportProblem(self.file, line, None, message)


def _vote(
    file: Path, n: int, rec, questions: dict, numbers: dict, seen: dict, baseline: dict, renamed: set
) -> VoteRecord:
    where = f"[{n}]"
    if not isinstance(rec, dict):
        raise ImportProblem(file, None, where, "each record must be a JSON object")
    for key in REQUIRED:
        if key not in rec:
            raise ImportProblem(file, None, f"{where}.{key}", "is missing")
    for key in TEXTS:
        if not isinstance(rec[key], str):
            raise ImportProblem(file, None, f"{where}.{key}", f"must be text, not {type(rec[key]).__name__}")
    # NaN, Infinity, a NUL character, a lone surrogate: refused here, by name, not by the database.
    if (unstorable := first_unstorable(rec)) is not None:
        field_path, why = unstorable
        raise ImportProblem(file, None, f"{where}.{field_path}", why)
    for key in ("generator_1", "generator_2", "annotator"):
        if not rec[key].strip():
            raise ImportProblem(file, None, f"{where}.{key}", "is empty")
    model, judge = rec["generator_2"].strip(), rec["annotator"].strip()
    if len(judge) > MAX_ID_CHARS["judge"]:
        raise ImportProblem(file, None, f"{where}.annotator", f"at most {MAX_ID_CHARS['judge']} characters")
    # The question's id is "<model>#<n>" and its answers' "<model>#<n>-output_2".
    if len(model) > MAX_ID_CHARS["question_id"] - len("#00000-output_2"):
        raise ImportProblem(file, None, f"{where}.generator_2", "too long to name a question (at most 105 characters)")
    if baseline.setdefault("name", rec["generator_1"].strip()) != rec["generator_1"].strip():
        raise ImportProblem(
            file,
            None,
            f"{where}.generator_1",
            f"{rec['generator_1']!r} is not the baseline of the earlier records ({baseline['name']!r}): "
            "import one baseline's annotations per study",
        )
    winner, probs = _preference(file, where, rec["preference"])
    number = numbers.setdefault(rec["instruction"], len(numbers))
    key = (judge, model, number)
    if key in seen:
        raise ImportProblem(
            file, None, where, f"{judge!r} already annotated {model!r} on this instruction ({seen[key]})"
        )
    seen[key] = f"{file.name} {where}"
    external = f"{model}#{number}"
    record = QuestionRecord(
        external, rec["instruction"], BloomLevel.UNDERSTANDING, subset=model, prompt_key=prompt_key(rec["instruction"])
    )
    question = _add_question(questions, record, file, None)
    a1, a2 = f"{external}-output_1", f"{external}-output_2"
    _add_answer(question, AnswerRecord(a1, rec["output_1"], system=rec["generator_1"].strip()), file, None, where)
    _add_answer(question, AnswerRecord(a2, rec["output_2"], system=model), file, None, where)
    _add_item(question, "control", (a1, a2), file, None)
    meta = {}
    for key, value in rec.items():
        if key not in TEXTS:
            if key in PROVENANCE:
                renamed.add(key)
                key = f"record.{key}"
                while key in rec:  # "record.source" is a field of the record too: kept as well
                    key = f"record.{key}"
            meta[key] = value
    meta.update(source=file.name, record=n)
    return VoteRecord(question=external, group="control", judge=judge, winner=winner, option_probs=probs, meta=meta)


def _preference(file: Path, where: str, value) -> tuple[str | None, dict[str, float] | None]:
    """(the vote's choice, its option probabilities with A1 shown first) of a preference."""
    if value is None:
        return None, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ImportProblem(file, None, f"{where}.preference", f"{value!r} is not a number")
    if value == 0:  # AlpacaEval's older code for a draw
        value = 1.5
    if not 1 <= value <= 2:
        raise ImportProblem(file, None, f"{where}.preference", f"{value!r} is not in [1, 2] (or 0, a draw)")
    p_model = float(value) - 1
    winner = "a2" if p_model > 0.5 else "a1" if p_model < 0.5 else "tie"
    return winner, {"first": 1 - p_model, "second": p_model, "tie": 0.0}
