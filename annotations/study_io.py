"""Reading and writing whole studies: our own JSON format ("biasstudy", docs/STUDY_FORMAT.md)
and the files published with Chen et al. 2024 ("chen2024").

Every reader turns its input into one biasstudy document (a dict); `study_document_validate`
checks it completely before anything is written, and `study_import` writes it in a single
transaction. So a bad file fails as a whole, with a message naming file, line and field, and
leaves the database untouched.
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.db import models, transaction

from annotations.models import (
    Answer,
    BloomLevel,
    ComparisonItem,
    PerturbationKind,
    Question,
    Semantics,
    Slot,
    Study,
    items_reachable,
    target_lowered_message,
)
from annotations.signals import study_answers_prepared
from biasstudy.limits import VOTES_PER_ITEM_MAX
from biasstudy.rendering import text_problem

log = logging.getLogger(__name__)

FORMAT_NAME = "biasstudy"
FORMAT_VERSION = 1

# Study settings a document may carry, with their types; anything else is a typo.
STUDY_FIELDS: dict[str, type | tuple[type, ...]] = {
    "slug": str,
    "title": str,
    "status": str,
    "instructions": str,
    "consent": str,
    "votes_per_item": int,
    "target_per_rater": int,
    "min_response_ms": int,
    "ms_per_word": int,
    "fast_notice": bool,
    "lease_seconds": int,
    "one_variant_per_question": bool,
    "completion_code": str,
    "per_rater_codes": bool,
    "prolific_completion_url": str,
    "allow_mturk_frame": bool,
    "gold_every": int,
    "gold_min_accuracy": (int, float),
    "max_length_ratio": (int, float),
}
ANSWER_FIELDS = {"id", "text", "derived_from", "kind", "provenance", "review_status", "inserted_errors", "checks"}
QUESTION_FIELDS = {"id", "bloom", "text", "answers", "items", "subset"}
GOLD_FIELDS = {"id", "bloom", "text", "better", "worse"}
KIND_FIELDS = {"slug", "name", "description", "semantics", "steps"}
INSERTED_ERROR_FIELDS = {"original", "error", "explanation", "description"}

# Bounds on what one document may hold, whatever it came through (command or API): no value
# nested deeper than MAX_DEPTH (a deeper one costs recursion in every reader after us), no
# number that JSON columns or Python's float cannot hold, and no text shown to raters longer
# than MAX_MARKDOWN_CHARS (biasstudy.rendering renders no more than that as markdown).
MAX_DEPTH = 32
MAX_INTEGER = 2**63 - 1
MAX_DERIVATION_DEPTH = 8


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


# --------------------------------------------------------------------------- biasstudy format


class _Locator:
    """Finds the line where a record starts, so errors in a JSON document can name a line."""

    def __init__(self, text: str):
        self.text = text

    def line_of(self, needle: str | None) -> int | None:
        if not needle:
            return None
        index = self.text.find(json.dumps(needle))
        return self.text.count("\n", 0, index) + 1 if index >= 0 else None


def read_biasstudy(path: Path) -> tuple[dict, _Locator]:
    text = _read_text(path)
    document = _loads(text, path)
    if not isinstance(document, dict):
        raise StudyFileError(path, "the document must be a JSON object", line=1)
    return document, _Locator(text)


def study_document_validate(document: dict, *, path: str | Path, locator: _Locator | None = None) -> None:
    """Check a biasstudy document completely; raise StudyFileError with every problem found
    (each setting, kind, question and attention check is checked on its own)."""
    locate = locator.line_of if locator else (lambda _needle: None)
    problems = Problems()
    check = problems.check

    def fail(message: str, field: str, near: str | None = None) -> None:
        raise StudyFileError(path, message, line=locate(near), field=field)

    unstorable = first_unstorable(document)
    if unstorable is not None:
        check(fail, unstorable[1], unstorable[0] or "(a key)")
    if document.get("format") != FORMAT_NAME:
        check(fail, f"expected \"format\": \"{FORMAT_NAME}\"", "format")
    if document.get("version") != FORMAT_VERSION:
        check(fail, f"unsupported version {document.get('version')!r} (this program reads {FORMAT_VERSION})", "version")
    study = document.get("study")
    if isinstance(study, dict):
        _validate_settings(study, fail, problems)
    else:
        check(fail, "missing or not an object", "study")

    kinds = _validate_kinds(document.get("perturbation_kinds", []), fail, problems)

    questions = document.get("questions")
    seen_questions: set[str] = set()
    # A study may have no questions yet: one saved in the admin before its questions exports so.
    if not isinstance(questions, list):
        check(fail, "must be a list", "questions")
    else:
        for qi, question in enumerate(questions):
            check(_validate_question, question, f"questions[{qi}]", kinds, seen_questions, fail)
    gold_items = document.get("gold_items", [])
    if not isinstance(gold_items, list):
        check(fail, "must be a list", "gold_items")
    else:
        for gi, gold in enumerate(gold_items):
            check(_validate_gold, gold, f"gold_items[{gi}]", seen_questions, fail)
    problems.raise_any()


def _validate_settings(study: dict, fail: Callable, problems: Problems) -> None:
    check, before = problems.check, problems.count()
    for key, value in study.items():
        if key not in STUDY_FIELDS:
            check(fail, f"unknown setting (known: {', '.join(STUDY_FIELDS)})", f"study.{key}", key)
            continue
        expected = STUDY_FIELDS[key]
        if isinstance(value, bool) and expected is not bool or not isinstance(value, expected):
            check(fail, f"must be {_type_name(expected)}, got {value!r}", f"study.{key}", key)
    for required in ("slug", "title"):
        if study.get(required, "") == "":  # missing or empty; a value of the wrong type was named above
            check(fail, "required", f"study.{required}")
    for key in ("instructions", "consent"):
        check(_check_text_size, study.get(key, ""), f"study.{key}", fail, key)
    if problems.count() > before:
        return  # the checks below read the settings as the ones above made sure they are
    if not re.fullmatch(r"[-a-zA-Z0-9_]+", study["slug"]):
        check(fail, "must contain only letters, digits, hyphens and underscores", "study.slug", "slug")
    if "status" in study and study["status"] not in Study.Status.values:
        check(fail, f"must be one of {', '.join(Study.Status.values)}", "study.status", "status")
    # Each item gets this many slots when the study is written (Slot.objects.sync): bounded as
    # everywhere else a number of votes per item is asked for, so one file cannot occupy a worker.
    if study.get("votes_per_item", 1) > VOTES_PER_ITEM_MAX:
        check(fail, f"must be less than or equal to {VOTES_PER_ITEM_MAX}", "study.votes_per_item", "votes_per_item")
    if problems.count() > before:
        return  # the model would name the same values again
    # The model's own field validators and check constraints (lengths, ranges, shares), so a
    # value the database would refuse is refused here, by name, before anything is written.
    try:
        Study(**study).full_clean(validate_unique=False)
    except ValidationError as exc:
        for name, messages in exc.message_dict.items():
            check(fail, " ".join(messages), f"study.{name}" if name != NON_FIELD_ERRORS else "study", name)


def _validate_gold(gold: Any, field: str, seen_questions: set, fail: Callable) -> None:
    if not isinstance(gold, dict):
        fail("must be an object", field)
    _check_keys(gold, GOLD_FIELDS, field, fail, gold.get("id"))
    for key in ("id", "text", "better", "worse"):
        if not isinstance(gold.get(key), str) or not gold[key].strip():
            fail("required text", f"{field}.{key}", gold.get("id"))
        _check_text_size(gold[key], f"{field}.{key}", fail, gold["id"])
    _check_bloom(gold.get("bloom"), f"{field}.bloom", fail, gold["id"])
    if gold["id"] in seen_questions:
        fail(f"duplicate question id {gold['id']!r}", f"{field}.id", gold["id"])
    # Its two answers are stored as "<id>-better" and "<id>-worse".
    _check_length(gold["id"] + "-better", Answer, "external_id", f"{field}.id", fail)
    seen_questions.add(gold["id"])


def _validate_kinds(declared: Any, fail: Callable, problems: Problems) -> dict[str, str]:
    """Known kinds (built-in or already in the database, plus declared ones) -> semantics. A
    declared kind with a problem still counts as declared, so its answers are not reported too."""
    known = dict(PerturbationKind.objects.values_list("slug", "semantics"))
    if not isinstance(declared, list):
        problems.check(fail, "must be a list", "perturbation_kinds")
        return known
    for ki, kind in enumerate(declared):
        problems.check(_validate_kind, kind, f"perturbation_kinds[{ki}]", known, fail)
    return known


def _validate_kind(kind: Any, field: str, known: dict[str, str], fail: Callable) -> None:
    if not isinstance(kind, dict) or not kind.get("slug"):
        fail("must be an object with a slug", field)
    slug = kind["slug"]
    if not isinstance(slug, str) or not re.fullmatch(r"[-a-z0-9_]+", slug):
        fail("slug must be lower-case letters, digits, hyphens or underscores", f"{field}.slug", slug)
    known.setdefault(slug, kind.get("semantics"))
    _check_keys(kind, KIND_FIELDS, field, fail, slug)
    if kind.get("semantics") not in Semantics.values:
        fail(f"semantics must be one of {', '.join(Semantics.values)}", f"{field}.semantics", slug)
    for key in ("name", "description"):
        if not isinstance(kind.get(key, ""), str):
            fail("must be text", f"{field}.{key}", slug)
    steps = kind.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(step, str) for step in steps):
        fail("must be a list of kind slugs", f"{field}.steps", slug)
    _check_length(slug, PerturbationKind, "slug", f"{field}.slug", fail)
    _check_length(kind.get("name") or slug, PerturbationKind, "name", f"{field}.name", fail)
    if known[slug] != kind["semantics"]:
        fail(f"kind {slug!r} already exists with semantics {known[slug]!r}", f"{field}.semantics", slug)
    known[slug] = kind["semantics"]


def _validate_question(question: Any, field: str, kinds: dict, seen: set, fail: Callable) -> None:
    if not isinstance(question, dict):
        fail("must be an object", field)
    qid = question.get("id")
    if not isinstance(qid, str) or not qid.strip():
        fail("required text", f"{field}.id")
    _check_keys(question, QUESTION_FIELDS, field, fail, qid)
    if qid in seen:
        fail(f"duplicate question id {qid!r}", f"{field}.id", qid)
    _check_length(qid, Question, "external_id", f"{field}.id", fail)
    seen.add(qid)
    if not isinstance(question.get("text"), str) or not question["text"].strip():
        fail("required text", f"{field}.text", qid)
    _check_text_size(question["text"], f"{field}.text", fail, qid)
    _check_bloom(question.get("bloom"), f"{field}.bloom", fail, qid)
    if not isinstance(question.get("subset", ""), str):
        fail("must be text", f"{field}.subset", qid)
    _check_length(question.get("subset", ""), Question, "subset", f"{field}.subset", fail)
    answers = question.get("answers")
    if not isinstance(answers, list):
        fail("must be a list", f"{field}.answers", qid)
    by_id: dict[str, dict] = {}
    for ai, answer in enumerate(answers):
        afield = f"{field}.answers[{ai}]"
        if not isinstance(answer, dict):
            fail("must be an object", afield, qid)
        aid = answer.get("id")
        if not isinstance(aid, str) or not aid.strip():
            fail("required text", f"{afield}.id", qid)
        _check_keys(answer, ANSWER_FIELDS, afield, fail, aid)
        if aid in by_id:
            fail(f"duplicate answer id {aid!r}", f"{afield}.id", aid)
        _check_length(aid, Answer, "external_id", f"{afield}.id", fail)
        if not isinstance(answer.get("text"), str) or not answer["text"].strip():
            fail("required text", f"{afield}.text", aid)
        _check_text_size(answer["text"], f"{afield}.text", fail, aid)
        by_id[aid] = answer
        validate_answer_record(answer, afield, fail)
    for ai, answer in enumerate(answers):
        afield = f"{field}.answers[{ai}]"
        parent, kind = answer.get("derived_from"), answer.get("kind")
        if parent is None and kind is None:
            continue
        for key, value in (("derived_from", parent), ("kind", kind)):
            if value is not None and not isinstance(value, str):
                fail(
                    f"must be an answer id or a kind slug (text), got {_shown(value)}", f"{afield}.{key}", answer["id"]
                )
        if parent is None or kind is None:
            fail("a variant needs both derived_from and kind", afield, answer["id"])
        if parent not in by_id:
            fail(f"the original {parent!r} is not an answer of question {qid!r}", f"{afield}.derived_from", answer["id"])
        if parent == answer["id"]:
            fail("an answer cannot be derived from itself", f"{afield}.derived_from", answer["id"])
        if kind not in kinds:
            fail(f"unknown perturbation kind {kind!r} (declare it in perturbation_kinds)", f"{afield}.kind", answer["id"])
    for ai, answer in enumerate(answers):
        # Every variant leads back to an original in a few steps: no cycle, no chain deeper than
        # MAX_DERIVATION_DEPTH (the writer and deletion walk it).
        steps, parent = 0, answer.get("derived_from")
        while parent is not None:
            steps += 1
            if steps > MAX_DERIVATION_DEPTH:
                fail(
                    f"derived through more than {MAX_DERIVATION_DEPTH} variants, or in a circle",
                    f"{field}.answers[{ai}].derived_from",
                    answer["id"],
                )
            parent = by_id[parent].get("derived_from")
    originals = [a["id"] for a in answers if a.get("derived_from") is None]
    if len(originals) != 2:
        fail(f"a question needs exactly two original answers, found {len(originals)}", f"{field}.answers", qid)
    items = question.get("items")
    if items is None:
        items = _derive_items(question)
    if not isinstance(items, list):
        fail("must be a list", f"{field}.items", qid)
    groups: set = set()
    for ii, item in enumerate(items):
        ifield = f"{field}.items[{ii}]"
        if not isinstance(item, dict) or set(item) - {"kind", "a1", "a2", "gold_label"}:
            fail("must be an object with kind, a1, a2 and optionally gold_label", ifield, qid)
        if item.get("gold_label", "") not in ("", "a1", "a2"):
            fail("must be a1, a2 or empty", f"{ifield}.gold_label", qid)
        for side in ("a1", "a2"):
            if not isinstance(item.get(side), str) or item[side] not in by_id:
                fail(f"unknown answer {_shown(item.get(side))}", f"{ifield}.{side}", qid)
        if item["a1"] == item["a2"]:
            fail("an item compares two different answers", ifield, qid)
        group = item.get("kind")
        if group is not None and not isinstance(group, str):
            fail(f"must be a kind slug (text) or null, got {_shown(group)}", f"{ifield}.kind", qid)
        if group is not None and group not in kinds:
            fail(f"unknown perturbation kind {group!r}", f"{ifield}.kind", qid)
        if group in groups:
            fail(f"two items of group {group or 'control'!r} for one question", f"{ifield}.kind", qid)
        groups.add(group)
    if None not in groups:
        fail("every question needs one control item (kind null)", f"{field}.items", qid)


def _derive_items(question: dict) -> list[dict]:
    """Control item of the two originals, plus one item per approved variant against the other
    original (the one the variant was not derived from)."""
    answers = question["answers"]
    by_id = {a["id"]: a for a in answers}
    originals = [a["id"] for a in answers if a.get("derived_from") is None]
    if len(originals) != 2:
        return []
    items: list[dict] = [{"kind": None, "a1": originals[0], "a2": originals[1]}]
    for answer in answers:
        if answer.get("derived_from") is None or answer.get("review_status", "approved") != "approved":
            continue
        root = answer["derived_from"]
        while by_id.get(root, {}).get("derived_from"):
            root = by_id[root]["derived_from"]
        other = originals[1] if root == originals[0] else originals[0]
        items.append({"kind": answer["kind"], "a1": other, "a2": answer["id"]})
    return items


def first_unstorable(document: Any) -> tuple[str, str] | None:
    """(dotted path, why) of the first value no reader or database should be handed: a string
    (key or value) holding a NUL character, which PostgreSQL cannot store in text or JSON; a
    number that is not finite or does not fit 64 bits; nesting deeper than MAX_DEPTH. None if
    there is none. Walks without recursion, so no document can exhaust the stack here."""
    stack: list[tuple[str, int, Any]] = [("", 0, document)]
    while stack:
        where, depth, node = stack.pop()
        if isinstance(node, str):
            if (why := _unstorable_text(node)) is not None:
                return where, why
        elif isinstance(node, float) and not math.isfinite(node):
            return where, f"{node} is not a number that can be stored"
        elif isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INTEGER:
            return where, f"the number is too large to store (at most {MAX_INTEGER})"
        elif isinstance(node, (dict, list)):
            if depth >= MAX_DEPTH:
                return where, f"nested more than {MAX_DEPTH} levels deep"
            items = list(node.items() if isinstance(node, dict) else enumerate(node))
            for key, value in reversed(items):
                path = f"{where}[{key}]" if isinstance(node, list) else f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and (why := _unstorable_text(key)) is not None:
                    return path, why
                stack.append((path, depth + 1, value))
    return None


def _unstorable_text(text: str) -> str | None:
    """Why `text` cannot be stored, or None: a NUL character, or a lone surrogate (JSON's
    "\\ud800" without its pair), which is not valid UTF-8."""
    if "\x00" in text:
        return "contains a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"contains a lone surrogate (\\u{ord(text[exc.start]):04x}), which is not valid UTF-8 and cannot be stored"
    return None


def validate_answer_record(answer: dict, field: str, fail: Callable) -> None:
    """The optional parts of an answer, typed as the review page and the checks read them."""
    aid = answer["id"]
    if answer.get("review_status", "approved") not in Answer.Review.values:
        fail(f"must be one of {', '.join(Answer.Review.values)}", f"{field}.review_status", aid)
    errors = answer.get("inserted_errors", [])
    if not isinstance(errors, list):
        fail("must be a list", f"{field}.inserted_errors", aid)
    for ei, error in enumerate(errors):
        efield = f"{field}.inserted_errors[{ei}]"
        if not isinstance(error, dict):
            fail(f"must be an object with {', '.join(sorted(INSERTED_ERROR_FIELDS))}", efield, aid)
        _check_keys(error, INSERTED_ERROR_FIELDS, efield, fail, aid)
        for key, value in error.items():
            if not isinstance(value, str):
                fail(f"must be text, got {_shown(value)}", f"{efield}.{key}", aid)
    provenance = answer.get("provenance", {})
    if not isinstance(provenance, dict):
        fail("must be an object", f"{field}.provenance", aid)
    if not isinstance(provenance.get("edits", []), list):
        fail("must be a list", f"{field}.provenance.edits", aid)
    checks = answer.get("checks", {})
    if not isinstance(checks, dict):
        fail(
            f"must be an object (the results of the perturbation checks), got {_shown(checks)}", f"{field}.checks", aid
        )
    warnings = checks.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        fail("must be a list of text", f"{field}.checks.warnings", aid)
    if not isinstance(checks.get("ok", True), bool):
        fail("must be true or false", f"{field}.checks.ok", aid)


def _shown(value: Any) -> str:
    """A value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_text_size(value: str, field: str, fail: Callable, near: str | None) -> None:
    if not isinstance(value, str):
        fail("must be text", field, near)
    if problem := text_problem(value):
        fail(problem, field, near)


def _check_keys(record: dict, allowed: set, field: str, fail: Callable, near: str | None) -> None:
    unknown = sorted(set(record) - allowed)
    if unknown:
        fail(f"unknown field(s) {', '.join(unknown)} (allowed: {', '.join(sorted(allowed))})", field, near)


def _check_length(value: str, model: type, name: str, field: str, fail: Callable) -> None:
    limit = model._meta.get_field(name).max_length
    if len(value) > limit:
        fail(f"at most {limit} characters, got {len(value)}", field, value[:limit])


def _check_bloom(value: Any, field: str, fail: Callable, near: str | None) -> None:
    if value not in BloomLevel.values:
        fail(f"unknown Bloom level {value!r} (one of {', '.join(BloomLevel.values)})", field, near)


def _type_name(expected: type | tuple[type, ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join({"str": "text", "int": "a whole number", "float": "a number", "bool": "true/false"}[t.__name__] for t in types)


# --------------------------------------------------------------------------- chen2024 format

CHEN_CONTROL_FILE = "raw.json"
_BLOCK = re.compile(r"```(\w+)\s*\n(.*?)(?:```|\Z)", re.S)


def read_chen2024(path: Path) -> tuple[dict, None]:
    """The folder published with Chen et al. 2024: raw.json (control pairs) and one JSON Lines
    file per perturbation, named after the perturbation kind (factual_error.json, ...).

    In each perturbation file one answer is a perturbed copy of a raw answer; its answer_id is
    the original's plus four characters, which is how we find which original it came from (it
    may sit in either slot, and the slot differs between files for the same question).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise StudyFileError(folder, "expected the folder that holds raw.json and the perturbation files")
    control = folder / CHEN_CONTROL_FILE
    if not control.exists():
        raise StudyFileError(control, "missing: the control file raw.json is required")
    known_kinds = set(PerturbationKind.objects.values_list("slug", flat=True))
    questions: dict[str, dict] = {}
    answers_by_id: dict[str, tuple[str, dict]] = {}
    problems = Problems()  # each line is read on its own: the report names every bad line
    for line_no, row in _jsonl(control, problems):
        problems.check(_read_chen_control, control, line_no, row, questions, answers_by_id)

    for file in sorted(folder.glob("*.json")):
        if file.name == CHEN_CONTROL_FILE:
            continue
        kind = file.stem
        if kind not in known_kinds:
            problems.add(StudyFileError(file, f"no perturbation kind {kind!r}: the file name must be a kind's slug"))
            continue
        seen: set[str] = set()
        for line_no, row in _jsonl(file, problems):
            problems.check(_read_chen_perturbation, file, line_no, row, kind, questions, answers_by_id, seen)
    problems.raise_any()

    document = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "study": {
            "slug": "chen2024",
            "title": "Humans or LLMs as the Judge? (Chen et al. 2024) items",
            "status": "draft",
            "instructions": "Compare the two answers to the question and choose the better one, or a tie.",
            "votes_per_item": 6,
        },
        "perturbation_kinds": [],
        "questions": list(questions.values()),
    }
    return document, None


def _read_chen_control(control: Path, line_no: int, row: dict, questions: dict, answers_by_id: dict) -> None:
    for key in ("question_id", "question", "level", "answers"):
        if key not in row:
            raise StudyFileError(control, "missing field", line=line_no, field=key)
    qid = row["question_id"]
    if not isinstance(qid, str) or not qid:
        raise StudyFileError(control, "must be a non-empty string", line=line_no, field="question_id")
    if qid in questions:
        raise StudyFileError(control, f"duplicate question id {qid!r}", line=line_no, field="question_id")
    level = str(row["level"]).lower()
    if level not in BloomLevel.values:
        raise StudyFileError(control, f"unknown Bloom level {row['level']!r}", line=line_no, field="level")
    answers = []
    for slot in ("answer1", "answer2"):
        answer = row["answers"].get(slot) if isinstance(row["answers"], dict) else None
        if (
            not isinstance(answer, dict)
            or not isinstance(answer.get("answer_id"), str)
            or not answer["answer_id"]
            or not isinstance(answer.get("answer"), str)
        ):
            raise StudyFileError(control, "missing answer or answer_id", line=line_no, field=f"answers.{slot}")
        aid = answer["answer_id"]
        if aid in answers_by_id or any(aid == a["id"] for a in answers):
            raise StudyFileError(control, f"duplicate answer id {aid!r}", line=line_no, field=f"answers.{slot}.answer_id")
        answers.append({"id": aid, "text": answer["answer"], "provenance": _chen_provenance(row, None)})
    for record in answers:  # a line is taken whole or not at all
        answers_by_id[record["id"]] = (qid, record)
    questions[qid] = {"id": qid, "bloom": level, "text": row["question"], "answers": answers}


def _read_chen_perturbation(
    file: Path, line_no: int, row: dict, kind: str, questions: dict, answers_by_id: dict, seen: set
) -> None:
    for key in ("question_id", "answers"):
        if key not in row:
            raise StudyFileError(file, "missing field", line=line_no, field=key)
    if not isinstance(row["question_id"], str):
        raise StudyFileError(file, "must be a string", line=line_no, field="question_id")
    if not isinstance(row["answers"], dict):
        raise StudyFileError(file, "must be an object with answer1 and answer2", line=line_no, field="answers")
    qid = row["question_id"].removesuffix(f"-{kind}")
    if qid not in questions:
        raise StudyFileError(file, f"question {qid!r} is not in raw.json", line=line_no, field="question_id")
    if qid in seen:
        raise StudyFileError(file, f"duplicate question id {qid!r}", line=line_no, field="question_id")
    seen.add(qid)
    perturbed = [(slot, a) for slot, a in row["answers"].items() if isinstance(a, dict) and a.get("perturb")]
    if len(perturbed) != 1:
        raise StudyFileError(file, f"expected exactly one perturbed answer, found {len(perturbed)}", line=line_no, field="answers")
    slot, answer = perturbed[0]
    aid = answer.get("answer_id") or ""
    if not isinstance(aid, str):
        raise StudyFileError(file, "must be a string", line=line_no, field=f"answers.{slot}.answer_id")
    original_id = aid[:-4]
    owner = answers_by_id.get(original_id)
    if len(aid) <= 4 or owner is None or owner[0] != qid:
        raise StudyFileError(
            file,
            f"the original of perturbed answer {aid!r} (id {original_id!r}) is not an answer of {qid!r} in raw.json",
            line=line_no,
            field=f"answers.{slot}.answer_id",
        )
    if aid in answers_by_id:
        raise StudyFileError(file, f"duplicate answer id {aid!r}", line=line_no, field=f"answers.{slot}.answer_id")
    if not isinstance(answer.get("answer"), str) or not answer["answer"].strip():
        raise StudyFileError(file, "missing answer text", line=line_no, field=f"answers.{slot}.answer")
    variant = {
        "id": aid,
        "text": answer["answer"].strip(),
        "derived_from": original_id,
        "kind": kind,
        "provenance": _chen_provenance(row, answer),
        "review_status": "approved",
    }
    raw_answer = answer.get("raw_answer") or ""
    if not isinstance(raw_answer, str):
        raise StudyFileError(
            file, f"must be text, got {_shown(raw_answer)}", line=line_no, field=f"answers.{slot}.raw_answer"
        )
    errors = _chen_inserted_errors(raw_answer)
    if errors:
        variant["inserted_errors"] = errors
    answers_by_id[aid] = (qid, variant)
    questions[qid]["answers"].append(variant)


def _chen_provenance(row: dict, answer: dict | None) -> dict:
    if answer is None:
        return {"method": "import", "source": "chen2024", "model": row.get("model_id"), "temperature": row.get("temperature")}
    return {
        "method": "import",
        "source": "chen2024",
        "model": answer.get("perturb_model_id"),
        "prompt": answer.get("perturb_prompt"),
    }


def _chen_inserted_errors(raw_output: str) -> list[dict]:
    """The ```error block of the perturbing model's output: one numbered line per error."""
    for name, body in _BLOCK.findall(raw_output):
        if name.lower() == "error":
            lines = [re.sub(r"^\s*\d+[.)]\s*", "", line).strip() for line in body.splitlines()]
            return [{"description": line} for line in lines if line]
    return []


def _jsonl(path: Path, problems: Problems):
    """(line number, object) of each line of a JSON Lines file; a line that is not a JSON object
    is a problem of its own, and the lines after it are read all the same."""
    text = problems.check(_read_text, path)
    for line_no, line in enumerate((text or "").splitlines(), start=1):
        if line.strip():
            row = problems.check(_jsonl_row, line, path, line_no)
            if row is not None:
                yield line_no, row


def _jsonl_row(line: str, path: Path, line_no: int) -> dict:
    row = _loads(line, path, line=line_no)
    if not isinstance(row, dict):
        raise StudyFileError(path, "each line must be a JSON object", line=line_no)
    return row


def _loads(text: str, path: Path, *, line: int | None = None) -> Any:
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


def _read_text(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StudyFileError(path, "no such file") from None
    except UnicodeDecodeError as exc:
        raise StudyFileError(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


READERS: dict[str, Callable[[Path], tuple[dict, _Locator | None]]] = {
    "biasstudy": read_biasstudy,
    "chen2024": read_chen2024,
}


# --------------------------------------------------------------------------- writing


def study_file_read(
    *, path: str | Path, fmt: str, slug: str | None = None, title: str | None = None, status: str | None = None
) -> dict:
    """Read and validate a study file, with the command's overrides; write nothing. The admin's
    upload shows this document as its preview before the same file is imported."""
    if fmt not in READERS:
        raise StudyFileError(path, f"unknown format {fmt!r} (one of {', '.join(READERS)})")
    document, locator = READERS[fmt](Path(path))
    overrides = {key: value for key, value in (("slug", slug), ("title", title), ("status", status)) if value}
    if isinstance(document.get("study"), dict):
        document["study"].update(overrides)
    study_document_validate(document, path=path, locator=locator)
    if Study.objects.filter(slug=document["study"]["slug"]).exists():
        raise StudyFileError(path, f"a study with slug {document['study']['slug']!r} exists already (choose another with --slug)", field="study.slug")
    document["notes"] = [note for note in [_target_reachable(document)] if note]
    return document


def _target_reachable(document: dict) -> str | None:
    """Lower the study's target (the file's, or the default) to the most items one rater can
    get from this file, as Study.target_reachable does for a saved study; the warning to show,
    or None. A target nobody can reach is never imported to fail the study's next save."""
    study = document["study"]
    by_question = study.get("one_variant_per_question", Study._meta.get_field("one_variant_per_question").default)
    regular = 0
    for record in document["questions"]:
        approved = {a["id"] for a in record["answers"] if a.get("review_status", Answer.Review.APPROVED) == "approved"}
        listed = record.get("items")
        items = listed if listed is not None else _derive_items(record)
        shown = sum(1 for item in items if item["a1"] in approved and item["a2"] in approved)
        regular += min(shown, 1) if by_question else shown
    gold_every = study.get("gold_every", Study._meta.get_field("gold_every").default)
    most = items_reachable(regular=regular, gold=len(document.get("gold_items", [])), gold_every=gold_every)
    target = study.get("target_per_rater", Study._meta.get_field("target_per_rater").default)
    if not most or target <= most:
        return None
    study["target_per_rater"] = most
    return target_lowered_message(target, most)


def study_import(
    *,
    path: str | Path,
    fmt: str,
    slug: str | None = None,
    title: str | None = None,
    status: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Study:
    """Read, validate and write a study file. Nothing is written unless all of it is valid."""
    document = study_file_read(path=path, fmt=fmt, slug=slug, title=title, status=status)
    return study_document_write(document, progress=progress)


def study_document_write(document: dict, *, progress: Callable[[int, int], None] | None = None) -> Study:
    """Write a validated document, all or nothing. Everything that takes time is done first,
    outside the transaction: rendering each text's Markdown, measuring the answers' lengths,
    building every row (study, questions, answers, items, slots) as unsaved objects linked to
    each other and converting their values for the database. Inside it only the INSERTs run, in batches, so the database's write lock (on
    SQLite: the whole database) is held briefly and raters go on voting during a large import
    (bench/bench_import_lock.py, tests/test_reliability_import_lock.py). `progress(done, total)`
    is called after each question is prepared (the upload's task shows it to the admin)."""
    total = len(document["questions"])
    questions = []
    for done, record in enumerate(document["questions"], start=1):
        questions.append(_prepare_question(record))
        if progress is not None:
            progress(done, total)
    gold = [_prepare_gold(record) for record in document.get("gold_items", [])]
    rows = _study_rows(document, questions, gold)
    started, cpu = time.perf_counter(), time.thread_time()
    with transaction.atomic():
        study = _insert_study(rows)
    # How long raters' votes could not be written (SQLite) or the transaction stayed open.
    log.info(
        "study %s: %d rows written in one transaction in %.2f s (%.2f s CPU)",
        study.slug,
        rows.count(),
        time.perf_counter() - started,
        time.thread_time() - cpu,
    )
    return study


def _rendered(instance):
    """`instance` with its Markdown rendered and, for an answer, its lengths measured (the work
    save() does, which bulk_create skips)."""
    instance.refresh_html()
    if isinstance(instance, Answer):
        instance.refresh_lengths()
    return instance


def _prepare_question(record: dict) -> tuple[Question, dict[str, Answer]]:
    question = _rendered(
        Question(
            external_id=record["id"], text=record["text"], bloom_level=record["bloom"], subset=record.get("subset", "")
        )
    )
    answers = {
        data["id"]: _rendered(
            Answer(
                external_id=data["id"],
                text=data["text"],
                provenance=data.get("provenance", {}),
                review_status=data.get("review_status", Answer.Review.APPROVED),
                inserted_errors=data.get("inserted_errors", []),
                checks=data.get("checks", {}),
            )
        )
        for data in record["answers"]
    }
    return question, answers


def _prepare_gold(record: dict) -> tuple[Question, dict[str, Answer]]:
    question = _rendered(
        Question(external_id=record["id"], text=record["text"], bloom_level=record["bloom"], is_gold=True)
    )
    answers = {
        side: _rendered(Answer(external_id=f"{record['id']}-{side}", text=record[side])) for side in ("better", "worse")
    }
    return question, answers


@dataclass
class _StudyRows:
    """A study's rows, built before the import's transaction: the study and its new kinds
    (saved one by one), then each table's objects in the order they are written (answers level
    by level, so each parent is saved before its children). An object's foreign keys are its
    parent objects, unsaved: bulk_create reads their ids once they have them."""

    study: Study
    kinds: list[PerturbationKind]  # the study's own kinds that do not exist yet
    tables: list[tuple[type[models.Model], list[models.Model]]]

    def count(self) -> int:
        return 1 + len(self.kinds) + sum(len(objs) for _, objs in self.tables)


def _study_rows(document: dict, questions: list, gold: list) -> _StudyRows:
    study = Study(**document["study"])
    kinds = {kind.slug: kind for kind in PerturbationKind.objects.all()}
    new_kinds = []
    for kind in document.get("perturbation_kinds", []):
        if kind["slug"] not in kinds:  # an existing slug is reused, whatever the file says of it
            kinds[kind["slug"]] = PerturbationKind(
                slug=kind["slug"],
                name=kind.get("name") or kind["slug"],
                description=kind.get("description", ""),
                semantics=kind["semantics"],
                steps=kind.get("steps", []),
                study=study,
            )
            new_kinds.append(kinds[kind["slug"]])
    for question, _ in questions + gold:
        question.study = study
    answers: list[list[Answer]] = []  # by level, so that each parent is saved before its children
    items = []
    for record, (question, by_id) in zip(document["questions"], questions, strict=True):
        parents = {data["id"]: data.get("derived_from") for data in record["answers"]}
        for data in record["answers"]:
            answer = by_id[data["id"]]
            answer.question, answer.kind = question, kinds.get(data.get("kind"))
            answer.derived_from = by_id.get(parents[data["id"]])
            _at_level(answers, _derivation_level(data["id"], parents)).append(answer)
        listed = record.get("items")
        for item in listed if listed is not None else _derive_items(record):
            items.append(
                ComparisonItem(
                    study=study,
                    question=question,
                    kind=kinds.get(item.get("kind")),
                    answer_a1=by_id[item["a1"]],
                    answer_a2=by_id[item["a2"]],
                    gold_label=item.get("gold_label", ""),
                )
            )
    for question, by_side in gold:
        for answer in by_side.values():
            answer.question = question
            _at_level(answers, 0).append(answer)
        better, worse = by_side["better"], by_side["worse"]
        items.append(ComparisonItem(study=study, question=question, answer_a1=better, answer_a2=worse))
    study_answers_prepared.send(sender=Study, study=study, answers=[answer for level in answers for answer in level])
    slots = Slot.objects.planned(study, items)  # the slots ComparisonItem.save() would have made
    tables: list[tuple[type[models.Model], list]] = [(Question, [question for question, _ in questions + gold])]
    tables += [(Answer, level) for level in answers] + [(ComparisonItem, items), (Slot, slots)]
    return _StudyRows(study=study, kinds=new_kinds, tables=tables)


def _derivation_level(answer_id: str, parents: dict[str, str | None]) -> int:
    """0 for an original, 1 for its variant, and so on (validation bounds the chain)."""
    level = 0
    while (answer_id := parents[answer_id]) is not None:
        level += 1
    return level


def _at_level(levels: list[list[Answer]], level: int) -> list[Answer]:
    while len(levels) <= level:
        levels.append([])
    return levels[level]


def _insert_study(rows: _StudyRows) -> Study:
    rows.study.save()
    for kind in rows.kinds:
        kind.save()
    # bulk_create gives each object its new id (RETURNING, on PostgreSQL and SQLite 3.35+),
    # which the next table's rows read from their parent objects.
    for model, objs in rows.tables:
        model.objects.bulk_create(objs, batch_size=1000)
    return rows.study


def study_export(*, study: Study) -> dict:
    """The study as a biasstudy document; importing it gives the same study back."""
    settings = {field: getattr(study, field) for field in STUDY_FIELDS}
    kinds = [
        {"slug": k.slug, "name": k.name, "description": k.description, "semantics": k.semantics, "steps": k.steps}
        for k in PerturbationKind.objects.filter(study=study).order_by("slug")
    ]
    questions, gold_items = [], []
    answers_by_question: dict[int, list[Answer]] = {}
    for answer in Answer.objects.filter(question__study=study).select_related("derived_from", "kind").order_by("id"):
        answers_by_question.setdefault(answer.question_id, []).append(answer)
    items_by_question: dict[int, list[ComparisonItem]] = {}
    for item in ComparisonItem.objects.filter(study=study).select_related("kind", "answer_a1", "answer_a2").order_by("id"):
        items_by_question.setdefault(item.question_id, []).append(item)
    for question in study.questions.order_by("id"):
        answers = answers_by_question.get(question.id, [])
        if question.is_gold:
            item = items_by_question[question.id][0]
            gold_items.append(
                {
                    "id": question.external_id,
                    "bloom": question.bloom_level,
                    "text": question.text,
                    "better": item.answer_a1.text,
                    "worse": item.answer_a2.text,
                }
            )
            continue
        record = {
            "id": question.external_id,
            "bloom": question.bloom_level,
            "text": question.text,
            "answers": [_answer_record(a) for a in answers],
            "items": [
                {
                    "kind": i.kind.slug if i.kind_id else None,
                    "a1": i.answer_a1.external_id,
                    "a2": i.answer_a2.external_id,
                    **({"gold_label": i.gold_label} if i.gold_label else {}),
                }
                for i in items_by_question.get(question.id, [])
            ],
        }
        if question.subset:
            record["subset"] = question.subset
        questions.append(record)
    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "study": settings,
        "perturbation_kinds": kinds,
        "questions": questions,
        "gold_items": gold_items,
    }


def _answer_record(answer: Answer) -> dict:
    record: dict[str, Any] = {"id": answer.external_id, "text": answer.text}
    if answer.derived_from_id:
        record["derived_from"] = answer.derived_from.external_id
        record["kind"] = answer.kind.slug
    for field, empty in (("provenance", {}), ("inserted_errors", []), ("checks", {})):
        value = getattr(answer, field)
        if value != empty:
            record[field] = value
    if answer.review_status != Answer.Review.APPROVED:
        record["review_status"] = answer.review_status
    return record
