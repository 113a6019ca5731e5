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
  name and the record's position.
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections.abc import Sequence
from pathlib import Path

from analysis.importers import (
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
from annotations.models import BloomLevel
from annotations.study_files import Problems

TEXTS = ("instruction", "output_1", "output_2", "generator_1", "generator_2", "annotator")
REQUIRED = (*TEXTS, "preference")
SUFFIXES = (".json", ".json.gz")


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
    for file in files:
        records = problems.check(_records, file)
        for n, rec in enumerate(records or ()):
            if limit is not None and len(votes) >= limit:
                break
            vote = problems.check(_vote, file, n, rec, questions, numbers, seen, baseline)
            if vote is not None:
                votes.append(vote)
    if not votes and not problems.count():
        raise ImportProblem(_source(paths), None, None, "no annotations in the file(s)")
    return Parsed(source=_source(paths), questions=questions, votes=votes)


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


def _records(file: Path) -> list:
    try:
        data = gzip.decompress(file.read_bytes()) if file.name.endswith(".gz") else file.read_bytes()
    except OSError as exc:  # unreadable, or not gzip (BadGzipFile is an OSError)
        raise ImportProblem(file, None, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    except (EOFError, zlib.error) as exc:
        raise ImportProblem(file, None, None, f"cannot read: the gzip data is cut off or damaged ({exc})") from exc
    try:
        records = json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ImportProblem(file, None, None, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except json.JSONDecodeError as exc:
        raise ImportProblem(file, exc.lineno, None, f"not JSON: {exc.msg}") from None
    except (ValueError, RecursionError) as exc:
        raise ImportProblem(file, None, None, f"not JSON: {exc or 'nested too deeply'}") from None
    if not isinstance(records, list):
        raise ImportProblem(file, None, None, "expected a JSON list of annotation records")
    return records


def _vote(file: Path, n: int, rec, questions: dict, numbers: dict, seen: dict, baseline: dict) -> VoteRecord:
    where = f"[{n}]"
    if not isinstance(rec, dict):
        raise ImportProblem(file, None, where, "each record must be a JSON object")
    for key in REQUIRED:
        if key not in rec:
            raise ImportProblem(file, None, f"{where}.{key}", "is missing")
    for key in TEXTS:
        if not isinstance(rec[key], str):
            raise ImportProblem(file, None, f"{where}.{key}", f"must be text, not {type(rec[key]).__name__}")
        if "\x00" in rec[key]:
            raise ImportProblem(file, None, f"{where}.{key}", "contains a NUL character, which cannot be stored")
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
    meta = {"source": file.name, "record": n, **{k: v for k, v in rec.items() if k not in TEXTS}}
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
