"""Importing votes collected elsewhere into a study: the one path of `manage.py import_votes`,
the admin's "Import votes" page and the API (by way of the task worker). The formats' readers
are `importers.py` and its `import_*.py`; this module checks what they parsed against the study
and writes it.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Collection
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from annotations import lengths
from annotations.models import (
    Answer,
    ComparisonItem,
    Judge,
    PerturbationKind,
    Question,
    Rater,
    Slot,
    Study,
    Vote,
    choice_from_shown,
)
from vote_imports import importers, vote_recognition

log = logging.getLogger(__name__)


def kind_slugs(*, study: Study | None) -> set[str]:
    """Perturbation kinds usable in the study: the built-in ones and its own (none of its own
    for a study not made yet, None)."""
    return set(PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study=study)).values_list("slug", flat=True))


class StudyNotFound(ValueError):
    """No study by that slug, and none may be made (or the slug cannot name one)."""


def study_for_votes(*, slug: str, create: bool = False, title: str | None = None) -> Study:
    """The study votes are imported into; with ``create``, a new draft study when there is none
    by that slug. Call it inside the import's transaction: a failed import then leaves no empty
    study behind."""
    try:
        return Study.objects.get(slug=slug)
    except Study.DoesNotExist:
        if not create:
            raise _no_study(slug) from None
    study = _new_study(slug=slug, title=title)
    study.save()
    return study


def _new_study(*, slug: str, title: str | None) -> Study:
    """The draft study ``create`` makes, checked but not saved."""
    study = Study(slug=slug, title=title or slug)
    try:
        study.full_clean()
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
        raise StudyNotFound(f"cannot create study {slug!r}: {problems}") from None
    return study


def study_for_votes_check(*, slug: str, create: bool = False) -> None:
    """Raise StudyNotFound now, before an upload waits for the task worker, when the import
    could not find its study. (A study made by ``create`` is checked when it is made.)"""
    if not create and not Study.objects.filter(slug=slug).exists():
        raise _no_study(slug)


def _no_study(slug: str) -> StudyNotFound:
    return StudyNotFound(f"no study with slug {slug!r} (add --create to make it; create=true in the API)")


# What an import may make, by its count's name, and the permission making it needs: an import
# that adds questions, answers and items changes what raters are shown, not only the votes.
CREATES = {
    "questions": "annotations.add_question",
    "answers": "annotations.add_answer",
    "items": "annotations.add_comparisonitem",
    "judges": "annotations.add_judge",
    "raters": "annotations.add_rater",
}


def votes_import_permissions(user) -> frozenset[str]:
    """Which of the permissions an import's new rows need (CREATES) `user` holds now: what the
    admin page and the API record with an upload when it is made, for the task worker's import
    to be checked against the requester's permissions at the time of the request."""
    return frozenset(perm for perm in CREATES.values() if user.has_perm(perm))


def votes_import_check(
    plan: VotesPlan, *, study: Study, granted: Collection[str] | None, add_to_collecting: bool
) -> None:
    """Raise ImportProblem when the import may not write what it prepared: rows whose
    permission (CREATES) is not in `granted` (None: an operator's command line, which may make
    anything), or new items in a study collecting votes from people without `add_to_collecting`.
    Called inside the import's transaction, on the study as the transaction found it: the one
    check of the command, the admin page and the API."""
    made = {name: plan.counts[name] for name in CREATES if plan.counts[name]}
    if granted is not None:
        missing = sorted({CREATES[name] for name in made} - set(granted))
        if missing:
            raise importers.ImportProblem(
                plan.source,
                None,
                "permissions",
                f"this import would add {_listed_counts(made)} to study {study.slug!r}; that needs the "
                f"permission(s) {', '.join(missing)}, which the user who sent the file does not have "
                "(ask for them, or import the study file first so that only votes are added)",
            )
    if plan.items and study.status == Study.Status.COLLECTING and not add_to_collecting:
        questions = sorted({item.question.external_id for item in plan.items})
        shown = ", ".join(repr(q) for q in questions[:5]) + (
            f" and {len(questions) - 5} more" if len(questions) > 5 else ""
        )
        raise importers.ImportProblem(
            plan.source,
            None,
            "study",
            f"study {study.slug!r} is collecting votes from people and this import would add "
            f"{plan.counts['items']} item(s) to it (questions {shown}); to add them all the same, say so "
            "(admin: 'Add items to a collecting study'; API: add_to_collecting=true; command: --add-to-collecting)",
        )


def _listed_counts(counts: dict[str, int]) -> str:
    parts = [f"{n} {name if n != 1 else name.removesuffix('s')}" for name, n in counts.items()]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


# What an import does, in order: `progress` is called with each step's index as it begins.
VOTES_IMPORT_STEPS = ("reading the votes", "preparing questions, answers, items and votes", "writing every row")


def votes_import_path(
    *,
    slug: str,
    fmt: str,
    path: Path | list[Path],
    create: bool = False,
    title: str | None = None,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    granted: Collection[str] | None = None,
    add_to_collecting: bool = False,
    for_raters: bool = False,
) -> tuple[Study, dict]:
    """Import the vote file (or data-set folder) at ``path`` in format ``fmt`` (importers.FORMATS;
    a list of paths for a format that reads several files, ``alpaca_eval``)
    into the study ``slug``, made first with ``create``: what ``import_votes`` and the task
    worker (for the admin page and the API) call. Reading, checking and preparing every row
    happen first, outside any transaction; then one short transaction makes the study (with
    ``create``) and writes the rows. When it raises (ImportProblem, StudyNotFound) nothing is
    written, not even the study it would have made. ``progress(step)`` is told each of
    VOTES_IMPORT_STEPS as it begins. Returns the study and the import's result: how many rows
    of each kind it added and, under IGNORED_COLUMNS when the file had any, the columns it did
    not import, each with why (every path shows them: the command, the admin's page, the API).

    ``granted`` is the permissions (votes_import_permissions) of the user who asked for the
    import, taken when they asked: new questions, answers, items, judges or raters need theirs
    (CREATES), and an import needing one they lack writes nothing. None, the command line's,
    skips that check: the command is run by an operator of the server, who can do anything.
    New items go into a study collecting votes from people only with ``add_to_collecting``,
    and raters are handed them (slots) only with ``for_raters`` (votes_import_check)."""
    progress = progress or (lambda step: None)
    study_for_votes_check(slug=slug, create=create)
    found = Study.objects.filter(slug=slug).first()
    study = found or _new_study(slug=slug, title=title)
    progress(0)
    parsed = importers.parse(fmt, path, known_groups=kind_slugs(study=found), limit=limit)
    progress(1)
    plan = votes_prepare(study=study, parsed=parsed, for_raters=for_raters)
    # Refused before the transaction opens when it can be; checked again inside it.
    votes_import_check(plan, study=plan.study, granted=granted, add_to_collecting=add_to_collecting)
    progress(2)
    with _unless_changed(plan), transaction.atomic():
        if plan.study.pk is None and Study.objects.filter(slug=slug).exists():
            raise _changed(plan, f"study {slug!r} was made by someone else meanwhile")
        study = study_for_votes(slug=slug, create=create, title=title)
        if plan.study.pk not in (None, study.pk):
            raise _changed(plan, f"study {slug!r} was deleted and made anew meanwhile")
        votes_import_check(plan, study=study, granted=granted, add_to_collecting=add_to_collecting)
        votes_write(plan, study=study)
    ignored = {IGNORED_COLUMNS: parsed.ignored_columns} if parsed.ignored_columns else {}
    warned = {WARNINGS: [_where(w) for w in parsed.warnings]} if parsed.warnings else {}
    return study, {**plan.counts, **ignored, **warned}


# The key of an import's result that lists the columns it did not import (column → why).
IGNORED_COLUMNS = "ignored_columns"
# The key of an import's result that lists its warnings (importers.Parsed.warnings), each as
# {"path", "line", "field", "message"}, as the API and the admin show a failed import's problems.
WARNINGS = "warnings"


def _where(problem: importers.ImportProblem) -> dict:
    return {"path": problem.path, "line": problem.line, "field": problem.field, "message": problem.message}


def votes_import_summary(result: dict) -> str:
    """An import's result in words, as the command says it (the admin's page shows the same
    parts: votes_import_counts, the columns not imported and the warnings)."""
    counts = ", ".join(f"{n} {name}" + (f" ({note})" if note else "") for name, n, note in votes_import_counts(result))
    ignored = result.get(IGNORED_COLUMNS) or {}
    if ignored:
        counts += "; columns not imported: " + "; ".join(f"{column} ({why})" for column, why in ignored.items())
    warnings = [
        str(importers.ImportProblem(w["path"], w["line"], w["field"], w["message"])) for w in result.get(WARNINGS) or ()
    ]
    return counts + ("; warnings: " + "; ".join(warnings) if warnings else "")


# What the admin page and the API take as an upload (vote_imports/uploads.py): a `csv` file, or a
# folder format (MT-bench, PRD, LLMBar) as a zip of its folder. The zip's data sits at its top or
# in its single folder, whichever holds the file or folder named here (every copy of the data set
# has it).
ZIPPED_FOLDERS = {"mtbench": "question.jsonl", "prd": "vicuna80", "llmbar": "evaluator_votes.csv.gz"}
UPLOAD_FORMATS = ("csv", *ZIPPED_FOLDERS)
# Sized for the real folders zipped, with room: PRD is 234 files, 20 MB unpacked, four levels deep
# counting its own folder (prd/vicuna80/ratings-gpt4/….jsonl); LLMBar 2 MB. The bytes are the
# upload's limit (API_IMPORT_MAX_MB), and only the files the formats read are unpacked.
ZIP_MEMBERS, ZIP_DEPTH = 1000, 4
ZIP_SUFFIXES = (".csv", ".csv.gz", ".json", ".jsonl")


@dataclass
class VotesPlan:
    """What `votes_prepare` builds before an import's transaction, for `votes_write` to write in
    it: every new row as an unsaved object linked to its parents (saved or not), the votes'
    rows already converted for the database, and the counts the import reports."""

    source: str
    study: Study  # as found when prepared; unsaved when the import's transaction is to make it
    judge_names: list[str]
    questions: list
    answers: list[list]  # originals, then variants: each level after the answers it derives from
    items: list[ComparisonItem]
    slots: list[Slot]
    judges: list[Judge]
    raters: list[Rater]
    raters_added: dict[int, list[int]]  # votes added → ids of the study's raters who get that many
    votes: list[Vote]
    counts: dict[str, int]
    recognition: vote_recognition.Recognition  # the votes the study had, left out


# What an import's count means where its name does not say it (the command and the admin's
# progress page show it beside the number).
VOTES_IMPORT_NOTES = {
    "votes_recognised": (
        "already in the study (the same judge and rater, question and answers, with the same verdict): "
        "recognised, not added again"
    ),
    "repeats_unlinked": (
        "a person's second vote on the same item in the file: kept and counted, but without their "
        "rater id, because a rater votes once per item"
    ),
}


def votes_import_counts(result: dict) -> list[tuple[str, int, str]]:
    """An import's counts as (what, how many, note) for people to read."""
    return [
        (name.replace("_", " "), n, VOTES_IMPORT_NOTES.get(name, "") if n else "")
        for name, n in result.items()
        if name not in (IGNORED_COLUMNS, WARNINGS)
    ]


def votes_prepare(*, study: Study, parsed: importers.Parsed, for_raters: bool = False) -> VotesPlan:
    """Check parsed votes against what the study holds and build every row they add, writing
    nothing: questions, original (and variant) answers with their lengths, items and their
    slots, one imported judge per judge name, raters, votes. Questions, answers and items
    already in the study are reused when they match (so human and model votes on the same pairs
    can come from separate files); a mismatch raises ImportProblem. Votes of a judge the study
    has votes of are added where new and recognised where the study has them
    (vote_recognition: ``votes_recognised`` counts them), so a benchmark's new systems can be
    added to a study and a file imported twice adds nothing. ``study`` may be unsaved (the study
    ``create`` will make): then it has nothing yet. New items are handed to raters (get slots)
    only with ``for_raters``; else they are for the imported and LLM judges alone.

    Each kind of row is prepared by its own function, in the order their matches depend on each
    other: an answer names its question, an item its answers, a vote its item, judge and rater."""
    source = parsed.source
    judge_names = sorted({v.judge for v in parsed.votes})
    # Votes of a judge the study has: those it has are recognised and left out, the rest added.
    recognition = vote_recognition.votes_recognised(study=study, parsed=parsed)
    parsed = recognition.parsed
    kinds = {k.slug: k for k in PerturbationKind.objects.all()}
    questions, new_questions = _questions_prepare(study, parsed)
    answers, new_answers = _answers_prepare(parsed, questions, kinds)
    items, new_items = _items_prepare(study, parsed, questions, answers, kinds, for_raters=for_raters)
    judges, new_judges = _judges_prepare(study, parsed, judge_names)
    raters, new_raters, earlier = _raters_prepare(study, parsed)
    rows, repeats_unlinked = _vote_rows(parsed, items=items, judges=judges, raters=raters, earlier=earlier)
    linked = Counter(row["rater"].participant_id for row in rows if row["rater"] is not None)
    for rater in new_raters:
        rater.votes_done = linked[rater.participant_id]
    raters_added: dict[int, list[int]] = {}
    for pid, rater in raters.items():
        if rater.pk is not None and linked[pid]:
            raters_added.setdefault(linked[pid], []).append(rater.pk)
    return VotesPlan(
        source=source,
        study=study,
        judge_names=judge_names,
        questions=new_questions,
        answers=new_answers,
        items=new_items,
        slots=Slot.objects.planned(study, new_items),  # the slots ComparisonItem.save() would make
        judges=new_judges,
        raters=new_raters,
        raters_added=raters_added,
        # Written by bulk_create: Vote.save() does nothing for a vote whose choice is set.
        votes=[Vote(**row) for row in rows],
        counts={
            "questions": len(new_questions),
            "answers": sum(len(level) for level in new_answers),
            "items": len(new_items),
            "judges": len(new_judges),
            "raters": len(new_raters),
            "votes": len(rows),
            "repeats_unlinked": repeats_unlinked,
            "votes_recognised": recognition.recognised,
        },
        recognition=recognition,
    )


def _of_study(study: Study, model, **lookups):
    """The study's rows of ``model``: none for a study not made yet."""
    return model.objects.filter(study=study, **lookups) if study.pk is not None else model.objects.none()


def _questions_prepare(study: Study, parsed: importers.Parsed) -> tuple[dict[str, Question], list[Question]]:
    """Every question of the file by its external id, the study's own or made here (unsaved),
    and the ones made here."""
    source = parsed.source
    questions = {q.external_id: q for q in _of_study(study, Question, external_id__in=list(parsed.questions))}
    new_questions = []
    for ext, rec in parsed.questions.items():
        known = questions.get(ext)
        if known is None:
            if rec.text is None:
                raise importers.ImportProblem(
                    source,
                    None,
                    "question",
                    f"question {ext!r} is not in the study, and the file has no question column to make it from "
                    "(import the study file first)",
                )
            questions[ext] = Question(
                study=study,
                external_id=ext,
                text=rec.text,
                bloom_level=rec.bloom,
                subset=rec.subset,
                is_gold=rec.is_gold,
                prompt_key=rec.prompt_key or "",
            )
            new_questions.append(questions[ext])
        elif rec.text is not None and known.text != rec.text:
            raise importers.ImportProblem(
                source, None, "question", f"question {ext!r} is already in the study with another text"
            )
        elif rec.prompt_key is not None and known.prompt_key != rec.prompt_key:
            had = known.prompt_key
            raise importers.ImportProblem(
                source,
                None,
                "prompt_key",
                f"question {ext!r} is already in the study with "
                + (f"prompt key {had!r}" if had else "no prompt key")
                + f", not {rec.prompt_key!r}",
            )
    return questions, new_questions


def _answers_prepare(
    parsed: importers.Parsed, questions: dict[str, Question], kinds: dict[str, PerturbationKind]
) -> tuple[dict[tuple[str, str], Answer], list[list[Answer]]]:
    """Every answer of the file by (question, answer) external ids, the study's own or made here,
    and the ones made here in two levels: the originals, then the variants derived from them
    (each level is written after the one it derives from)."""
    external_ids = {q.pk: ext for ext, q in questions.items() if q.pk is not None}
    # Keyed by external ids (question, answer): new rows have no id before they are written.
    answers = {
        (external_ids[a.question_id], a.external_id): a for a in Answer.objects.filter(question__in=list(external_ids))
    }
    new_answers: list[list[Answer]] = []
    measured: dict[str, Answer] = {}  # a text seen before (PRD repeats each system's answer) is measured once
    for originals_pass in (True, False):
        batch = []
        for ext, rec in parsed.questions.items():
            for a in rec.answers.values():
                if (a.derived_from is None) != originals_pass:
                    continue
                known = answers.get((ext, a.external_id))
                if known is not None:
                    _check_known_answer(known, a, parsed.source)
                    continue
                answer = _new_answer(questions[ext], a, parsed.source, measured)
                if a.derived_from:
                    answer.derived_from = answers[(ext, a.derived_from)]
                    answer.kind = kinds[_group_of(rec, a.external_id)]
                batch.append(answer)
        new_answers.append(batch)
        answers.update({(answer.question.external_id, answer.external_id): answer for answer in batch})
    return answers, new_answers


def _check_known_answer(known: Answer, a: importers.AnswerRecord, source: str) -> None:
    _check_lengths(known, a.lengths, source)
    if a.text is not None and known.text != a.text:
        raise importers.ImportProblem(
            source, None, "answer", f"answer {a.external_id!r} is already in the study with another text"
        )


def _new_answer(question: Question, a: importers.AnswerRecord, source: str, measured: dict[str, Answer]) -> Answer:
    """An answer the study does not have, unsaved, with its lengths: given by the file, measured
    from its text, or copied from an answer of the same text measured before."""
    if a.text is None and a.lengths is None:
        raise importers.ImportProblem(
            source,
            None,
            "answer",
            f"answer {a.external_id!r} is not in the study, and the file gives neither its text nor its lengths",
        )
    answer = Answer(
        question=question,
        external_id=a.external_id,
        text=a.text or "",
        system=a.system,
        provenance={"method": "import", "source": source},
    )
    # bulk_create skips save(), which caches the lengths.
    if a.lengths is not None:  # no text, its lengths given instead
        answer.len_words, answer.len_chars = a.lengths.get("words", 0), a.lengths.get("chars", 0)
        answer.len_bpe, answer.len_spaces = a.lengths.get("bpe"), a.lengths.get("spaces")
    elif (same := measured.setdefault(a.text, answer)) is answer:
        answer.refresh_lengths()
    else:
        for m in lengths.MEASURES:
            setattr(answer, f"len_{m}", getattr(same, f"len_{m}"))
    return answer


def _items_prepare(
    study: Study,
    parsed: importers.Parsed,
    questions: dict[str, Question],
    answers: dict[tuple[str, str], Answer],
    kinds: dict[str, PerturbationKind],
    *,
    for_raters: bool,
) -> tuple[dict[tuple[str, str], ComparisonItem], list[ComparisonItem]]:
    """Every item of the file by (question external id, group), the study's own or made here,
    and the ones made here."""
    external_ids = {q.pk: ext for ext, q in questions.items() if q.pk is not None}
    items = {
        (external_ids[i.question_id], i.kind.slug if i.kind_id else "control"): i
        for i in _of_study(study, ComparisonItem, question__in=list(external_ids)).select_related("kind")
    }
    new_items = []
    for ext, rec in parsed.questions.items():
        for group, (a1, a2) in rec.items.items():
            known = items.get((ext, group))
            a1_obj, a2_obj = answers[(ext, a1)], answers[(ext, a2)]
            if known is not None:
                if (known.answer_a1_id, known.answer_a2_id) != (a1_obj.pk, a2_obj.pk):
                    raise importers.ImportProblem(
                        parsed.source, None, "group", f"question {ext!r} already has a {group} item with other answers"
                    )
                continue
            items[(ext, group)] = ComparisonItem(
                study=study,
                question=questions[ext],
                kind=None if group == "control" else kinds[group],
                answer_a1=a1_obj,
                answer_a2=a2_obj,
                gold_label=rec.gold.get(group, ""),
                offered_to_raters=for_raters,
            )
            new_items.append(items[(ext, group)])
    return items, new_items


def _judges_prepare(
    study: Study, parsed: importers.Parsed, judge_names: list[str]
) -> tuple[dict[str, Judge], list[Judge]]:
    """One imported judge per judge name, the study's own or made here, and the ones made here."""
    judges = {j.name: j for j in _of_study(study, Judge, name__in=judge_names)}
    new_judges = [
        Judge(
            study=study,
            name=name,
            kind=Judge.Kind.IMPORTED,
            params={
                "source": parsed.source,
                **parsed.judge_params.get(name, {}),
                **({"people": True} if name in parsed.people else {}),
            },
        )
        for name in judge_names
        if name not in judges
    ]
    judges.update({judge.name: judge for judge in new_judges})
    return judges, new_judges


def _raters_prepare(
    study: Study, parsed: importers.Parsed
) -> tuple[dict[str, Rater], list[Rater], set[tuple[int, int]]]:
    """Every rater of the file by participant id, the study's own or made here, the ones made
    here, and the (rater, item) ids the study's own raters have voted on already."""
    rater_votes = Counter(v.rater for v in parsed.votes if v.rater)
    flagged = {v.rater for v in parsed.votes if v.rater_flagged}
    raters = {r.participant_id: r for r in _of_study(study, Rater, participant_id__in=list(rater_votes))}
    new_raters = [
        Rater(
            study=study,
            participant_id=pid,
            target=n,
            source=Rater.Source.DIRECT,
            flagged=pid in flagged,
            flag_reason="flagged in the imported file" if pid in flagged else "",
        )
        for pid, n in rater_votes.items()
        if pid not in raters
    ]
    # A rater id met again in a later file is the same rater: one vote per item still holds.
    earlier = set(
        Vote.objects.filter(rater__in=list(raters.values()), item__study=study).values_list("rater_id", "item_id")
        if raters
        else ()
    )
    raters.update({rater.participant_id: rater for rater in new_raters})
    return raters, new_raters, earlier


def _vote_rows(
    parsed: importers.Parsed,
    *,
    items: dict[tuple[str, str], ComparisonItem],
    judges: dict[str, Judge],
    raters: dict[str, Rater],
    earlier: set[tuple[int, int]],
) -> tuple[list[dict], int]:
    """Each vote's fields, and how many were a person's second vote on an item (kept without
    their rater id: a rater votes once per item)."""
    seen: set[tuple[str, str, str]] = set()
    rows = []
    repeats_unlinked = 0
    now = timezone.now()
    for v in parsed.votes:
        item = items[(v.question, v.group)]
        rater = raters[v.rater] if v.rater else None
        if rater is not None and (rater.pk, item.pk) in earlier:
            raise importers.ImportProblem(
                v.meta.get("source", parsed.source),
                v.meta.get("line"),
                "rater",
                f"rater {v.rater!r} already voted on this item (question {v.question!r}, {v.group}) in the "
                "study, from another file or the rater pages; one vote per rater and item",
            )
        meta = dict(v.meta)
        if v.shown_first is None:
            meta["order_known"] = False
        if rater is not None:
            if (v.rater, v.question, v.group) in seen:
                meta.update(rater=v.rater, repeat_of_same_rater=True)
                repeats_unlinked += 1
                rater = None
            else:
                seen.add((v.rater, v.question, v.group))
        rows.append(_vote_row(v, item=item, judge=judges[v.judge], rater=rater, meta=meta, now=now))
    return rows, repeats_unlinked


def _vote_row(v: importers.VoteRecord, *, item, judge: Judge, rater: Rater | None, meta: dict, now) -> dict:
    """One vote's fields: its choice as shown and as A1/A2, none where the source could not read
    a verdict (kept, with no choice); the order shown is A1 first where the file does not say."""
    shown_first = v.shown_first or "a1"
    choice_shown = "tie" if v.winner == "tie" else ("first" if v.winner == shown_first else "second")
    if v.winner is None:
        choice_shown = None
    return {
        "item": item,  # perhaps unsaved: bulk_create reads its id when the vote is written
        "judge": judge,
        "rater": rater,
        "round": v.round,
        "label_scheme": v.label_scheme,
        "labels_swapped": v.labels_swapped,
        "option_probs": v.option_probs,
        "shown_first": shown_first,
        "choice_shown": choice_shown,
        "choice": choice_from_shown(shown_first, choice_shown) if choice_shown else None,
        "parse_status": v.parse_status or (Vote.Parse.OK if choice_shown else Vote.Parse.INVALID),
        "not_familiar": v.not_familiar,
        "client_ms": v.response_ms,
        "server_ms": v.server_ms,
        "raw_output": v.raw_output,
        "error": v.error,
        "meta": meta,
        "received_at": v.received_at or now,
    }


def votes_write(plan: VotesPlan, *, study: Study) -> None:
    """Write a prepared import into ``study`` (saved; the one it was prepared for). Run it
    inside the import's transaction: little but INSERTs, so SQLite's write lock, taken when
    the transaction opens, is held briefly (bench/bench_import_lock.py --votes). What may have
    changed since the preparation is checked again: another import's votes of the same judges
    here (vote_recognition), a unique constraint (the same question, item, judge or rater, or a rater's vote on an
    item) by the database itself; either raises and the transaction writes nothing."""
    started, cpu = time.perf_counter(), time.thread_time()
    vote_recognition.votes_recognised_check(study=study, recognition=plan.recognition, source=plan.source)
    for obj in [*plan.questions, *plan.items, *plan.slots, *plan.judges, *plan.raters]:
        obj.study = study  # the study the transaction found or made
    Question.objects.bulk_create(plan.questions, batch_size=1000)
    for level in plan.answers:
        Answer.objects.bulk_create(level, batch_size=1000)
    ComparisonItem.objects.bulk_create(plan.items, batch_size=1000)
    Slot.objects.bulk_create(plan.slots, batch_size=1000)  # bulk_create skips save(), which makes them
    Judge.objects.bulk_create(plan.judges)
    Rater.objects.bulk_create(plan.raters, batch_size=1000)
    Vote.objects.bulk_create(plan.votes, batch_size=1000)
    for added, ids in plan.raters_added.items():
        Rater.objects.filter(pk__in=ids).update(votes_done=F("votes_done") + added)
    Study.objects.filter(pk=study.pk).data_changed()  # bulk_create and update() send no signal
    # How long raters' votes could not be written (SQLite) or the transaction stayed open.
    log.info(
        "votes for study %s: %d rows written in one transaction in %.2f s (%.2f s CPU)",
        study.slug,
        sum(len(rows) for rows in (plan.questions, *plan.answers, plan.items, plan.slots, plan.judges, plan.raters))
        + plan.counts["votes"],
        time.perf_counter() - started,
        time.thread_time() - cpu,
    )


def _check_lengths(known, given: dict[str, int] | None, source: str) -> None:
    """An answer the study has, named with lengths (the votes export's): they must be its own."""
    for measure, length in (given or {}).items():
        if getattr(known, f"len_{measure}") != length:
            raise importers.ImportProblem(
                source,
                None,
                f"len_{measure}",
                f"answer {known.external_id!r} is in the study with {measure} length "
                f"{getattr(known, f'len_{measure}')}, not {length}",
            )


@contextmanager
def _unless_changed(plan: VotesPlan):
    """Turn a unique constraint broken by a concurrent writer into the import's own problem."""
    try:
        yield
    except IntegrityError as exc:
        raise _changed(
            plan, f"another import or rater wrote the same rows meanwhile ({' '.join(str(exc).split())})"
        ) from None


def _changed(plan: VotesPlan, what: str) -> importers.ImportProblem:
    return importers.ImportProblem(
        plan.source, None, "study", f"{what} while the file was being prepared; nothing was written: import it again"
    )


def _group_of(rec: importers.QuestionRecord, answer_external_id: str) -> str:
    for group, (_, a2) in rec.items.items():
        if a2 == answer_external_id:
            return group
    raise importers.ImportProblem("", None, "group", f"answer {answer_external_id!r} is in no item")
