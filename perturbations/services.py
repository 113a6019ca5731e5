"""Workflows around perturbations: built-in kinds, generating variants, checking, editing and
reviewing them. Admin, the `perturb` command and the API call these functions.

A variant is created in review status "pending" and never becomes a comparison item by itself:
approving it does that. Rejecting or editing never loses a vote: both are refused when the
variant's item has votes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Count, Q
from django.utils import timezone

from annotations.models import Answer, ComparisonItem, PerturbationKind, Question, Study
from biasstudy import rendering
from judges.models import LLMJudge
from perturbations import checks, modelgen, rules
from perturbations.kinds import BUILTIN_KINDS
from perturbations.models import AnswerRevision, GenerationReport

METHODS = ("rule", "model")
DECISIONS = ("approve", "reject")


class PerturbationError(ValueError):
    """A perturbation operation that cannot be done; the message says what and where."""


def kinds_ensure_builtin(*, using: str = "default") -> None:
    for spec in BUILTIN_KINDS:
        PerturbationKind.objects.using(using).update_or_create(
            slug=spec.slug,
            defaults={
                "name": spec.name,
                "semantics": spec.semantics,
                "description": spec.description,
                "steps": list(spec.steps),
                "builtin": True,
                "study": None,
            },
        )


def kind_for_study(*, study: Study, slug: str) -> PerturbationKind:
    """A built-in kind or one of the study's own, by slug."""
    kind = PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study=study), slug=slug).first()
    if kind is None:
        known = ", ".join(
            PerturbationKind.objects.filter(Q(study__isnull=True) | Q(study=study)).values_list("slug", flat=True)
        )
        raise PerturbationError(f"unknown perturbation kind {slug!r} for study {study.slug} (known: {known})")
    return kind


def _root(answer: Answer) -> Answer:
    # By the object, not derived_from_id: a study file's variants are checked before they and
    # their originals are saved (variants_checks_fill).
    while answer.derived_from is not None:
        answer = answer.derived_from
    return answer


def question_originals(question: Question, *, of: str = "a2") -> tuple[Answer, Answer]:
    """(the original to perturb, the other original). `of` is "a1" or "a2": the answer whose
    external id ends in -a1/-a2, else the first/second original by id.
    """
    if of not in ("a1", "a2"):
        raise PerturbationError(f"'of' must be a1 or a2, not {of!r}")
    found = list(question.answers.originals().order_by("id"))
    if len(found) != 2:
        raise PerturbationError(f"question {question.external_id} has {len(found)} original answers, not 2")
    by_suffix = {a.external_id.lower().rsplit("-", 1)[-1]: a for a in found}
    by_order = found[0] if of == "a1" else found[1]
    base = by_suffix[of] if {"a1", "a2"} <= set(by_suffix) else by_order
    other = found[1] if base is found[0] else found[0]
    return base, other


def _steps(kind: PerturbationKind) -> list[str]:
    return list(kind.steps) or [kind.slug]


def variant_checks(*, answer: Answer, lengths_measured: bool = False) -> dict:
    """Run the checks of one variant against the original it was made from. `lengths_measured`:
    both answers' len_* fields are those of their texts as they are (a study file's answers,
    measured as they were prepared), so the length check need not measure them again."""
    original = _root(answer)
    question = answer.question
    return checks.run_checks(
        original=original.text,
        variant=answer.text,
        semantics=answer.kind.semantics,
        slug="factual_error" if kind_wants_errors(answer.kind) else answer.kind.slug,
        max_ratio=question.study.max_length_ratio,
        question=question.text,
        errors=answer.inserted_errors,
        measured=(_measured(original), _measured(answer)) if lengths_measured else None,
    )


def _measured(answer: Answer) -> dict:
    return {"words": answer.len_words, "chars": answer.len_chars, "bpe": answer.len_bpe}


# Kinds that need the model to list the errors it planted (see modelgen), and which the local
# SmolLM2 model cannot write: in our trials it failed every question.
ERROR_WRITING_KINDS = {"factual_error"}


def kind_wants_errors(kind: PerturbationKind) -> bool:
    return bool(ERROR_WRITING_KINDS & set(_steps(kind)))


def generator_can_write_errors(generator: LLMJudge) -> bool:
    """The embedded local model (SmolLM2) cannot plant factual errors and list them; any model
    behind an API can be asked (whether it does well is for the review to see)."""
    return generator.backend != LLMJudge.Backend.LOCAL


def grammar_refusal(generator: LLMJudge | None) -> str | None:
    """Why `generator` cannot have its reply's format constrained by a grammar, or None when it can:
    only the OpenAI-compatible backend sends one (llama.cpp's server applies it). The form, the API
    and perturbation_generate all ask here. None stands for the default, the local demo judge."""
    if generator is not None and generator.backend == LLMJudge.Backend.OPENAI_COMPATIBLE:
        return None
    name = generator or "the default local generator"
    return f"{name}: {modelgen.GRAMMAR_BACKEND_ONLY}; choose a configuration on that backend"


def questions_with_voted_items(*, study: Study, kind: PerturbationKind) -> dict[str, int]:
    """{question external id: votes} for the questions whose item of this kind already has votes.
    A new variant of that kind could never be approved there: approving it would change the
    answer those votes were cast on (answer_review refuses)."""
    return dict(
        ComparisonItem.objects.filter(study=study, kind=kind)
        .annotate(n_votes=Count("votes"))
        .filter(n_votes__gt=0)
        .values_list("question__external_id", "n_votes")
    )


def study_vote_summary(*, study: Study) -> dict:
    """Votes already in the study, and per kind how many questions have a voted item of it: what
    the generate form tells the researcher before anything is generated."""
    items = ComparisonItem.objects.filter(study=study).annotate(n_votes=Count("votes")).filter(n_votes__gt=0)
    per_kind: dict[str, dict] = {}
    total = 0
    for slug, n_votes in items.values_list("kind__slug", "n_votes"):
        total += n_votes
        if slug is not None:
            entry = per_kind.setdefault(slug, {"questions": 0, "votes": 0})
            entry["questions"] += 1
            entry["votes"] += n_votes
    return {
        "votes": total,
        "questions": study.questions.filter(is_gold=False).count(),
        "kinds": dict(sorted(per_kind.items())),
    }


def kind_new_group(*, study: Study, kind: PerturbationKind) -> PerturbationKind:
    """A study's own copy of `kind` under a new slug: its variants become new items, a separate
    group that starts from zero votes, beside the voted items of `kind`. Same semantics (so the
    same ASR formula), same steps and prompt; made once and reused."""
    base = f"{kind.slug}-{study.slug}"[:60]
    existing = PerturbationKind.objects.filter(study=study, slug__startswith=base, steps=_steps(kind)).first()
    if existing is not None:
        return existing
    slug, n = base, 2
    while PerturbationKind.objects.filter(slug=slug).exists():
        slug, n = f"{base}-{n}", n + 1
    return PerturbationKind.objects.create(
        slug=slug,
        name=f"{kind.name} (new set for {study.slug})"[:100],
        semantics=kind.semantics,
        description=f"New items of {kind.slug}, made after {kind.slug}'s items had votes. {kind.description}".strip(),
        steps=_steps(kind),
        study=study,
    )


def _generator_name(complete: modelgen.Complete | None) -> str:
    described = modelgen.describe(complete) if complete is not None else {}
    name = " · ".join(str(described[key]) for key in ("judge", "backend", "model") if described.get(key))
    return name[:300]


@dataclass
class GenerateResult:
    created: list[Answer] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # external ids that already exist
    failed: list[tuple[str, str]] = field(default_factory=list)  # (question external id, why)
    blocked: list[tuple[str, str]] = field(default_factory=list)  # (question external id, why not tried)
    raw_outputs: dict[str, str] = field(default_factory=dict)  # question external id -> model's text
    dry_run: bool = False
    report: GenerationReport | None = None

    @property
    def flagged(self) -> list[Answer]:
        return [a for a in self.created if not a.checks.get("ok", True)]


def _rewrite_by_model(
    complete: modelgen.Complete,
    *,
    study: Study,
    question: Question,
    text: str,
    steps: list[str],
    seed: int,
    constrain_format: bool,
) -> tuple[str, list[dict], list[dict]]:
    errors: list[dict] = []
    provenance = []
    model = modelgen.describe(complete)
    for step in steps:
        step_kind = kind_for_study(study=study, slug=step)
        rewrite, prompt = modelgen.rewrite_with_model(
            complete,
            slug=step,
            question=question.text,
            answer=text,
            custom_prompt=step_kind.model_prompt,
            description=step_kind.description,
            constrain_format=constrain_format,
        )
        provenance.append(
            {
                "kind": step,
                "method": "model",
                "model": model,
                "seed": seed,
                "prompt": prompt,
                "raw_output": rewrite.raw,
            }
        )
        text = rewrite.text
        errors += rewrite.errors
    return text, errors, provenance


def perturbation_generate(
    *,
    study: Study,
    kind: PerturbationKind | str,
    seed: int,
    method: str = "rule",
    of: str = "a2",
    questions: Iterable[Question] | None = None,
    complete: modelgen.Complete | None = None,
    generator: LLMJudge | None = None,
    constrain_format: bool = False,
    user=None,
    dry_run: bool = False,
    report: GenerationReport | None = None,
) -> GenerateResult:
    """Create one pending variant of kind `kind` for each (non-gold) question of the study, derived
    from the original `of` (A2 by default), with its checks. Existing variants of the same kind,
    method and seed are skipped. Each variant is written on its own: a question whose generation fails
    is reported in `failed` and gets nothing. Never creates comparison items.

    With method "model", the model is that of the LLM judge configuration `generator` (default: the
    embedded local judge), asked through the judges' backends; `complete` replaces it (tests).
    A generator whose backend cannot be set up (missing key variable or model file) raises
    PerturbationError before anything is written. `constrain_format` sends the grammar of the reply
    format (modelgen.reply_grammar) with every request, so that a small model on llama.cpp's server
    can only answer in blocks we parse; only a generator on the OpenAI-compatible backend takes it.
    The GenerationReport (``report``, made when the generation was queued, or made here) counts
    the questions done as it goes, so the review page can show a model's progress.
    """
    if method not in METHODS:
        raise PerturbationError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if isinstance(kind, str):
        kind = kind_for_study(study=study, slug=kind)
    elif kind.study_id not in (None, study.pk):
        raise PerturbationError(f"kind {kind.slug} belongs to another study")
    steps = _steps(kind)
    if method == "rule" and not all(rules.has_rule(step) for step in steps):
        raise PerturbationError(f"kind {kind.slug} has no rule generator; use method 'model'")
    if constrain_format and method != "model":
        raise PerturbationError("only a model's reply is constrained by a grammar; use method 'model'")
    if method == "model" and complete is None:
        if constrain_format and (refusal := grammar_refusal(generator)):
            raise PerturbationError(refusal)
        if generator is None:
            from judges.services import llm_judge_demo_create

            generator = llm_judge_demo_create()
        complete = modelgen.JudgeModel(generator, seed=seed)
    if isinstance(complete, modelgen.JudgeModel):
        try:
            complete.backend()
        except modelgen.GeneratorError as exc:
            raise PerturbationError(str(exc)) from exc

    result = GenerateResult(dry_run=dry_run)
    if questions is None:
        questions = study.questions.filter(is_gold=False).order_by("external_id")
    questions = list(questions)
    if not dry_run:
        report = report or GenerationReport(study=study, kind=kind.slug, method=method, seed=seed)
        report.user = user if getattr(user, "pk", None) else None
        report.questions = len(questions)
        report.save()
    voted = questions_with_voted_items(study=study, kind=kind)
    n_questions = 0
    for question in questions:
        if report is not None and method == "model":  # a model takes seconds a question: say how far it is
            GenerationReport.objects.filter(pk=report.pk).update(done=n_questions, created=len(result.created))
        n_questions += 1
        if question.study_id != study.pk:
            raise PerturbationError(f"question {question.external_id} is not in study {study.slug}")
        try:
            base, _other = question_originals(question, of=of)
        except PerturbationError as exc:
            result.failed.append((question.external_id, str(exc)))
            continue
        external_id = f"{base.external_id}-{kind.slug}-{method[0]}{seed}"
        if question.answers.filter(external_id=external_id).exists():
            result.skipped.append(external_id)
            continue
        if question.external_id in voted:
            result.blocked.append(
                (
                    question.external_id,
                    f"its {kind.slug} item already has {voted[question.external_id]} vote(s): a new variant "
                    "could never be approved there (make a new group instead)",
                )
            )
            continue
        errors: list[dict] = []
        try:
            if method == "rule":
                text, step_provenance = rules.apply_rule_steps(base.text, steps, seed)
            else:
                text, errors, step_provenance = _rewrite_by_model(
                    complete,
                    study=study,
                    question=question,
                    text=base.text,
                    steps=steps,
                    seed=seed,
                    constrain_format=constrain_format,
                )
        except modelgen.ModelOutputError as exc:
            result.failed.append((question.external_id, str(exc)))
            result.raw_outputs[question.external_id] = exc.raw
            continue
        except (modelgen.GeneratorError, PerturbationError) as exc:
            result.failed.append((question.external_id, str(exc)))
            continue
        except Exception as exc:  # any other failure of a test's callable stops this question only
            result.failed.append((question.external_id, f"{type(exc).__name__}: {exc}"))
            continue
        if problem := rendering.text_problem(text):
            result.failed.append((question.external_id, f"the variant cannot be shown: {problem}"))
            continue
        variant = Answer(
            question=question,
            external_id=external_id,
            text=text,
            derived_from=base,
            kind=kind,
            review_status=Answer.Review.PENDING,
            inserted_errors=errors,
            provenance={
                "method": method,
                "kind": kind.slug,
                "seed": seed,
                "base": base.external_id,
                "created_at": timezone.now().isoformat(),
                "created_by": getattr(user, "username", None),
                "steps": step_provenance,
            },
        )
        variant.checks = variant_checks(answer=variant)
        if not dry_run:
            variant.save()
        result.created.append(variant)
    if report is not None:
        report.generator = _generator_name(complete) if method == "model" else ""
        report.done = report.questions = n_questions
        report.created = len(result.created)
        report.skipped = len(result.skipped)
        report.failures = [
            {"question": qid, "reason": why, "raw_output": result.raw_outputs.get(qid, "")}
            for qid, why in result.failed
        ]
        report.blocked = [{"question": qid, "reason": why} for qid, why in result.blocked]
        report.finished_at = timezone.now()
        report.save()
        result.report = report
    return result


def _item_of(answer: Answer) -> ComparisonItem | None:
    return ComparisonItem.objects.select_for_update(of=("self",)).filter(answer_a2=answer).first()


def _refuse_if_voted(item: ComparisonItem | None, answer: Answer, doing: str) -> None:
    if item is None:
        return
    votes = item.votes.count()
    if votes:
        raise PerturbationError(
            f"cannot {doing} {answer.external_id}: its item {item} already has {votes} vote(s), "
            "which would no longer match the answer shown"
        )


def answer_review(*, answer: Answer, decision: str, user=None, note: str = "") -> ComparisonItem | None:
    """Approve (creating or updating the question's item for this kind) or reject a variant.
    Returns the item on approval. Refused when it would detach or change an item that has votes.
    """
    if decision not in DECISIONS:
        raise PerturbationError(f"decision must be approve or reject, not {decision!r}")
    if answer.derived_from_id is None:
        raise PerturbationError(f"{answer.external_id} is an original answer; only variants are reviewed")
    with transaction.atomic():
        answer = (
            Answer.objects.select_for_update(of=("self",)).select_related("question__study", "kind").get(pk=answer.pk)
        )
        question = answer.question
        item = None
        if decision == "approve":
            root = _root(answer)
            others = list(question.answers.originals().exclude(pk=root.pk))
            if len(others) != 1:
                raise PerturbationError(
                    f"question {question.external_id} needs exactly one other original as A1, has {len(others)}"
                )
            item = (
                ComparisonItem.objects.select_for_update(of=("self",))
                .filter(question=question, kind=answer.kind)
                .first()
            )
            if item is None:
                item = ComparisonItem.objects.create(
                    study=question.study, question=question, kind=answer.kind, answer_a1=others[0], answer_a2=answer
                )
            elif item.answer_a2_id != answer.pk or item.answer_a1_id != others[0].pk:
                _refuse_if_voted(item, answer, "approve")
                item.answer_a1, item.answer_a2 = others[0], answer
                item.save(update_fields=["answer_a1", "answer_a2"])
            status = Answer.Review.APPROVED
        else:
            current = _item_of(answer)
            _refuse_if_voted(current, answer, "reject")
            if current is not None:
                current.delete()
            status = Answer.Review.REJECTED
        answer.review_status = status
        answer.save(update_fields=["review_status"])
        AnswerRevision.objects.create(answer=answer, action=decision, user=user, note=note)
    return item


@dataclass
class BulkResult:
    done: list[Answer] = field(default_factory=list)
    refused: list[tuple[Answer, str]] = field(default_factory=list)


def answers_review(*, answers: Iterable[Answer], decision: str, user=None, note: str = "") -> BulkResult:
    """Review many variants; each is decided on its own, refusals are reported, not raised."""
    result = BulkResult()
    for answer in answers:
        try:
            answer_review(answer=answer, decision=decision, user=user, note=note)
        except PerturbationError as exc:
            result.refused.append((answer, str(exc)))
        else:
            result.done.append(answer)
    return result


def answer_edit(*, answer: Answer, text: str, user=None, note: str = "") -> Answer:
    """Change a variant's text by hand: keeps a revision (who, when, before and after), records the
    edit in the provenance and re-runs the checks. Refused once its item has votes.
    """
    if answer.derived_from_id is None:
        raise PerturbationError(f"{answer.external_id} is an original answer; only variants are edited here")
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise PerturbationError(f"the new text of {answer.external_id} is empty")
    with transaction.atomic():
        answer = (
            Answer.objects.select_for_update(of=("self",)).select_related("question__study", "kind").get(pk=answer.pk)
        )
        if text == answer.text:
            return answer
        _refuse_if_voted(_item_of(answer), answer, "edit")
        revision = AnswerRevision.objects.create(
            answer=answer,
            action=AnswerRevision.Action.EDIT,
            user=user,
            text_before=answer.text,
            text_after=text,
            note=note,
        )
        answer.text = text
        answer.provenance = {
            **answer.provenance,
            "edits": [
                *answer.provenance.get("edits", []),
                {"revision": revision.pk, "by": getattr(user, "username", None), "at": revision.created_at.isoformat()},
            ],
        }
        answer.checks = variant_checks(answer=answer)
        answer.save(update_fields=["text", "provenance", "checks"])
    return answer


def variants_checks_fill(*, answers: Iterable[Answer]) -> None:
    """Set the checks of the variants among `answers` that have none, unsaved: a study file's,
    linked to their originals, kinds and questions but not yet written (the file's own checks,
    where it carries them, are kept). The review page's "with warnings only" reads stored checks."""
    for answer in answers:
        if answer.derived_from is not None and not answer.checks:
            answer.checks = variant_checks(answer=answer, lengths_measured=True)


def answers_checks_run(*, answers: Iterable[Answer]) -> int:
    """Re-run the checks of variants (after the study's bound or the checks changed)."""
    count = 0
    for answer in answers:
        if answer.derived_from_id is None:
            continue
        answer.checks = variant_checks(answer=answer)
        answer.save(update_fields=["checks"])
        count += 1
    return count
