"""LLMBar (Zeng et al., ICLR 2024; ``../shared/datasets/llmbar``, see its README) as parsed
records for ``vote_import.votes_import_path``: ``manage.py import_votes PATH --format llmbar --study S``.

``PATH`` is the dataset folder: ``evaluator_votes.csv.gz`` and ``datasets/<subset>.json``.

- One question per (subset, instance), external id ``<subset>#<instance>`` (``LLMBar/Natural#0``),
  whose subset is kept on the question (``Question.subset``) so every figure can be cut by it.
  Instances of several subsets may ask the same input (198 of the 1,200 share one with another):
  the questions of one input share its prompt key (``importers.prompt_key``, a digest of the
  text), so the analysis clusters them as one.
  A1 is ``output_1``, A2 ``output_2``; the item's gold label is the data set's ``label``
  (1 → a1, 2 → a2). LLMBar has no Bloom levels: every question is ``understanding``.
- One imported judge per evaluator and strategy, named ``"<evaluator> / <strategy>"``
  (``"GPT-4 / Vanilla"``), with the ``final`` rows the paper scores. Each row is two votes:
  A1 shown first (``winner_swap_false``) and A2 shown first (``winner_swap_true``, already in
  the original numbering). An empty winner (the evaluator's output could not be read) is a
  vote without a choice, ``parse_status`` invalid.
- Swap and Swap_CoT run in two stages: both orders first, then, where they disagree, a
  "synthesis" prompt whose verdict is final. Their first stage is kept apart as its own judge,
  ``"<evaluator> / <strategy> (first stage)"``, with every stage-0 row (the agreeing ones are
  the final rows too), so its position consistency is that of the plain two-order prompt.
- ``score_1``/``score_2`` of the Rating strategies are not imported (the winner is).
"""

from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path
from typing import Any

from annotations.models import BloomLevel
from annotations.study_files import Problems
from vote_imports.importers import (
    AnswerRecord,
    ImportProblem,
    Parsed,
    QuestionRecord,
    VoteRecord,
    _add_answer,
    _add_item,
    every_problem,
    prompt_key,
)

VOTES_FILE = "evaluator_votes.csv.gz"
COLUMNS = ("subset", "evaluator", "strategy", "instance", "label", "stage", "final")
TWO_STAGE = {"Swap", "Swap_CoT"}
FIRST_STAGE = " (first stage)"
WINNER = {"1": "a1", "2": "a2", "": None}  # None: the output could not be read


def judge_name(evaluator: str, strategy: str, *, first_stage: bool = False) -> str:
    return f"{evaluator} / {strategy}" + (FIRST_STAGE if first_stage else "")


def _subset_file(folder: Path, subset: str) -> Path:
    # "Processed/LLMEval^2" is stored as Processed__LLMEval2.json
    return folder / "datasets" / (subset.replace("/", "__").replace("^", "") + ".json")


def _load_subset(folder: Path, subset: str, problems: Problems) -> list[dict | None]:
    """The subset's items; an item with a problem is reported in ``problems`` and is None."""
    path = _subset_file(folder, subset)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ImportProblem(path, None, None, f"cannot read the items of subset {subset!r}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ImportProblem(path, exc.lineno, None, f"not JSON: {exc.msg}") from exc
    if not isinstance(data, list):
        raise ImportProblem(path, None, None, "expected a list of items")
    return [problems.check(_subset_item, path, n, rec) for n, rec in enumerate(data)]


def _subset_item(path: Path, n: int, rec: Any) -> dict:
    for key in ("input", "output_1", "output_2", "label"):
        if not isinstance(rec, dict) or key not in rec:
            raise ImportProblem(path, None, f"[{n}].{key}", "is missing")
    if rec["label"] not in (1, 2):
        raise ImportProblem(path, None, f"[{n}].label", f"{rec['label']!r} is not 1 or 2")
    return rec


@every_problem
def parse_llmbar(
    path: Path, *, problems: Problems, limit: int | None = None, known_groups: set[str] | None = None
) -> Parsed:
    """``limit``: read only the first N vote rows (``known_groups`` is not needed: no perturbations)."""
    folder = path if path.is_dir() else path.parent
    vote_file = folder / VOTES_FILE
    questions: dict[str, QuestionRecord] = {}
    votes: list[VoteRecord] = []
    try:
        with gzip.open(vote_file, "rt", encoding="utf-8", newline="") as fh:
            _read_votes(csv.DictReader(fh), vote_file, folder, limit, questions, votes, problems)
    except (OSError, EOFError) as exc:  # missing, unreadable or not gzip (BadGzipFile is an OSError)
        raise ImportProblem(vote_file, None, None, f"cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    if not votes and not problems.count():
        raise ImportProblem(vote_file, None, None, "no votes in the file")
    return Parsed(source=str(vote_file), questions=questions, votes=votes)


def _read_votes(
    reader: csv.DictReader, vote_file: Path, folder: Path, limit, questions: dict, votes: list, problems: Problems
) -> None:
    subsets: dict[str, list[dict | None] | None] = {}
    missing = [c for c in (*COLUMNS, "winner_swap_false", "winner_swap_true") if c not in (reader.fieldnames or [])]
    if missing:
        raise ImportProblem(vote_file, 1, missing[0], f"missing column(s): {', '.join(missing)}")
    for row in reader:
        if limit is not None and reader.line_num - 1 > limit:
            break
        subset = row["subset"]
        if subset not in subsets:
            subsets[subset] = problems.check(_load_subset, folder, subset, problems)
        if subsets[subset] is None:
            continue  # its file cannot be read: reported once, its rows left out
        votes.extend(problems.check(_row_votes, row, reader.line_num, vote_file, subsets[subset], questions) or [])


def _row_votes(row: dict, line: int, vote_file: Path, items: list[dict | None], questions: dict) -> list[VoteRecord]:
    """The votes of one row: one per order for each judge it stands for (the final verdict, and
    the first stage of the Swap strategies)."""
    question = _question(row, line, vote_file, items, questions)
    judges = []
    if row["final"] == "1":
        judges.append(judge_name(row["evaluator"], row["strategy"]))
    elif row["final"] != "0":
        raise ImportProblem(vote_file, line, "final", f"{row['final']!r} is not 0 or 1")
    if row["strategy"] in TWO_STAGE and row["stage"] == "0":
        judges.append(judge_name(row["evaluator"], row["strategy"], first_stage=True))
    votes = []
    for shown_first, column in (("a1", "winner_swap_false"), ("a2", "winner_swap_true")):
        if row[column].strip() not in WINNER:
            raise ImportProblem(vote_file, line, column, f"{row[column]!r} is not 1, 2 or empty")
        winner = WINNER[row[column].strip()]
        for judge in judges:
            meta = {"line": line, "stage": int(row["stage"] == "1")}
            votes.append(VoteRecord(question, "control", judge, winner, shown_first=shown_first, meta=meta))
    return votes


def _question(row: dict, line: int, path: Path, items: list[dict], questions: dict) -> str:
    subset = row["subset"]
    try:
        instance = int(row["instance"])
    except ValueError:
        raise ImportProblem(path, line, "instance", f"{row['instance']!r} is not a whole number") from None
    if not 0 <= instance < len(items):
        raise ImportProblem(path, line, "instance", f"{instance} is not an item of {subset} ({len(items)} items)")
    external = f"{subset}#{instance}"
    rec = items[instance]
    if rec is None:
        raise ImportProblem(path, line, "instance", f"{external} has a problem of its own (above)")
    if row["label"] != str(rec["label"]):
        raise ImportProblem(
            path, line, "label", f"{row['label']!r} differs from the label {rec['label']} of {external}"
        )
    question = questions.get(external)
    if question is None:
        # Instances of several subsets ask the same input (198 of the 1,200): one prompt, one cluster.
        question = questions[external] = QuestionRecord(
            external, rec["input"], BloomLevel.UNDERSTANDING, subset=subset, prompt_key=prompt_key(rec["input"])
        )
        _add_answer(question, AnswerRecord(f"{external}-output_1", rec["output_1"]), path, line, "output_1")
        _add_answer(question, AnswerRecord(f"{external}-output_2", rec["output_2"]), path, line, "output_2")
        gold = "a1" if rec["label"] == 1 else "a2"
        _add_item(question, "control", (f"{external}-output_1", f"{external}-output_2"), path, line, gold)
    return external
