"""LLM judges: their configuration, their runs over a study's items, and the response cache."""

from __future__ import annotations

import re
from datetime import timedelta
from functools import cached_property
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Count, ProtectedError, Q, Sum
from django.db.models.fields.json import KT
from django.db.models.functions import Cast
from django.utils import timezone

from annotations.models import Vote
from judges import prompts

ENV_NAME = re.compile(r"\A[A-Za-z_][A-Za-z0-9_]*\Z")


def default_label_schemes() -> list[str]:
    return ["answer12"]


class LLMJudge(models.Model):
    """How one LLM judge is asked: backend, model, prompt and limits. Its votes hang on the
    annotations.Judge row it is attached to, like every other judge's."""

    class Backend(models.TextChoices):
        OPENAI_COMPATIBLE = "openai_compatible", "OpenAI-compatible chat API"
        ANTHROPIC = "anthropic", "Anthropic Messages API"
        LOCAL = "local", "Local GGUF in process (llama-cpp)"

    judge = models.OneToOneField("annotations.Judge", on_delete=models.CASCADE, related_name="llm_config")
    backend = models.CharField(max_length=20, choices=Backend.choices, default=Backend.OPENAI_COMPATIBLE)
    model = models.CharField(
        max_length=300, help_text='Model name; for the local backend a GGUF path or "default" (SmolLM2).'
    )
    base_url = models.URLField(
        max_length=300,
        blank=True,
        help_text="e.g. http://127.0.0.1:8080/v1 for llama.cpp's server; blank: the provider's.",
    )
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        help_text="Name of the environment variable holding the key (never the key itself).",
    )
    temperature = models.FloatField(default=0.0, validators=[MinValueValidator(0.0), MaxValueValidator(2.0)])
    max_tokens = models.PositiveIntegerField(default=512, validators=[MinValueValidator(1)])
    timeout = models.FloatField("timeout (s)", default=60.0, validators=[MinValueValidator(0.1)])
    seed = models.IntegerField(null=True, blank=True, default=0)
    prompt_style = models.CharField(
        max_length=20, choices=prompts.PromptStyle.choices, default=prompts.PromptStyle.EXPLAIN_THEN_VOTE
    )
    system_template = models.TextField(blank=True, default=prompts.DEFAULT_SYSTEM_TEMPLATE)
    user_template = models.TextField(
        default=prompts.DEFAULT_USER_TEMPLATE,
        help_text="Fields: {question} {first} {second} {label_first} {label_second} {label_tie} {vote_instruction} "
        "{context} (what a context kind's item tells the judge about the pair, with a blank line after it; empty "
        "for other items; a template without it gets it before the message).",
    )
    family = models.CharField(
        "model family",
        max_length=120,
        blank=True,
        help_text="The family of models this judge belongs to (e.g. Claude, GPT-4, Llama), as a context that names "
        "the judge's own family says it (self-enhancement); blank: the model name.",
    )
    label_schemes = models.JSONField(
        default=default_label_schemes,
        help_text=f"One or more of {', '.join(prompts.LABEL_SCHEMES)}; several are permuted to probe label bias.",
    )
    votes_per_item = models.PositiveSmallIntegerField(default=6, validators=[MinValueValidator(1)])
    concurrency = models.PositiveSmallIntegerField(default=4, validators=[MinValueValidator(1), MaxValueValidator(256)])
    rpm_limit = models.PositiveIntegerField("requests per minute", default=0, help_text="0: no limit.")
    max_retries = models.PositiveSmallIntegerField(default=5, help_text="On 429, 5xx, timeouts, connection errors.")
    retry_base_seconds = models.FloatField(default=1.0, validators=[MinValueValidator(0.0)])
    invalid_retries = models.PositiveSmallIntegerField(default=2, help_text="New tries when the vote cannot be parsed.")
    logprobs = models.BooleanField(default=True, help_text="Ask for log-probabilities where the backend gives them.")
    constrain_vote = models.BooleanField(
        "constrain the vote with a grammar",
        default=False,
        help_text="Send a GBNF grammar (the `grammar` field of llama.cpp's server) so the reply can only name one "
        "of the labels where the prompt style puts the vote. OpenAI-compatible backend only; servers without "
        "grammar support reject or ignore it. The local backend scores the labels anyway.",
    )
    price_in_per_mtok = models.DecimalField(
        "price per 1M input tokens", max_digits=10, decimal_places=4, null=True, blank=True
    )
    price_out_per_mtok = models.DecimalField(
        "price per 1M output tokens", max_digits=10, decimal_places=4, null=True, blank=True
    )

    class Meta:
        verbose_name = "LLM judge"
        constraints = [
            models.CheckConstraint(condition=Q(votes_per_item__gte=1), name="llmjudge_votes_per_item_positive"),
            models.CheckConstraint(condition=Q(concurrency__gte=1), name="llmjudge_concurrency_positive"),
        ]

    def __str__(self) -> str:
        return self.judge.name if self.judge_id else self.model

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        if self.api_key_env and not ENV_NAME.match(self.api_key_env):
            errors["api_key_env"] = "Give the name of an environment variable (letters, digits, _), not the key."
        if self.backend == self.Backend.ANTHROPIC and not self.api_key_env:
            errors["api_key_env"] = "The Anthropic backend needs the name of the variable holding the key."
        if self.backend == self.Backend.OPENAI_COMPATIBLE and not self.base_url and not self.api_key_env:
            errors["base_url"] = "Give a base URL (local server) or an API key variable (hosted provider)."
        for name in ("system_template", "user_template"):
            try:
                prompts.check_template(getattr(self, name), where=name)
            except prompts.PromptError as exc:
                errors[name] = str(exc)
        if self.constrain_vote and self.backend != self.Backend.OPENAI_COMPATIBLE:
            errors["constrain_vote"] = "Only the OpenAI-compatible backend sends a grammar (llama.cpp's server)."
        schemes = self.label_schemes
        if not isinstance(schemes, list) or not schemes or not all(isinstance(s, str) for s in schemes):
            errors["label_schemes"] = 'A non-empty list of scheme names, e.g. ["answer12", "ab"].'
        else:
            unknown = [s for s in schemes if s not in prompts.LABEL_SCHEMES]
            if unknown or len(set(schemes)) != len(schemes):
                errors["label_schemes"] = (
                    f"Unknown or repeated scheme(s) {unknown or schemes}; known: {', '.join(prompts.LABEL_SCHEMES)}."
                )
        if errors:
            raise ValidationError(errors)

    def own_family(self) -> str:
        """The judge's family of models as a context names it: the one set, else the model's name."""
        if self.family.strip():
            return self.family.strip()
        if self.backend == self.Backend.LOCAL and self.model == "default":
            return "SmolLM2"
        return self.model

    # What a run reads from its configuration (prices are added as floats by snapshot()).
    RUN_FIELDS = (
        "backend",
        "model",
        "base_url",
        "api_key_env",
        "temperature",
        "max_tokens",
        "timeout",
        "seed",
        "prompt_style",
        "system_template",
        "user_template",
        "label_schemes",
        "family",
        "votes_per_item",
        "concurrency",
        "rpm_limit",
        "max_retries",
        "retry_base_seconds",
        "invalid_retries",
        "logprobs",
        "constrain_vote",
    )

    def snapshot(self) -> dict[str, Any]:
        """Everything a run needs, frozen at its start so later edits do not mix into it."""
        data = {name: getattr(self, name) for name in self.RUN_FIELDS}
        data["family"] = self.own_family()
        for name in ("price_in_per_mtok", "price_out_per_mtok"):
            value = getattr(self, name)
            data[name] = float(value) if value is not None else None
        return data


def stale_after() -> timedelta:
    """A running run whose worker has not been heard of for this long is taken for dead (and may
    be resumed). Read at each use so the setting can change under tests and between deploys."""
    return timedelta(seconds=settings.JUDGE_RUN_STALE_SECONDS)


class JudgeRunQuerySet(models.QuerySet):
    def active(self) -> JudgeRunQuerySet:
        return self.filter(status__in=[JudgeRun.Status.QUEUED, JudgeRun.Status.RUNNING])


class JudgeRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        CANCELLED = "cancelled", "Cancelled"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    study = models.ForeignKey("annotations.Study", on_delete=models.CASCADE, related_name="runs")
    judge = models.ForeignKey("annotations.Judge", on_delete=models.PROTECT, related_name="runs")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    config = models.JSONField(default=dict, blank=True, help_text="The judge's configuration when the run started.")
    total = models.PositiveIntegerField(default=0, help_text="Votes planned: items x votes per item.")
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    retry_failed = models.BooleanField(default=False, help_text="On resume, ask again for votes whose request failed.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="judge_runs"
    )

    objects = JudgeRunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.judge} on {self.study} ({self.status})"

    @property
    def votes(self) -> models.QuerySet[Vote]:
        """The votes the run wrote: the core app keeps the run's id on each (Vote.run_id)."""
        return Vote.objects.filter(run_id=self.pk)

    def delete(self, *args, **kwargs) -> tuple[int, dict[str, int]]:
        """Refused for a run with votes, which would be left naming a run that is gone (the
        database no longer refuses it: the core app's votes hold the run's id, not a key)."""
        if self.votes.exists():
            raise ProtectedError(f"the run {self.pk} has votes", set(self.votes[:10]))
        return super().delete(*args, **kwargs)

    @property
    def is_stale(self) -> bool:
        return (
            self.status == self.Status.RUNNING
            and self.heartbeat_at is not None
            and timezone.now() - self.heartbeat_at > stale_after()
        )

    @cached_property
    def waiting_behind(self) -> JudgeRun | None:
        """For a queued run, the run a live worker is busy with (running, its heartbeat fresh):
        a worker runs one task at a time, so this one waits behind it rather than being lost."""
        if self.status != self.Status.QUEUED:
            return None
        running = JudgeRun.objects.filter(status=self.Status.RUNNING, heartbeat_at__gte=timezone.now() - stale_after())
        return running.exclude(pk=self.pk).select_related("judge", "study").order_by("started_at", "pk").first()

    @property
    def is_untaken(self) -> bool:
        """Queued for longer than the stale time and no worker took it, while no worker is busy
        with another run it could be waiting behind: its job may be lost (the queue's data lost,
        or refused and the run not undone), so it may be queued again (a second job is harmless:
        the first worker to claim the run runs it, the other finds it taken)."""
        return (
            self.status == self.Status.QUEUED
            and self.heartbeat_at is not None
            and timezone.now() - self.heartbeat_at > stale_after()
            and self.waiting_behind is None
        )

    @property
    def can_cancel(self) -> bool:
        return self.status in (self.Status.QUEUED, self.Status.RUNNING)

    @property
    def can_resume(self) -> bool:
        return (
            self.status in (self.Status.CANCELLED, self.Status.FAILED, self.Status.DONE)
            or self.is_stale
            or self.is_untaken
        )

    def cancel(self) -> bool:
        """Ask the run to stop; the worker notices within a second. False if it was not active."""
        stopped = JudgeRun.objects.filter(pk=self.pk, status__in=[self.Status.QUEUED, self.Status.RUNNING]).update(
            status=self.Status.CANCELLED, finished_at=timezone.now()
        )
        self.refresh_from_db()
        return bool(stopped)

    def progress(self) -> dict[str, Any]:
        """Counts and rates for the live page and the command's summary."""
        votes = self.votes.all()
        counts = votes.aggregate(
            done=Count("id"),
            invalid=Count("id", filter=Q(parse_status="invalid")),
            failed=Count("id", filter=Q(parse_status="failed")),
            cached=Count("id", filter=Q(meta__cached=True)),
            tokens_in=Sum(Cast(KT("meta__tokens_in"), models.IntegerField()), filter=~Q(meta__cached=True)),
            tokens_out=Sum(Cast(KT("meta__tokens_out"), models.IntegerField()), filter=~Q(meta__cached=True)),
        )
        counts["tokens_in"] = counts["tokens_in"] or 0
        counts["tokens_out"] = counts["tokens_out"] or 0
        now = timezone.now()
        end = self.finished_at if self.status not in (self.Status.QUEUED, self.Status.RUNNING) else now
        window = timedelta(seconds=30)
        rate = 0.0
        if self.started_at and end:
            since = max(self.started_at, end - window)
            seconds = (end - since).total_seconds()
            recent = votes.filter(received_at__gte=since, received_at__lte=end).count()
            rate = recent / seconds if seconds > 0.5 else 0.0
        remaining = max(0, self.total - counts["done"])
        cost = None
        price_in, price_out = self.config.get("price_in_per_mtok"), self.config.get("price_out_per_mtok")
        if price_in is not None or price_out is not None:
            cost = (counts["tokens_in"] * (price_in or 0) + counts["tokens_out"] * (price_out or 0)) / 1_000_000
        return {
            **counts,
            "total": self.total,
            "remaining": remaining,
            "percent": round(100 * counts["done"] / self.total, 1) if self.total else 0.0,
            "votes_per_second": rate,
            "eta_seconds": remaining / rate if rate > 0 and self.status == self.Status.RUNNING else None,
            "cost": cost,
            "last_errors": list(
                votes.exclude(error="").order_by("-received_at", "-id").values_list("item_id", "round", "error")[:5]
            ),
        }


class CachedResponse(models.Model):
    """A model's answer to one exact request (backend, URL, model, full prompt, parameters,
    sample and attempt numbers), so a rerun or another study with the same items costs nothing."""

    key = models.CharField(max_length=64, unique=True)
    backend = models.CharField(max_length=20)
    model = models.CharField(max_length=300)
    text = models.TextField(blank=True)
    option_probs = models.JSONField(null=True, blank=True)
    logprobs = models.JSONField(null=True, blank=True, help_text="Token log-probabilities as returned.")
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = "cached response"

    def __str__(self) -> str:
        return f"{self.model}: {self.text[:40]}"
