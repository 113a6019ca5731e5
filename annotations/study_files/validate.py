"""The rules of a biasstudy document (docs/STUDY_FORMAT.md): `study_document_validate` checks a
document completely, whichever reader made it, before anything is written, and reports every
problem it finds."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Container
from pathlib import Path
from typing import Any

from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from annotations import context as context_text
from annotations.models import Answer, BloomLevel, PerturbationKind, Question, Semantics, Study
from annotations.study_files.problems import Problems, StudyFileError
from biasstudy.limits import VOTES_PER_ITEM_MAX
from biasstudy.rendering import text_problem

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
    "platform_completion_url": str,
    "allow_mturk_frame": bool,
    "gold_every": int,
    "gold_min_accuracy": (int, float),
    "max_length_ratio": (int, float),
}
ANSWER_FIELDS = {
    "id",
    "text",
    "derived_from",
    "kind",
    "provenance",
    "review_status",
    "inserted_errors",
    "checks",
    "context",
}
QUESTION_FIELDS = {"id", "bloom", "text", "answers", "items", "subset", "prompt_key"}
GOLD_FIELDS = {"id", "bloom", "text", "better", "worse"}
KIND_FIELDS = {"slug", "name", "description", "semantics", "steps"}
INSERTED_ERROR_FIELDS = {"original", "error", "explanation", "description"}

# Bounds on what one document may hold, whatever it came through (command or API): no value
# nested deeper than MAX_DEPTH (a deeper one costs recursion in every reader after us), no
# number that JSON columns or Python's float cannot hold, and no text shown to raters longer
# than MAX_TEXT_CHARS (biasstudy.rendering: the bound of every way in).
MAX_DEPTH = 32
MAX_INTEGER = 2**63 - 1
MAX_DERIVATION_DEPTH = 8


class Locator:
    """Finds the line where a record starts, so errors in a JSON document can name a line."""

    def __init__(self, text: str):
        self.text = text

    def line_of(self, needle: str | None) -> int | None:
        if not needle:
            return None
        index = self.text.find(json.dumps(needle))
        return self.text.count("\n", 0, index) + 1 if index >= 0 else None


def study_document_validate(document: dict, *, path: str | Path, locator: Locator | None = None) -> None:
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
        check(fail, f'expected "format": "{FORMAT_NAME}"', "format")
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
        _check_required_text(gold.get(key), f"{field}.{key}", fail, gold.get("id"))
        _check_text_size(gold[key], f"{field}.{key}", fail, gold["id"])
    if gold.get("bloom", ""):  # an attention check needs no Bloom level
        _check_bloom(gold["bloom"], f"{field}.bloom", fail, gold["id"])
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
    """One question record, part by part in this order: its id, its text, its answers, its items.
    `fail` raises, so the first problem ends the record (and the report's order is this one)."""
    qid = _validate_question_id(question, field, seen, fail)
    _validate_question_text(question, field, qid, fail)
    by_id = _validate_answers(question.get("answers"), f"{field}.answers", qid, kinds, fail)
    listed = question.get("items")
    items = derive_items(question) if listed is None else listed
    _validate_items(items, f"{field}.items", qid, by_id, kinds, fail)


def _validate_question_id(question: Any, field: str, seen: set, fail: Callable) -> str:
    """The record is an object of known fields, with an id no other question of the file has."""
    qid = _check_record_id(
        question, field, fail, allowed=QUESTION_FIELDS, model=Question, what="question", earlier=seen, near=None
    )
    seen.add(qid)
    return qid


def _check_record_id(
    record: Any,
    field: str,
    fail: Callable,
    *,
    allowed: set,
    model: type,
    what: str,
    earlier: Container,
    near: str | None,
) -> str:
    """A question's or an answer's record is an object of `allowed` fields whose id is text,
    short enough for `model`'s external_id and not among `earlier` ids. Returns the id."""
    if not isinstance(record, dict):
        fail("must be an object", field, near)
    rid = record.get("id")
    _check_required_text(rid, f"{field}.id", fail, near)
    _check_keys(record, allowed, field, fail, rid)
    if rid in earlier:
        fail(f"duplicate {what} id {rid!r}", f"{field}.id", rid)
    _check_length(rid, model, "external_id", f"{field}.id", fail)
    return rid


def _validate_question_text(question: dict, field: str, qid: str, fail: Callable) -> None:
    """Its text, Bloom level and (optional) subset and prompt key."""
    _check_required_text(question.get("text"), f"{field}.text", fail, qid)
    _check_text_size(question["text"], f"{field}.text", fail, qid)
    _check_bloom(question.get("bloom"), f"{field}.bloom", fail, qid)
    for name in ("subset", "prompt_key"):
        if not isinstance(question.get(name, ""), str):
            fail("must be text", f"{field}.{name}", qid)
        _check_length(question.get(name, ""), Question, name, f"{field}.{name}", fail)


def _validate_answers(answers: Any, field: str, qid: str, kinds: dict, fail: Callable) -> dict[str, dict]:
    """A question's answers: each one's own fields, then each variant's original and kind, then
    the chains of variants, then the two originals. Returns the answers by id."""
    if not isinstance(answers, list):
        fail("must be a list", field, qid)
    by_id: dict[str, dict] = {}
    for ai, answer in enumerate(answers):
        _validate_answer(answer, f"{field}[{ai}]", qid, by_id, fail)
        by_id[answer["id"]] = answer
    for ai, answer in enumerate(answers):
        _validate_variant(answer, f"{field}[{ai}]", qid, by_id, kinds, fail)
    for ai, answer in enumerate(answers):
        _validate_derivation(answer, f"{field}[{ai}].derived_from", by_id, fail)
    originals = [a["id"] for a in answers if a.get("derived_from") is None]
    if len(originals) != 2:
        fail(f"a question needs exactly two original answers, found {len(originals)}", field, qid)
    return by_id


def _validate_answer(answer: Any, field: str, qid: str, earlier: dict[str, dict], fail: Callable) -> None:
    """One answer's own fields: an id no earlier answer of the question has, its text, and the
    optional parts (`validate_answer_record`)."""
    aid = _check_record_id(
        answer, field, fail, allowed=ANSWER_FIELDS, model=Answer, what="answer", earlier=earlier, near=qid
    )
    _check_required_text(answer.get("text"), f"{field}.text", fail, aid)
    _check_text_size(answer["text"], f"{field}.text", fail, aid)
    validate_answer_record(answer, field, fail)


def _validate_variant(answer: dict, field: str, qid: str, by_id: dict[str, dict], kinds: dict, fail: Callable) -> None:
    """A variant (an answer with derived_from or kind) names both: another answer of the same
    question as its original, and a known perturbation kind."""
    aid, parent, kind = answer["id"], answer.get("derived_from"), answer.get("kind")
    if parent is None and kind is None:
        return  # an original
    for key, value in (("derived_from", parent), ("kind", kind)):
        if value is not None and not isinstance(value, str):
            fail(f"must be an answer id or a kind slug (text), got {shown(value)}", f"{field}.{key}", aid)
    if parent is None or kind is None:
        fail("a variant needs both derived_from and kind", field, aid)
    if parent not in by_id:
        fail(f"the original {parent!r} is not an answer of question {qid!r}", f"{field}.derived_from", aid)
    if parent == aid:
        fail("an answer cannot be derived from itself", f"{field}.derived_from", aid)
    if kind not in kinds:
        fail(f"unknown perturbation kind {kind!r} (declare it in perturbation_kinds)", f"{field}.kind", aid)


def _validate_derivation(answer: dict, field: str, by_id: dict[str, dict], fail: Callable) -> None:
    """Every variant leads back to an original in a few steps: no cycle, no chain deeper than
    MAX_DERIVATION_DEPTH (the writer and deletion walk it)."""
    steps, parent = 0, answer.get("derived_from")
    while parent is not None:
        steps += 1
        if steps > MAX_DERIVATION_DEPTH:
            fail(f"derived through more than {MAX_DERIVATION_DEPTH} variants, or in a circle", field, answer["id"])
        parent = by_id[parent].get("derived_from")


def _validate_items(items: Any, field: str, qid: str, by_id: dict[str, dict], kinds: dict, fail: Callable) -> None:
    """A question's items (listed, or derived from its answers): each compares two of its answers,
    one item per group, and one of them is the control."""
    if not isinstance(items, list):
        fail("must be a list", field, qid)
    groups: set = set()
    for ii, item in enumerate(items):
        _validate_item(item, f"{field}[{ii}]", qid, by_id, fail)
        _validate_item_group(item.get("kind"), f"{field}[{ii}].kind", qid, kinds, groups, fail)
        groups.add(item.get("kind"))
    if None not in groups:
        fail("every question needs one control item (kind null)", field, qid)


def _validate_item(item: Any, field: str, qid: str, by_id: dict[str, dict], fail: Callable) -> None:
    """An item's fields, its gold label, and its two answers: different answers of the question."""
    if not isinstance(item, dict) or set(item) - {"kind", "a1", "a2", "gold_label"}:
        fail("must be an object with kind, a1, a2 and optionally gold_label", field, qid)
    if item.get("gold_label", "") not in ("", "a1", "a2"):
        fail("must be a1, a2 or empty", f"{field}.gold_label", qid)
    for side in ("a1", "a2"):
        if not isinstance(item.get(side), str) or item[side] not in by_id:
            fail(f"unknown answer {shown(item.get(side))}", f"{field}.{side}", qid)
    if item["a1"] == item["a2"]:
        fail("an item compares two different answers", field, qid)


def _validate_item_group(group: Any, field: str, qid: str, kinds: dict, earlier: set, fail: Callable) -> None:
    """An item's group: null for the control, else a known kind; no group twice in a question."""
    if group is not None and not isinstance(group, str):
        fail(f"must be a kind slug (text) or null, got {shown(group)}", field, qid)
    if group is not None and group not in kinds:
        fail(f"unknown perturbation kind {group!r}", field, qid)
    if group in earlier:
        fail(f"two items of group {group or 'control'!r} for one question", field, qid)


def derive_items(question: dict) -> list[dict]:
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
        return (
            f"contains a lone surrogate (\\u{ord(text[exc.start]):04x}), which is not valid UTF-8 and cannot be stored"
        )
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
                fail(f"must be text, got {shown(value)}", f"{efield}.{key}", aid)
    provenance = answer.get("provenance", {})
    if not isinstance(provenance, dict):
        fail("must be an object", f"{field}.provenance", aid)
    if not isinstance(provenance.get("edits", []), list):
        fail("must be a list", f"{field}.provenance.edits", aid)
    checks = answer.get("checks", {})
    if not isinstance(checks, dict):
        fail(f"must be an object (the results of the perturbation checks), got {shown(checks)}", f"{field}.checks", aid)
    warnings = checks.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        fail("must be a list of text", f"{field}.checks.warnings", aid)
    if not isinstance(checks.get("ok", True), bool):
        fail("must be true or false", f"{field}.checks.ok", aid)
    context = answer.get("context", "")
    if not isinstance(context, str):
        fail(f"must be text, got {shown(context)}", f"{field}.context", aid)
    if context and answer.get("derived_from") is None:
        fail("only a variant (an answer with derived_from) carries a context", f"{field}.context", aid)
    try:
        context_text.check(context)
    except context_text.ContextError as exc:
        fail(str(exc), f"{field}.context", aid)


def shown(value: Any) -> str:
    """A value as an error message quotes it: its repr, cut short."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_required_text(value: Any, field: str, fail: Callable, near: str | None) -> None:
    if not isinstance(value, str) or not value.strip():
        fail("required text", field, near)


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
    return " or ".join(
        {"str": "text", "int": "a whole number", "float": "a number", "bool": "true/false"}[t.__name__] for t in types
    )
