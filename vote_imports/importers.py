"""Parse pairwise votes collected elsewhere into plain records; ``vote_import.votes_import_path`` writes
them. Every problem is an ``ImportProblem`` naming the file, the line and the field.

Generic CSV (UTF-8, header row; one row per vote): its columns and what each means are in
docs/VOTE_FILES.md. ``COLUMNS`` below are the ones it reads, ``IGNORED`` the votes export's
computed ones it accepts without importing (listed in the import's result); any other column is
refused. The votes export imports back (tests/test_votes_export_round_trip.py).

MT-bench human judgments (Zheng et al. 2023; ``../shared/datasets/mtbench_human_judgments``):
``human.csv`` and ``gpt4_pair.csv`` with ``question.jsonl`` and ``model_answers.jsonl`` next to
them. One question per (MT-bench question, model pair, turn), A1/A2 = the two models in
alphabetical order (the winner is flipped when a row lists them the other way round), so human
and GPT-4 votes on the same pair meet on the same item. Human votes go to the imported judge
``mtbench-human`` with one rater per expert/author; GPT-4's to ``mtbench-gpt4-pair``. The
questions of one MT-bench question (both turns, every pair) share its prompt key
``mtbench-<question_id>`` (``Question.prompt_key``): the analysis clusters them as one.

- Lengths: each answer is the assistant message the vote judged, so a turn-2 vote uses the
  length of the *second* assistant answer (turn 1: the first). The blog figures in the dataset's
  README (longer wins 61.2 % humans / 66.0 % GPT-4) use the turn-1 length for every vote.
- The question text of a turn-2 item holds both user turns.
- The order shown is not in the data: votes are stored A1-first with ``order_known: false`` and
  left out of the positional table. "tie (inconsistent)" (GPT-4's two orders disagreed) is a tie.
- MT-bench categories become Bloom levels by this mapping (ours; MT-bench has no Bloom levels):
  writing, roleplay → creating; reasoning → analyzing; math, coding → applying;
  extraction → understanding; stem → remembering; humanities → evaluating (``MTBENCH_BLOOM``).
- One author (author_0, question 128, turn 1) voted twice on the same pair; the database keeps
  one vote per rater and item, so the repeat is kept without the rater link (its rater id stays
  in ``meta``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from functools import wraps
from pathlib import Path
from typing import Any

from django.utils.dateparse import parse_datetime
from django.utils.module_loading import import_string

from annotations import lengths
from annotations.models import BloomLevel
from annotations.study_files import Problems, StudyFileError
from biasstudy import rendering

MTBENCH_BLOOM = {
    "writing": "creating",
    "roleplay": "creating",
    "reasoning": "analyzing",
    "math": "applying",
    "coding": "applying",
    "extraction": "understanding",
    "stem": "remembering",
    "humanities": "evaluating",
}
MTBENCH_FILES = {"human.csv": "mtbench-human", "gpt4_pair.csv": "mtbench-gpt4-pair"}
TRUE, FALSE = {"1", "true", "yes", "y"}, {"0", "false", "no", "n", ""}

# What one CSV field may hold (the csv module's own default limit, here reported by column),
# the longest ids the database keeps (Question/Answer.external_id, Judge.name,
# Rater.participant_id) and the largest response time a vote stores (a 32-bit column).
MAX_FIELD_CHARS = 128 * 1024
MAX_ID_CHARS = {
    "question_id": 120,
    "prompt_key": 120,
    "answer_a1_id": 120,
    "answer_a2_id": 120,
    "a2_original_id": 120,
    "judge": 120,
    "rater": 128,
}
MAX_RESPONSE_MS = 2**31 - 1


class ImportProblem(StudyFileError, ValueError):
    """A problem in a vote file: a study file's error (path, line, field and message kept apart
    for the API's 400 body; ``problems`` and ``more`` when it stands for several, as the
    readers report every problem they find), worded as the vote files' problems are."""

    def __init__(self, path: Path | str, line: int | None, field_name: str | None, message: str) -> None:
        super().__init__(path, message, line=line, field=field_name)
        where = f"{path}" + (f", line {line}" if line else "") + (f", field {field_name!r}" if field_name else "")
        self.args = (f"{where}: {message}",)

    @classmethod
    def at(cls, path: str, message: str, *, line: int | None, field: str | None) -> ImportProblem:
        return cls(path, line, field, message)


def every_problem(parser: Callable[..., Parsed]) -> Callable[..., Parsed]:
    """A format's reader that reports every problem: it is given ``problems`` (a Problems) to
    record each record's problem in and read on (``problems.check``); a problem it raises ends
    the reading and is the last one. Raises them all as one ImportProblem (the first
    MAX_PROBLEMS, then a count), and returns nothing, when there is any; nothing is written then."""

    @wraps(parser)
    def reader(path: Path, **kwargs: Any) -> Parsed:
        problems = Problems(ImportProblem)
        parsed = problems.check(parser, path, problems=problems, **kwargs)
        problems.raise_any()
        return parsed

    return reader


@dataclass
class AnswerRecord:
    external_id: str
    text: str
    derived_from: str | None = None  # external id of the original, for variants
    system: str = ""  # the system (model) that wrote it, when the source says
    lengths: dict[str, int] | None = None  # given lengths (LENGTH_MEASURES) of an answer without text


@dataclass
class QuestionRecord:
    external_id: str
    text: str
    bloom: str
    answers: dict[str, AnswerRecord] = field(default_factory=dict)
    # group → (A1 external id, A2 external id)
    items: dict[str, tuple[str, str]] = field(default_factory=dict)
    subset: str = ""
    # group → "a1"/"a2": the item's gold label, where known
    gold: dict[str, str] = field(default_factory=dict)
    is_gold: bool = False  # an attention-check question
    # The prompt the question asks, shared by every question that asks it (Question.prompt_key):
    # the data set's own prompt id where several systems answered it. None: the source does
    # not say (a CSV without the column), so a question the study has keeps its own.
    prompt_key: str | None = None


@dataclass
class VoteRecord:
    question: str
    group: str
    judge: str
    winner: str | None  # a1 / a2 / tie; None: the source has a vote whose verdict could not be read
    rater: str = ""
    shown_first: str | None = None  # None: unknown
    not_familiar: bool = False
    response_ms: int | None = None
    meta: dict = field(default_factory=dict)
    round: int = 0  # the same judge asked the same thing again: 1, 2, ...
    label_scheme: str = ""
    option_probs: dict[str, float] | None = None  # first/second/tie as displayed
    labels_swapped: bool = False
    server_ms: int | None = None
    received_at: datetime | None = None  # None: when it is imported
    raw_output: str = ""
    parse_status: str = ""  # "": ok when there is a winner, else invalid
    error: str = ""
    rater_flagged: bool = False


@dataclass
class Parsed:
    source: str
    questions: dict[str, QuestionRecord]
    votes: list[VoteRecord]
    people: set[str] = field(default_factory=set)  # judges whose votes come from people without rater ids
    judge_params: dict[str, dict] = field(default_factory=dict)  # judge → its backend, model, prompt style, kind
    # Columns of the file that are not imported, each with why (computed, or the exporting
    # database's own): the import's result lists them.
    ignored_columns: dict[str, str] = field(default_factory=dict)
    # What was imported but may not be what the file meant (a quoted field that swallowed rows),
    # or was kept under another name: each a problem that did not stop the import, naming where;
    # the import's result lists them.
    warnings: list[ImportProblem] = field(default_factory=list)


# ``import_votes --format NAME``: each parser takes (path, known_groups=..., limit=...) → Parsed.
# Dotted names, not imports: a format in its own module builds on the records above.
FORMATS = {
    "csv": "vote_imports.importers.parse_csv",
    "mtbench": "vote_imports.importers.parse_mtbench",
    "prd": "vote_imports.import_prd.parse_prd",
    "llmbar": "vote_imports.import_llmbar.parse_llmbar",
    "alpaca_eval": "vote_imports.import_alpaca_eval.parse_alpaca_eval",
}


def parse(fmt: str, path: Path | list[Path], *, known_groups: set[str], limit: int | None = None) -> Parsed:
    return import_string(FORMATS[fmt])(path, known_groups=known_groups, limit=limit)


def prompt_key(text: str) -> str:
    """The prompt key of a prompt a data set names by its text alone (AlpacaEval's instructions,
    LLMBar's inputs): ``prompt-`` and the first 16 hex digits of the text's SHA-256, the same in
    every file and import."""
    return "prompt-" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _add_question(questions: dict, rec: QuestionRecord, path, line) -> QuestionRecord:
    known = questions.setdefault(rec.external_id, rec)
    if known is rec and (problem := rendering.text_problem(rec.text or "")):
        raise ImportProblem(path, line, "question", f"question {rec.external_id!r}: {problem}")
    if known.text != rec.text:
        raise ImportProblem(path, line, "question", f"question {rec.external_id!r} has a different text than before")
    if known.bloom != rec.bloom:
        raise ImportProblem(
            path, line, "bloom", f"question {rec.external_id!r} has a different Bloom level than before"
        )
    if known.subset != rec.subset:
        raise ImportProblem(path, line, "subset", f"question {rec.external_id!r} has a different subset than before")
    if known.prompt_key != rec.prompt_key:
        raise ImportProblem(
            path, line, "prompt_key", f"question {rec.external_id!r} has a different prompt key than before"
        )
    return known


def _add_answer(question: QuestionRecord, answer: AnswerRecord, path, line, field_name) -> None:
    known = question.answers.setdefault(answer.external_id, answer)
    if known is answer and (problem := rendering.text_problem(answer.text or "")):
        raise ImportProblem(path, line, field_name, f"answer {answer.external_id!r}: {problem}")
    if (known.text, known.derived_from, known.lengths) != (answer.text, answer.derived_from, answer.lengths):
        raise ImportProblem(path, line, field_name, f"answer {answer.external_id!r} differs from an earlier row")


def _add_item(question: QuestionRecord, group: str, pair: tuple[str, str], path, line, gold: str = "") -> None:
    known = question.items.setdefault(group, pair)
    if known != pair:
        raise ImportProblem(
            path, line, "group", f"question {question.external_id!r} already has a {group} item with other answers"
        )
    if question.gold.setdefault(group, gold) != gold:
        raise ImportProblem(
            path, line, "gold_label", f"question {question.external_id!r}: its {group} item has another gold label"
        )


# --- generic CSV -----------------------------------------------------------------------------

REQUIRED = ("question_id", "judge")
# The verdict: ``winner`` in files written by hand, ``choice`` in the votes export (the same values).
WINNER_COLUMNS = ("winner", "choice")
PROBS = ("prob_first", "prob_second", "prob_tie")
PROBS_SUM_TOLERANCE = 0.002
# A length column per named measure (annotations.lengths: words, chars, bpe, and the verbosity
# blog post's spaces), for an answer whose text the file does not give.
LENGTH_MEASURES = lengths.MEASURES
COLUMNS = (  # every column the format reads: the required ones, then the others by name
    *REQUIRED,
    *WINNER_COLUMNS,
    "a2_original_id",
    "answer_a1",
    "answer_a1_id",
    "answer_a2",
    "answer_a2_id",
    "backend",
    "bloom",
    "choice_shown",
    "client_ms",
    "error",
    "gold_label",
    "group",
    "is_gold",
    "judge_kind",
    "label_scheme",
    "labels_swapped",
    "late",
    "model",
    "not_familiar",
    "parse_status",
    "perturbation_kind",
    "prompt_key",
    "prompt_style",
    "question",
    "rater",
    "rater_flagged",
    "raw_output",
    "received_at",
    "response_ms",
    "round",
    "run_id",
    "server_ms",
    "shown_first",
    "subset",
    "vote_id",
    *PROBS,
    *(f"len_{side}_{m}" for side in ("a1", "a2") for m in LENGTH_MEASURES),
)
# Columns the votes export (analysis.exports.VOTE_COLUMNS) writes that are not imported, and why:
# the import lists them in its result. Any other column is refused.
IGNORED = {
    "study": "names the study the votes were exported from; they go to the study the import names",
    "item_id": "the exporting database's id; the item is named by question_id and group",
    "semantics": "the perturbation kind's, as the study defines it",
    "counted": "computed by the analysis",
    "excluded_because": "computed by the analysis",
}
JUDGE_PARAMS = ("backend", "model", "prompt_style")
MAX_ROUND = 32767  # the vote's round is a small integer column


@every_problem
def parse_csv(path: Path, *, known_groups: set[str], problems: Problems, limit: int | None = None) -> Parsed:
    questions: dict[str, QuestionRecord] = {}
    votes: list[VoteRecord] = []
    judges: dict[str, dict] = {}  # judge → kind, params and source run, the same on all its rows
    raters: dict[str, bool] = {}  # rater → flagged
    warnings: list[ImportProblem] = []
    reader = _csv_reader(path)
    header = reader.fieldnames or []
    _check_header(header, path)
    for row in _csv_rows(reader, path, problems, warnings):
        if limit is not None and len(votes) >= limit:
            break
        vote = problems.check(_csv_row, row, reader.line_num, path, questions, known_groups, judges, raters)
        if vote is not None:
            votes.append(vote)
    # Perturbation rows name their A2's original; it must exist as an original of the question.
    # Only asked of a file whose rows are all fine: a row left out for its problem may be the
    # one that gave the original, and the file is refused anyway.
    for q in questions.values() if not problems.count() else ():
        for a in q.answers.values():
            if a.derived_from and (a.derived_from not in q.answers or q.answers[a.derived_from].derived_from):
                problems.add(
                    ImportProblem(
                        path,
                        None,
                        "a2_original_id",
                        f"question {q.external_id!r}: {a.derived_from!r} is not an original answer of it",
                    )
                )
    if not votes and not problems.count():
        raise ImportProblem(path, None, None, "no votes in the file")
    return Parsed(
        source=str(path),
        questions=questions,
        votes=votes,
        people={j for j, found in judges.items() if found["kind"] == "human"},
        judge_params={j: found["params"] for j, found in judges.items() if found["params"]},
        ignored_columns={c: IGNORED[c] for c in header if c in IGNORED},
        warnings=warnings,
    )


def _check_header(header: list[str], path: Path) -> None:
    """Every column must be one the format reads or one it knows to ignore (IGNORED): a column
    it does not know is refused by name, never dropped without a word."""
    unknown = [c for c in header if c not in COLUMNS and c not in IGNORED]
    if unknown:
        raise ImportProblem(
            path,
            1,
            unknown[0],
            f"unknown column(s): {', '.join(unknown)}; the columns are listed in docs/VOTE_FILES.md "
            "(remove or rename them)",
        )
    missing = [c for c in REQUIRED if c not in header]
    if not any(c in header for c in WINNER_COLUMNS):
        missing.append("winner")
    if missing:
        raise ImportProblem(path, 1, missing[0], f"missing column(s): {', '.join(missing)}")
    for pair in (WINNER_COLUMNS, ("response_ms", "client_ms")):
        if all(c in header for c in pair):
            raise ImportProblem(path, 1, pair[1], f"give {pair[0]} or {pair[1]}, not both (they mean the same)")


def _csv_row(
    row: dict, line: int, path, questions: dict, known_groups: set[str], judges: dict, raters: dict
) -> VoteRecord:
    """One checked row of the generic vote CSV as a record: the question, its answers and item
    (added to ``questions``), then the vote. Each problem names its column."""

    def get(name: str) -> str:
        return (row.get(name) or "").strip()

    for name in REQUIRED:
        if not get(name):
            raise ImportProblem(path, line, name, "is empty")
    qid = get("question_id")
    bloom = get("bloom") or BloomLevel.UNDERSTANDING
    if bloom not in BloomLevel.values:
        raise ImportProblem(path, line, "bloom", f"{bloom!r} is not one of {', '.join(BloomLevel.values)}")
    is_gold = _yes_no(get, "is_gold", path, line)
    group = _group(get, is_gold, known_groups, path, line)
    shown_first = get("shown_first").lower() or None
    if shown_first not in (None, "a1", "a2"):
        raise ImportProblem(path, line, "shown_first", f"{shown_first!r} is not a1 or a2")
    not_familiar = _yes_no(get, "not_familiar", path, line)
    winner, parse_status = _verdict(get, shown_first, not_familiar, path, line)
    gold = get("gold_label").lower()
    if gold not in ("", "a1", "a2"):
        raise ImportProblem(path, line, "gold_label", f"{gold!r} is not a1 or a2")
    _same_judge(get, judges, path, line)
    rater, flagged = _csv_rater(get, raters, path, line)
    scheme = get("label_scheme")
    if len(scheme) > 32:
        raise ImportProblem(path, line, "label_scheme", "is longer than 32 characters")
    probs = _csv_probs(get, path, line)
    question = _add_question(
        questions,
        QuestionRecord(
            qid,
            row.get("question"),
            bloom,
            subset=get("subset"),
            is_gold=is_gold,
            prompt_key=get("prompt_key") if "prompt_key" in row else None,
        ),
        path,
        line,
    )
    a1_id, a2_id = _csv_answers(row, get, question, group, path, line)
    _add_item(question, group, (a1_id, a2_id), path, line, gold)
    meta = _csv_meta(get, path, line)
    return VoteRecord(
        question=qid,
        group=group,
        judge=get("judge"),
        winner=winner,
        rater=rater,
        shown_first=shown_first,
        not_familiar=not_familiar,
        response_ms=_milliseconds(get, "client_ms" if "client_ms" in row else "response_ms", path, line),
        server_ms=_milliseconds(get, "server_ms", path, line),
        received_at=_moment(get, "received_at", path, line),
        meta=meta,
        round=_round(get, path, line),
        label_scheme=scheme,
        labels_swapped=_yes_no(get, "labels_swapped", path, line),
        option_probs={c.removeprefix("prob_"): v for c, v in probs.items()} or None,
        raw_output=row.get("raw_output") or "",
        parse_status=parse_status,
        error=row.get("error") or "",
        rater_flagged=flagged,
    )


def _csv_rater(get, raters: dict, path, line) -> tuple[str, bool]:
    """The row's rater id and whether they are flagged, the same on each of their rows."""
    rater = get("rater")
    flagged = _yes_no(get, "rater_flagged", path, line)
    if rater and raters.setdefault(rater, flagged) != flagged:
        raise ImportProblem(path, line, "rater_flagged", f"rater {rater!r} was {'not ' * flagged}flagged before")
    if flagged and not rater:
        raise ImportProblem(path, line, "rater_flagged", "a flagged rater needs a rater id")
    return rater, flagged


def _csv_probs(get, path, line) -> dict[str, float]:
    """The prob_ columns: all or none, each in [0, 1], adding up to 1."""
    probs = _numbers(get, PROBS, path, line, lambda v: 0 <= v <= 1, "a probability in [0, 1]")
    if probs and len(probs) != len(PROBS):
        raise ImportProblem(
            path, line, next(c for c in PROBS if c not in probs), "is needed with the other prob_ columns"
        )
    # A distribution, as the judge backends require of a reply's option probabilities; a file
    # may round them (three decimals: 0.333 × 3 = 0.999).
    if probs and not math.isclose(sum(probs.values()), 1.0, abs_tol=PROBS_SUM_TOLERANCE):
        shown = ", ".join(f"{v:g}" for v in probs.values())
        raise ImportProblem(path, line, "prob_first", f"the prob_ columns ({shown}) do not add up to 1")
    return probs


def _csv_answers(row: dict, get, question: QuestionRecord, group: str, path, line) -> tuple[str, str]:
    """The row's two answers added to ``question`` (A2 derived from its original on a
    perturbation row), each with its text or its lengths; returns their ids."""
    qid = question.external_id
    a1_id = get("answer_a1_id") or f"{qid}-a1"
    a2_id = get("answer_a2_id") or (f"{qid}-a2" if group == "control" else f"{qid}-{group}")
    original = None
    if group != "control":
        original = get("a2_original_id")
        if not original:
            raise ImportProblem(path, line, "a2_original_id", "is needed for a perturbation row")
    if a1_id == a2_id:
        raise ImportProblem(path, line, "answer_a2_id", "A1 and A2 must be different answers")
    for name, value in (("answer_a1_id", a1_id), ("answer_a2_id", a2_id)):
        if len(value) > MAX_ID_CHARS[name]:
            raise ImportProblem(path, line, name, f"at most {MAX_ID_CHARS[name]} characters, got {len(value)}")
    for side, answer_id, derived in (("a1", a1_id, None), ("a2", a2_id, original)):
        columns = [f"len_{side}_{m}" for m in LENGTH_MEASURES]
        given = _numbers(get, columns, path, line, lambda v: v >= 0 and v == int(v), "a whole number")
        if given and get(f"answer_{side}"):
            raise ImportProblem(path, line, next(iter(given)), f"give either answer_{side} or its length, not both")
        lengths = {c.rsplit("_", 1)[1]: int(v) for c, v in given.items()} or None
        # No answer_ column (the votes export): the answer is named by its id, as the study has it.
        record = AnswerRecord(answer_id, row.get(f"answer_{side}"), derived, lengths=lengths)
        _add_answer(question, record, path, line, f"answer_{side}")
    return a1_id, a2_id


def _csv_meta(get, path, line) -> dict:
    """The vote's provenance: the file and line, the exporting database's ids, lateness."""
    meta: dict = {"source": str(path.name), "line": line}
    for name in ("vote_id", "run_id"):  # the exporting database's ids, kept as the vote's provenance
        if get(name):
            meta[f"exported_{name}"] = get(name)
    if _yes_no(get, "late", path, line):
        meta["assignment"] = {"late": True}  # where the rater pages keep it
    return meta


def _yes_no(get, name: str, path, line) -> bool:
    value = get(name).lower()
    if value not in TRUE | FALSE:
        raise ImportProblem(path, line, name, f"{value!r} is not a yes/no value")
    return value in TRUE


def _group(get, is_gold: bool, known_groups: set[str], path, line) -> str:
    """The item's group: ``control`` or a perturbation kind. The votes export writes ``gold`` as
    the group of an attention check's item and its kind (if any) in ``perturbation_kind``."""
    group, kind = get("group") or "control", get("perturbation_kind")
    if group == "gold":
        if not is_gold:
            raise ImportProblem(path, line, "group", "'gold' is the group of an attention check (is_gold true)")
        group = kind or "control"
    elif kind and kind != group:
        raise ImportProblem(path, line, "perturbation_kind", f"{kind!r} is not the row's group {group!r}")
    if group != "control" and group not in known_groups:
        raise ImportProblem(path, line, "group", f"{group!r} is not a perturbation kind of this study")
    return group


def _verdict(get, shown_first: str | None, not_familiar: bool, path, line) -> tuple[str | None, str]:
    """(winner, parse status). A vote may lack a winner only when its parse status says the
    verdict could not be read (invalid, failed) or the rater was not familiar with the topic."""
    column = "choice" if get("choice") or not get("winner") else "winner"
    winner = get("winner").lower() or get("choice").lower() or None
    if winner not in (None, "a1", "a2", "tie"):
        raise ImportProblem(path, line, column, f"{winner!r} is not a1, a2 or tie")
    status = get("parse_status").lower()
    if status not in ("", "ok", "invalid", "failed"):
        raise ImportProblem(path, line, "parse_status", f"{status!r} is not ok, invalid or failed")
    if winner is None and status in ("", "ok") and not not_familiar:
        raise ImportProblem(path, line, column, "is empty")
    shown = get("choice_shown").lower()
    if shown:  # computed from the winner and the order shown: checked, not read
        expected = None if winner is None else _shown(winner, shown_first or "a1")
        if shown != expected:
            raise ImportProblem(path, line, "choice_shown", f"{shown!r} does not follow from {column} and shown_first")
    return winner, status


def _shown(winner: str, shown_first: str) -> str:
    return "tie" if winner == "tie" else ("first" if winner == shown_first else "second")


def _same_judge(get, judges: dict, path, line) -> None:
    """A judge's kind, backend, model and prompt style are the same on every row of it, and its
    votes come from one run of it at most (the analysis would count only the latest run's; the
    import makes no runs, so it would count them all)."""
    kind = get("judge_kind").lower()
    if kind not in ("", "human", "llm", "simulated", "imported"):
        raise ImportProblem(path, line, "judge_kind", f"{kind!r} is not human, llm, simulated or imported")
    params = {name: get(name) for name in JUDGE_PARAMS if get(name)}
    if kind in ("llm", "simulated"):
        params["kind"] = kind
    found = {"kind": kind, "params": params, "run_id": get("run_id")}
    known = judges.setdefault(get("judge"), found)
    for name, value in found.items():
        if known[name] != value:
            field_name = {"params": "model", "kind": "judge_kind"}.get(name, name)
            before = "votes of another run" if name == "run_id" else f"{name} {known[name]!r}"
            raise ImportProblem(path, line, field_name, f"judge {get('judge')!r} had {before} before")


def _milliseconds(get, name: str, path, line) -> int | None:
    ms = get(name)
    # Only ASCII digits: str.isdigit() also takes "²", which int() then refuses.
    if ms and (not re.fullmatch(r"[0-9]+", ms) or int(ms) > MAX_RESPONSE_MS):
        raise ImportProblem(
            path, line, name, f"{ms[:40]!r} is not a whole number of milliseconds (at most {MAX_RESPONSE_MS})"
        )
    return int(ms) if ms else None


def _moment(get, name: str, path, line) -> datetime | None:
    text = get(name)
    if not text:
        return None
    try:
        moment = parse_datetime(text)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        raise ImportProblem(path, line, name, f"{text[:40]!r} is not an ISO 8601 date and time with its UTC offset")
    return moment


def _round(get, path, line) -> int:
    text = get("round")
    if text and (not re.fullmatch(r"[0-9]+", text) or int(text) > MAX_ROUND):
        raise ImportProblem(path, line, "round", f"{text[:40]!r} is not a whole number up to {MAX_ROUND}")
    return int(text) if text else 0


def _read_utf8(path: Path) -> str:
    """The file's text; a UTF-8 byte-order mark is dropped (spreadsheets write one), anything
    that is not UTF-8 is refused naming the line where it starts."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportProblem(path, None, None, f"cannot read: {exc.strerror}") from exc
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ImportProblem(path, line, None, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None


def _csv_reader(path: Path) -> csv.DictReader:
    # strict: a quote left open is an error, not a field that swallows the rows after it (in the
    # default mode `q1,"unterminated,...` merged the next rows into one wrong vote).
    reader = csv.DictReader(io.StringIO(_read_utf8(path), newline=""), strict=True)
    with _csv_problems(path, reader):
        reader.fieldnames  # noqa: B018 - reads the header, where a broken one is reported
    return reader


def _csv_rows(reader: csv.DictReader, path: Path, problems: Problems, warnings: list[ImportProblem] | None = None):
    """The rows whose fields are fine (_csv_fields); a row with a bad field is reported in
    ``problems`` and left out. Text that is not CSV ends the reading, reported the same way.
    With ``warnings``, a row that may be several rows merged by a quote left open is named there
    (_merged_rows_warnings)."""
    start = reader.line_num + 1  # the header has been read
    try:
        with _csv_problems(path, reader):
            try:
                for row in reader:
                    if problems.check(_csv_fields, row, reader.line_num, path):
                        if warnings is not None:
                            warnings += _merged_rows_warnings(row, start, reader.line_num, path, reader.fieldnames)
                        yield row
                    start = reader.line_num + 1
            except csv.Error as exc:
                # A quote opened in the record that starts on `start` and never closed is found
                # only lines later: the problem is reported where that record starts.
                message = f"not readable as CSV from this line on: {exc} (is a quoted field left open?)"
                raise ImportProblem(path, start, None, message) from None
    except ImportProblem as exc:
        problems.add(exc)


def _merged_rows_warnings(row: dict, start: int, end: int, path: Path, header: list[str]) -> list[ImportProblem]:
    """A quoted field that spans lines and holds as many commas as a row is legal CSV, and is
    what a quote left open makes of the rows after it (`q1,"What is 2+2?,Four,...` then
    `q2,What is 3+3?",Six,...`: one vote whose question is two rows). Strict reading cannot tell
    the two apart, so such a field is imported and named, with its lines, in the warnings."""
    if end == start:
        return []
    row_commas = len(header) - 1
    return [
        ImportProblem(
            path,
            start,
            name,
            f"a quoted field spans lines {start}-{end} and holds {value.count(',')} commas, as many as a row has: "
            "if a quote was left open there, these rows were imported as one vote (close the quote and import "
            "again; nothing to do if the text is meant)",
        )
        for name, value in row.items()
        if isinstance(value, str) and ("\n" in value or "\r" in value) and value.count(",") >= row_commas
    ]


def _csv_fields(row: dict, line: int, path: Path) -> bool:
    """Each field checked: at most MAX_FIELD_CHARS, no NUL character (PostgreSQL cannot store
    one), ids no longer than their column."""
    for name, value in row.items():
        if not isinstance(value, str):
            continue  # a missing field (None) or the extra fields of a long row (a list)
        if len(value) > MAX_FIELD_CHARS:
            raise ImportProblem(path, line, name, f"longer than {MAX_FIELD_CHARS:,} characters")
        if "\x00" in value:
            raise ImportProblem(path, line, name, "contains a NUL character, which cannot be stored")
        if name in MAX_ID_CHARS and len(value.strip()) > MAX_ID_CHARS[name]:
            raise ImportProblem(path, line, name, f"at most {MAX_ID_CHARS[name]} characters, got {len(value.strip())}")
    return True


@contextmanager
def _csv_problems(path: Path, reader: csv.DictReader):
    """Lets fields grow past the csv module's limit, so that an over-long one is reported with
    its column by _csv_rows instead of as a bare csv.Error; reports malformed CSV by line."""
    previous = csv.field_size_limit(max(csv.field_size_limit(), 64 * MAX_FIELD_CHARS))
    try:
        yield
    except csv.Error as exc:
        raise ImportProblem(path, reader.line_num + 1, None, f"not readable as CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous)


def _numbers(get, columns, path, line, valid, what: str) -> dict[str, float]:
    """The non-empty ones of ``columns`` as numbers; a value that is not ``what`` is refused."""
    out = {}
    for column in columns:
        text = get(column)
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not math.isfinite(value) or not valid(value):
            raise ImportProblem(path, line, column, f"{text!r} is not {what}")
        out[column] = value
    return out


# --- MT-bench ---------------------------------------------------------------------------------


@every_problem
def parse_mtbench(
    path: Path, *, problems: Problems, limit: int | None = None, known_groups: set[str] = frozenset()
) -> Parsed:
    """``path``: the dataset folder (both vote files) or one of its vote files. MT-bench has no
    perturbation groups, so ``known_groups`` is not used."""
    folder = path if path.is_dir() else path.parent
    files = [folder / name for name in MTBENCH_FILES] if path.is_dir() else [path]
    if not path.is_dir() and path.name not in MTBENCH_FILES:
        raise ImportProblem(path, None, None, f"expected one of {', '.join(MTBENCH_FILES)} or their folder")
    mt_questions = _jsonl(folder / "question.jsonl", ("question_id", "category", "turns"), problems)
    answers = {
        (a["question_id"], a["model"]): a
        for a in _jsonl(folder / "model_answers.jsonl", ("question_id", "model", "turns"), problems)
    }
    by_id = {q["question_id"]: q for q in mt_questions}
    questions: dict[str, QuestionRecord] = {}
    votes: list[VoteRecord] = []
    for vote_file in files:
        judge_name = MTBENCH_FILES[vote_file.name]
        reader = _csv_reader(vote_file)
        for row in _csv_rows(reader, vote_file, problems):
            if limit is not None and len(votes) >= limit:
                break
            vote = problems.check(_mtbench_row, row, reader.line_num, vote_file, judge_name, by_id, answers, questions)
            if vote is not None:
                votes.append(vote)
    return Parsed(source=str(path), questions=questions, votes=votes)


def _jsonl(path: Path, keys: tuple[str, ...], problems: Problems) -> list[dict]:
    """The lines of a JSON Lines file that are objects with ``keys``; each other line is
    reported in ``problems`` and left out."""
    return [rec for _, rec in _jsonl_numbered(path, keys, problems)]


def _jsonl_numbered(path: Path, keys: tuple[str, ...], problems: Problems) -> list[tuple[int, dict]]:
    """``_jsonl``'s records with their line numbers."""
    lines = _read_utf8(path).splitlines()
    found = ((n, problems.check(_jsonl_line, path, n, line, keys)) for n, line in enumerate(lines, start=1))
    return [(n, rec) for n, rec in found if rec is not None]


def _jsonl_line(path: Path, n: int, line: str, keys: tuple[str, ...]) -> dict | None:
    if not line.strip():
        return None
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportProblem(path, n, None, f"not JSON: {exc.msg}") from exc
    except (ValueError, RecursionError) as exc:
        raise ImportProblem(path, n, None, f"not JSON: {exc or 'nested too deeply'}") from exc
    if not isinstance(rec, dict):
        raise ImportProblem(path, n, None, "each line must be a JSON object")
    for key in keys:
        if key not in rec:
            raise ImportProblem(path, n, key, "is missing")
    return rec


def _mtbench_row(row, line, path, judge_name, by_id, answers, questions) -> VoteRecord:
    try:
        qid, turn = int(row["question_id"]), int(row["turn"])
    except (KeyError, TypeError, ValueError):
        raise ImportProblem(path, line, "question_id/turn", "must be whole numbers") from None
    if qid not in by_id:
        raise ImportProblem(path, line, "question_id", f"{qid} is not in question.jsonl")
    if turn not in (1, 2):
        raise ImportProblem(path, line, "turn", f"{turn} is not 1 or 2")
    model_a, model_b, winner = row.get("model_a", ""), row.get("model_b", ""), row.get("winner", "")
    for model, name in ((model_a, "model_a"), (model_b, "model_b")):
        if (qid, model) not in answers:
            raise ImportProblem(path, line, name, f"no answer of {model!r} to question {qid} in model_answers.jsonl")
    meaning = {"model_a": model_a, "model_b": model_b}.get(winner)
    if meaning is None and not winner.startswith("tie"):
        raise ImportProblem(path, line, "winner", f"{winner!r} is not model_a, model_b or tie")
    first, second = sorted((model_a, model_b))
    external = f"mtbench-{qid}-t{turn}-{first}-vs-{second}"
    mt = by_id[qid]
    text = mt["turns"][0] if turn == 1 else f"{mt['turns'][0]}\n\n(Follow-up) {mt['turns'][1]}"
    bloom = MTBENCH_BLOOM.get(mt["category"], BloomLevel.UNDERSTANDING)
    # Both turns and every model pair of an MT-bench question share its prompt: one cluster.
    question = _add_question(questions, QuestionRecord(external, text, bloom, prompt_key=f"mtbench-{qid}"), path, line)
    for model in (first, second):
        _add_answer(
            question,
            AnswerRecord(f"{external}-{model}", answers[(qid, model)]["turns"][turn - 1], system=model),
            path,
            line,
            "turn",
        )
    _add_item(question, "control", (f"{external}-{first}", f"{external}-{second}"), path, line)
    choice = "tie" if meaning is None else ("a1" if meaning == first else "a2")
    rater = row.get("judge", "") if judge_name == "mtbench-human" else ""
    return VoteRecord(
        question=external,
        group="control",
        judge=judge_name,
        winner=choice,
        rater=rater,
        meta={
            "source": path.name,
            "line": line,
            "turn": turn,
            "winner": winner,
            "model_a": model_a,
            "model_b": model_b,
            "judge": row.get("judge", ""),
        },
    )
