"""Small factories for tests: each builds the least that is valid, keyword arguments override."""

from __future__ import annotations

import itertools

from django.contrib.auth import get_user_model

from annotations.models import Answer, BloomLevel, ComparisonItem, Judge, PerturbationKind, Question, Rater, Study

_seq = itertools.count(1)


def make_study(**kw) -> Study:
    n = next(_seq)
    kw.setdefault("title", f"Study {n}")
    kw.setdefault("slug", f"study-{n}")
    kw.setdefault("status", Study.Status.COLLECTING)
    # No too-fast filter unless a test asks for one: most tests vote at once.
    kw.setdefault("min_response_ms", 0)
    return Study.objects.create(**kw)


def make_question(study: Study, *, a1: str = "First answer.", a2: str = "Second answer.", **kw) -> Question:
    """A question with its two originals (external ids <q>-a1, <q>-a2) and its control item."""
    n = next(_seq)
    kw.setdefault("external_id", f"q{n}")
    kw.setdefault("text", f"Question {n}?")
    kw.setdefault("bloom_level", BloomLevel.REMEMBERING)
    question = Question.objects.create(study=study, **kw)
    first = Answer.objects.create(question=question, external_id=f"{question.external_id}-a1", text=a1)
    second = Answer.objects.create(question=question, external_id=f"{question.external_id}-a2", text=a2)
    ComparisonItem.objects.create(study=study, question=question, answer_a1=first, answer_a2=second)
    return question


def originals(question: Question) -> tuple[Answer, Answer]:
    first, second = question.answers.originals().order_by("external_id")
    return first, second


def make_variant(
    question: Question, *, kind: str = "reference", of: str = "a2", text: str | None = None, item: bool = True, **kw
) -> Answer:
    """A perturbed variant of one original (`of`="a1" or "a2") and, by default, its item."""
    first, second = originals(question)
    base, other = (first, second) if of == "a1" else (second, first)
    perturbation = PerturbationKind.objects.get(slug=kind)
    variant = Answer.objects.create(
        question=question,
        external_id=f"{base.external_id}-{kind}",
        text=text if text is not None else base.text + " [1]\n\nReferences\n1. Someone (2020).",
        derived_from=base,
        kind=perturbation,
        **kw,
    )
    if item:
        ComparisonItem.objects.create(
            study=question.study, question=question, kind=perturbation, answer_a1=other, answer_a2=variant
        )
    return variant


def make_rater(study: Study, **kw) -> Rater:
    kw.setdefault("participant_id", f"P{next(_seq):05d}")
    kw.setdefault("target", study.target_per_rater)
    return Rater.objects.create(study=study, **kw)


def human_pool(study: Study) -> Judge:
    judge, _ = Judge.objects.get_or_create(study=study, kind=Judge.Kind.HUMAN, defaults={"name": "Humans"})
    return judge


def make_judge(**kw) -> Judge:
    kw.setdefault("name", f"judge-{next(_seq)}")
    kw.setdefault("kind", Judge.Kind.SIMULATED)
    return Judge.objects.create(**kw)


def make_staff(**kw):
    n = next(_seq)
    kw.setdefault("username", f"staff{n}")
    kw.setdefault("is_staff", True)
    kw.setdefault("is_superuser", True)
    user = get_user_model().objects.create_user(password="pw-staff-12345", **kw)
    return user


def make_staff_with(*perms: str):
    """A staff member who is not a superuser and holds only `perms` ("app_label.codename")."""
    from django.contrib.auth.models import Permission

    user = make_staff(is_superuser=False)
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
    return user


def view_permissions() -> list[str]:
    """Every "view" permission there is: what a read-only researcher is given."""
    from django.contrib.auth.models import Permission

    found = Permission.objects.filter(codename__startswith="view_").select_related("content_type")
    return [f"{p.content_type.app_label}.{p.codename}" for p in found]


def make_llm_judge(**kw):
    """An LLM judge configuration (and its annotations.Judge) through the service that creates them."""
    from judges.services import llm_judge_create

    kw.setdefault("name", f"llm-{next(_seq)}")
    kw.setdefault("backend", "openai_compatible")
    kw.setdefault("model", "test-model")
    kw.setdefault("base_url", "http://127.0.0.1:9/v1")
    return llm_judge_create(**kw)


def make_vote(item: ComparisonItem, judge: Judge, *, shown_first: str = "a1", choice_shown: str = "first", **kw):
    """A vote; `choice` follows from what was shown and picked."""
    from annotations.models import Vote

    return Vote.objects.create(item=item, judge=judge, shown_first=shown_first, choice_shown=choice_shown, **kw)


def make_user(**kw):
    """A Django user who is not staff (the API refuses them)."""
    kw.setdefault("username", f"user{next(_seq)}")
    return get_user_model().objects.create_user(password="pw-user-12345", **kw)
