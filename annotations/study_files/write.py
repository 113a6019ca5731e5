"""Writing a study: a validated document into the database in one short transaction
(`study_import`, `study_document_write`), and a study back out as a document (`study_export`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import models, transaction

from annotations.models import Answer, ComparisonItem, PerturbationKind, Question, Slot, Study
from annotations.signals import study_answers_prepared
from annotations.study_files.read import study_file_read
from annotations.study_files.validate import FORMAT_NAME, FORMAT_VERSION, STUDY_FIELDS, derive_items

log = logging.getLogger(__name__)


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
            external_id=record["id"],
            text=record["text"],
            bloom_level=record["bloom"],
            subset=record.get("subset", ""),
            prompt_key=record.get("prompt_key", ""),
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
                context=data.get("context", ""),
            )
        )
        for data in record["answers"]
    }
    return question, answers


def _prepare_gold(record: dict) -> tuple[Question, dict[str, Answer]]:
    question = _rendered(
        Question(external_id=record["id"], text=record["text"], bloom_level=record.get("bloom", ""), is_gold=True)
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
    study.refresh_instructions_html()  # rendered here, outside the transaction
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
        made = [
            ComparisonItem(
                study=study,
                question=question,
                kind=kinds.get(item.get("kind")),
                answer_a1=by_id[item["a1"]],
                answer_a2=by_id[item["a2"]],
                gold_label=item.get("gold_label", ""),
            )
            for item in (listed if listed is not None else derive_items(record))
        ]
        items += _better_answers_inherited(made)
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


def _better_answers_inherited(items: list[ComparisonItem]) -> list[ComparisonItem]:
    """A question's items, each perturbed one without a better answer of its own given the
    question's (its control item's), as ComparisonItem.save() does for one item."""
    control = next((item for item in items if item.kind is None), None)
    for item in items:
        if control is not None and item.kind is not None and not item.gold_label:
            item.gold_label = item.inherited_better_answer(control)
    return items


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
    for item in (
        ComparisonItem.objects.filter(study=study).select_related("kind", "answer_a1", "answer_a2").order_by("id")
    ):
        items_by_question.setdefault(item.question_id, []).append(item)
    for question in study.questions.order_by("id"):
        answers = answers_by_question.get(question.id, [])
        if question.is_gold:
            item = items_by_question[question.id][0]
            gold_items.append(
                {
                    "id": question.external_id,
                    **({"bloom": question.bloom_level} if question.bloom_level else {}),
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
        if question.prompt_key:
            record["prompt_key"] = question.prompt_key
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
    if answer.context:
        record["context"] = answer.context
    if answer.review_status != Answer.Review.APPROVED:
        record["review_status"] = answer.review_status
    return record
