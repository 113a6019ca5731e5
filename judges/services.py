"""Workflows of LLM judges. Admin, commands and the API call these, never the models directly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from annotations.models import Judge, Study
from biasstudy.limits import VOTES_PER_ITEM_MAX
from biasstudy.queue import enqueue_on_commit
from judges import backends, runner
from judges.models import JudgeRun, LLMJudge
from judges.prompts import PromptStyle, label_scheme
from judges.tasks import run_judge, watch_later

DEMO_JUDGE_NAME = "SmolLM2 local (vote-only)"


class JudgeRunError(ValueError):
    """A run cannot be started, cancelled or resumed; the message says why."""


@transaction.atomic
def llm_judge_create(*, name: str, backend: str, model: str, **fields: Any) -> LLMJudge:
    """Create an LLM judge's configuration and the annotations.Judge its votes belong to.
    Raises ValidationError naming the bad field; then nothing is written."""
    if Judge.objects.filter(name=name, study__isnull=True).exists():
        raise ValidationError({"name": f"a judge named {name!r} already exists"})
    judge = Judge.objects.create(name=name, kind=Judge.Kind.LLM, study=None)
    config = LLMJudge(judge=judge, backend=backend, model=model, **fields)
    config.full_clean()
    config.save()
    return config


def llm_judge_demo_create() -> LLMJudge:
    """The embedded default judge: SmolLM2 in process, no account, no network. Idempotent."""
    existing = LLMJudge.objects.filter(judge__name=DEMO_JUDGE_NAME, judge__study__isnull=True).first()
    if existing:
        return existing
    return llm_judge_create(
        name=DEMO_JUDGE_NAME,
        backend=LLMJudge.Backend.LOCAL,
        model="default",
        prompt_style=PromptStyle.VOTE_ONLY,
        temperature=0.0,
        max_tokens=8,
        seed=0,
        concurrency=1,
        logprobs=True,
        votes_per_item=6,
    )


def _config_of(judge: Judge) -> LLMJudge:
    if judge.kind != Judge.Kind.LLM:
        raise JudgeRunError(f"judge {judge.name!r} is a {judge.get_kind_display()}, not an LLM judge")
    try:
        return judge.llm_config
    except LLMJudge.DoesNotExist:
        raise JudgeRunError(f"LLM judge {judge.name!r} has no configuration") from None


def _enqueue(run: JudgeRun, *, undo: Callable[[], object], what: str) -> None:
    """Queue the run, and its watchdog (if the worker dies, another one resumes the run), once
    the transaction commits. If the queue refuses them, `undo` takes back what the transaction
    wrote and the caller gets QueueUnavailable: a queued run always has its job. The watchdog
    goes first: if the run's job is then refused, the run is undone before any worker saw it,
    and the watchdog finds nothing to watch."""

    def enqueue() -> None:
        watch_later(run.pk)
        run_judge.enqueue(run.pk)

    enqueue_on_commit(enqueue, undo=undo, what=what)


@transaction.atomic
def judge_run_start(
    *, study: Study, judge: Judge, user: Any = None, votes_per_item: int | None = None, enqueue: bool = True
) -> JudgeRun:
    """Create a run of `judge` over every item of `study` and queue it for the task worker
    (enqueue=False leaves it queued for the caller to execute inline). Raises JudgeRunError
    (refused, with the reason) or biasstudy.queue.QueueUnavailable (the queue did not take the
    run: nothing was written)."""
    config = _config_of(judge)
    try:
        config.full_clean()
    except ValidationError as exc:
        raise JudgeRunError(f"the configuration of {judge.name!r} is not valid: {exc.message_dict}") from None
    items = study.items.count()
    if not items:
        raise JudgeRunError(f"study {study.slug!r} has no comparison items to judge")
    if votes_per_item is not None and not 1 <= votes_per_item <= VOTES_PER_ITEM_MAX:
        raise JudgeRunError(f"votes per item must be at least 1 and at most {VOTES_PER_ITEM_MAX}, got {votes_per_item}")
    active = JudgeRun.objects.select_for_update().filter(study=study, judge=judge).active().first()
    if active is not None:
        hint = "; no worker has taken it yet: resume it to queue it again" if active.is_untaken else ""
        if active.waiting_behind is not None:
            hint = f"; it waits behind run #{active.waiting_behind.pk}, which a worker is running"
        raise JudgeRunError(f"run #{active.pk} of {judge.name!r} on {study.slug!r} is still {active.status}{hint}")
    snapshot = config.snapshot()
    if votes_per_item is not None:
        snapshot["votes_per_item"] = votes_per_item
    run = JudgeRun.objects.create(
        study=study,
        judge=judge,
        config=snapshot,
        total=items * snapshot["votes_per_item"],
        created_by=user if getattr(user, "is_authenticated", False) else None,
        heartbeat_at=timezone.now(),  # of a queued run: queued since (/health/ reports one no worker takes)
    )
    if enqueue:
        _enqueue(
            run,
            # A run no worker took has no votes (and JudgeRun.delete refuses one that has).
            undo=lambda: JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.QUEUED).delete(),
            what=f"starting a run of {judge.name!r} on {study.slug!r}",
        )
    return run


def judge_run_cancel(*, run: JudgeRun) -> JudgeRun:
    if not run.cancel():
        raise JudgeRunError(f"run #{run.pk} is {run.status}; only queued or running runs can be cancelled")
    return run


@transaction.atomic
def judge_run_resume(*, run: JudgeRun, retry_failed: bool = False, enqueue: bool = True) -> JudgeRun:
    """Queue a stopped (or dead) run again: it asks only for the votes still missing and, with
    retry_failed, again for those whose request failed. Raises JudgeRunError or
    biasstudy.queue.QueueUnavailable (then the run is left as it was)."""
    run = JudgeRun.objects.select_for_update().get(pk=run.pk)
    if not run.can_resume:
        raise JudgeRunError(f"run #{run.pk} is {run.status} and its worker is alive; it cannot be resumed now")
    before = {name: getattr(run, name) for name in ("status", "retry_failed", "finished_at", "heartbeat_at")}
    run.status = JudgeRun.Status.QUEUED
    run.retry_failed = retry_failed
    run.finished_at = None
    run.heartbeat_at = timezone.now()  # of a queued run: queued since (/health/ reports one no worker takes)
    run.save(update_fields=list(before))
    if enqueue:
        _enqueue(
            run,
            undo=lambda: JudgeRun.objects.filter(pk=run.pk, status=JudgeRun.Status.QUEUED).update(**before),
            what=f"resuming run #{run.pk}",
        )
    return run


def judge_run_execute(*, run_id: int, progress: Callable[[int], None] | None = None) -> JudgeRun:
    """Do the work of a queued run in this process (the task worker, or `run_judge --wait`)."""
    return runner.execute(run_id, progress=progress)


def llm_judge_test_connection(*, config: LLMJudge) -> tuple[bool, str]:
    """Make one tiny call with the configuration and say how it went."""
    snapshot = config.snapshot()
    scheme = label_scheme(snapshot["label_schemes"][0])
    request = backends.Request(
        messages=[{"role": "user", "content": f"Reply with one word: {scheme.first}."}],
        model=snapshot["model"],
        temperature=0.0,
        max_tokens=5,
        timeout=min(snapshot["timeout"], 30.0),
        seed=snapshot["seed"],
        logprobs=snapshot["logprobs"],
        style=PromptStyle.VOTE_ONLY,
        labels=scheme.labels(),
    )
    started = time.monotonic()
    try:
        completion = backends.make_backend(snapshot).complete(request)
    except backends.BackendError as exc:
        return False, f"Failed: {exc}"
    elapsed = round(1000 * (time.monotonic() - started))
    details = f"{completion.tokens_in} tokens in, {completion.tokens_out} out"
    if completion.logprobs or completion.option_probs:
        details += ", with log-probabilities"
    return True, f"OK in {elapsed} ms: {completion.text.strip()[:80]!r} ({details})"
