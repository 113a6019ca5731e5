"""The study's items and votes: studies, questions, answers, comparison items, judges, raters
and votes. The protocol is in ../shared/SPEC.md; the invariants that can live in the database
are constraints here.
"""

from __future__ import annotations

import random
import secrets
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.safestring import SafeString, mark_safe

from annotations import context as context_text
from annotations import lengths
from biasstudy import placeholders, rendering


class BloomLevel(models.TextChoices):
    REMEMBERING = "remembering", "Remembering"
    UNDERSTANDING = "understanding", "Understanding"
    APPLYING = "applying", "Applying"
    ANALYZING = "analyzing", "Analyzing"
    EVALUATING = "evaluating", "Evaluating"
    CREATING = "creating", "Creating"


# The too-fast filter's default threshold (Study.min_response_ms), as the demo study has it.
DEFAULT_MIN_RESPONSE_MS = 3000
# The share of attention checks a rater must get right (Study.gold_min_accuracy), as the demo
# study has it: with three checks, one slip flags nobody (2/3 < 0.75 does), and 0 would flag no one.
DEFAULT_GOLD_MIN_ACCURACY = 0.75
# The one field a study's other-platform completion URL may name (Study.platform_completion_url).
COMPLETION_URL_FIELDS = frozenset({"code"})


class StudyQuerySet(models.QuerySet):
    def data_changed(self) -> int:
        """Move these studies' data version on (one UPDATE, ``data_version + 1`` in the database,
        so that two writers never lose a step): every report stored of them is then out of date.
        Call it in the transaction of the write it records. ``annotations.data_version``'s
        receivers do for every save and delete of what a report reads; a ``bulk_create`` or an
        ``update()``, which send no signal, call it themselves."""
        return self.update(data_version=models.F("data_version") + 1)

    def of_item(self, item_id: int) -> StudyQuerySet:
        """The study of the item with this id (a subquery: no query of its own)."""
        return self.filter(pk=models.Subquery(ComparisonItem.objects.filter(pk=item_id).values("study_id")))


class Study(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        COLLECTING = "collecting", "Collecting"
        CLOSED = "closed", "Closed"

    title = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.DRAFT)
    instructions = models.TextField(
        blank=True, help_text="Markdown, shown to raters.", validators=[rendering.validate_markdown]
    )
    consent = models.TextField(
        blank=True, help_text="Markdown, shown to raters before they start.", validators=[rendering.validate_markdown]
    )
    # The instructions rendered, kept beside them as a question's text is (RenderedText): the
    # task page shows them with every item, and rendering a 1 KB text costs about 3 ms of CPU.
    instructions_html = models.TextField(blank=True, default="", editable=False)
    instructions_html_key = models.CharField(max_length=40, blank=True, default="", editable=False)
    votes_per_item = models.PositiveSmallIntegerField(
        default=6, help_text="Counted votes each item needs from each judge."
    )
    min_response_ms = models.PositiveIntegerField(
        default=DEFAULT_MIN_RESPONSE_MS,
        help_text="Votes faster than this (plus ms per word) are kept but not counted. The default, 3,000 ms, is "
        "less than anyone needs to read a question and two short answers (at a fast skim of 700 words a minute "
        "3 s covers 35 words); 0 turns the filter off.",
    )
    ms_per_word = models.PositiveIntegerField(
        default=0, help_text="Added to the threshold per word of the two answers shown."
    )
    fast_notice = models.BooleanField(
        default=True,
        help_text="Tell a rater, gently, when a vote came faster than the minimum response time "
        "(the vote is stored all the same, and not counted).",
    )
    target_per_rater = models.PositiveIntegerField(
        default=45,
        help_text="Items each rater is asked for (the paper's raters did at least 45). Above the most one rater "
        "can get, it is lowered to that number when the study is saved or imported, with a warning.",
    )
    one_variant_per_question = models.BooleanField(
        default=True, help_text="A rater never sees two items of the same question."
    )
    lease_seconds = models.PositiveIntegerField(
        default=900, help_text="How long an item handed to a rater stays reserved for them."
    )
    completion_code = models.CharField(max_length=64, blank=True)
    per_rater_codes = models.BooleanField(
        default=False,
        help_text="Give each rater their own completion code (kept on the rater), so that a shared code shows. "
        "On Prolific the redirect then carries the rater's code, which Prolific cannot check for you.",
    )
    prolific_completion_url = models.URLField(blank=True)
    platform_completion_url = models.URLField(
        "other platform's completion URL",
        max_length=500,
        blank=True,
        help_text="Where a rater who came by the participant link (any platform but Prolific or MTurk) is sent "
        "on finishing, with their completion code: write {code} where the code goes "
        "(https://example.org/done?token={code}), or leave it out and the code is added as ?code=….",
    )
    allow_mturk_frame = models.BooleanField(
        default=False,
        help_text="Let MTurk show this study's rater pages inside its HIT frame (an ExternalQuestion): only "
        "worker.mturk.com, workersandbox.mturk.com and www.mturk.com may frame them, and the rater's cookie "
        "is sent to us from inside that frame. Browsers that block third-party cookies (Safari; Chrome or "
        "Firefox set to) do not send it: their workers are shown a link that opens the task in a new tab. "
        "Off: no site may frame the study.",
    )
    gold_every = models.PositiveSmallIntegerField(
        "attention check after every",
        default=10,
        help_text="Mix in an attention-check item after every k items, when the study has attention checks (0: never).",
    )
    gold_min_accuracy = models.FloatField(
        "attention checks right, at least",
        default=DEFAULT_GOLD_MIN_ACCURACY,
        help_text="Raters below this share of attention checks right are flagged, once they have had three "
        "(0.75: three of four; 0: nobody is ever flagged).",
    )
    max_length_ratio = models.FloatField(
        default=1.3, help_text="Perturbation checks warn when a variant is longer than this."
    )
    created_at = models.DateTimeField(default=timezone.now)
    # How many times what the study's reports read has changed (its votes, items, questions,
    # answers, raters, judges, runs, kinds and its own settings): a stored report is current
    # while the version it was computed at is this one (analysis.stored_reports.report_version).
    # Moved only by StudyQuerySet.data_changed; a save never writes it back.
    data_version = models.PositiveBigIntegerField(default=0, editable=False)

    objects = StudyQuerySet.as_manager()

    class Meta:
        verbose_name_plural = "studies"
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(votes_per_item__gte=1),
                name="study_votes_per_item_positive",
                violation_error_message="votes_per_item must be at least 1",
            ),
            models.CheckConstraint(
                condition=Q(target_per_rater__gte=1),
                name="study_target_positive",
                violation_error_message="target_per_rater must be at least 1",
            ),
            models.CheckConstraint(
                condition=Q(lease_seconds__gte=10),
                name="study_lease_at_least_10s",
                violation_error_message="lease_seconds must be at least 10",
            ),
            models.CheckConstraint(
                condition=Q(gold_min_accuracy__gte=0) & Q(gold_min_accuracy__lte=1),
                name="study_gold_min_accuracy_is_a_share",
                violation_error_message="gold_min_accuracy must be between 0 and 1",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def save(self, *args, **kwargs) -> None:
        self.refresh_instructions_html()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = set(kwargs["update_fields"]) | {"instructions_html", "instructions_html_key"}
        old_quota = (
            Study.objects.filter(pk=self.pk).values_list("votes_per_item", flat=True).first() if self.pk else None
        )
        if old_quota is not None:
            # A study read before a vote came in must not put its old data version back.
            fields = kwargs.get("update_fields")
            if fields is None:
                fields = [f.name for f in self._meta.get_fields() if f.concrete and not f.primary_key]
            kwargs["update_fields"] = [name for name in fields if name != "data_version"]
        with transaction.atomic():
            # The slots before the study's row, in the order a vote locks them (a vote moves the
            # study's data version last), so that the two never wait for each other.
            if old_quota is not None and old_quota != self.votes_per_item:
                Slot.objects.sync(self)
            super().save(*args, **kwargs)

    def refresh_instructions_html(self) -> None:
        """Render and store the instructions when they (or the rendering code) changed."""
        key = rendering.render_key(self.instructions)
        if key != self.instructions_html_key:
            self.instructions_html = rendering.render_markdown(self.instructions)
            self.instructions_html_key = key

    @property
    def instructions_rendered(self) -> SafeString:
        return stored_html(self.instructions, self.instructions_html, self.instructions_html_key)

    def is_gold_turn(self, votes_done: int) -> bool:
        """Whether a rater's item after `votes_done` votes is an attention check."""
        return gold_turn(votes_done, gold_every=self.gold_every)

    def threshold_ms(self, words: int) -> int:
        """The response-time threshold for an item whose two answers have `words` words."""
        return self.min_response_ms + self.ms_per_word * words

    def target_reachable(self) -> tuple[int, int] | None:
        """Lower the target to the most one rater can get when it is above it (unsaved);
        returns (old, new) when it did, else None. Study forms and imports call it, so that a
        target nobody can reach is never left to fail the next save."""
        most = self.most_items_per_rater() if self.pk else 0
        if not most or self.target_per_rater <= most:
            return None
        old, self.target_per_rater = self.target_per_rater, most
        return old, most

    def clean(self) -> None:
        super().clean()
        if self.prolific_completion_url and not (self.completion_code.strip() or self.per_rater_codes):
            raise ValidationError(
                {"completion_code": "the Prolific redirect carries a completion code: set one, or per-rater codes"}
            )
        if self.platform_completion_url:
            self._check_platform_completion_url()
        if self.pk is None:
            return
        most = self.most_items_per_rater()
        if most and self.target_per_rater > most:
            raise ValidationError(
                {
                    "target_per_rater": f"one rater can get at most {most} items in this study; {self.target_per_rater} cannot be reached"
                }
            )

    def _check_platform_completion_url(self) -> None:
        try:
            placeholders.check(self.platform_completion_url, allowed=COMPLETION_URL_FIELDS)
        except placeholders.PlaceholderError as exc:
            raise ValidationError({"platform_completion_url": f"other platform's completion URL: {exc}"}) from exc
        if not (self.completion_code.strip() or self.per_rater_codes):
            raise ValidationError(
                {
                    "completion_code": "the other platform's completion URL carries a completion code: set one, or per-rater codes"
                }
            )

    def platform_return_url(self, code: str) -> str:
        """The other platform's completion URL with `code` in place of `{code}` (URL-quoted), or
        added as the `code` query parameter when the URL has no `{code}`."""
        url = self.platform_completion_url
        if "code" in placeholders.names(url):
            return placeholders.substitute(url, {"code": quote(code, safe="")})
        parts = urlsplit(placeholders.substitute(url, {}))
        return urlunsplit(
            parts._replace(query=urlencode([*parse_qsl(parts.query, keep_blank_values=True), ("code", code)]))
        )

    def entry_links(self, landing_url: str) -> dict[str, str]:
        """The links raters enter by, from the absolute URL of the study's landing page: the
        plain participant link, the Prolific study URL with Prolific's placeholders (it fills
        them in for each participant) and the MTurk ExternalQuestion URL (MTurk appends
        assignmentId, hitId, workerId and turkSubmitTo itself)."""
        prolific = "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
        return {"participant": landing_url, "prolific": f"{landing_url}?{prolific}", "mturk": landing_url}

    def most_items_per_rater(self) -> int:
        """The most items one rater can be given: one item per question (or every item without
        `one_variant_per_question`), plus the attention checks their cadence lets in."""
        regular, gold = self._items_and_checks()
        return items_reachable(regular=regular, gold=gold, gold_every=self.gold_every)

    def _items_and_checks(self) -> tuple[int, int]:
        """How many scored items and attention checks one rater may be handed, at most."""
        items = self.items.approved()
        regular, gold = items.filter(question__is_gold=False), items.gold()
        if self.one_variant_per_question:
            return regular.values("question_id").distinct().count(), gold.values("question_id").distinct().count()
        return regular.count(), gold.count()

    def attention_check_problem(self) -> str:
        """Why the attention checks cannot flag anyone as the study is set, or "" when they can:
        a rater is judged on them only after GOLD_MIN_SEEN, and a rater's visit (their target,
        or the items there are) may end before the cadence brings that many."""
        regular, gold = self._items_and_checks()
        if not gold:
            return ""
        if self.gold_min_accuracy <= 0:
            return "Attention checks flag nobody: raters are flagged below 0 % right."
        if not self.gold_every:
            return f"The study's {gold} attention check(s) are never shown: an attention check after every 0 items means none."

        def met(every: int) -> int:
            return checks_met(regular=regular, gold=gold, gold_every=every, target=self.target_per_rater)

        if met(self.gold_every) >= GOLD_MIN_SEEN:
            return ""
        fits = [every for every in range(self.gold_every, 0, -1) if met(every) >= GOLD_MIN_SEEN]
        advice = (
            f"An attention check after every {fits[0]} items would let them meet {GOLD_MIN_SEEN}."
            if fits
            else f"Add attention checks or questions: {GOLD_MIN_SEEN} checks at least, and items between them."
        )
        return (
            f"Attention checks cannot flag anyone as set: a rater is judged after {GOLD_MIN_SEEN} of them, and "
            f"with one after every {self.gold_every} items, {min(regular, self.target_per_rater)} scored item(s) "
            f"per rater and {gold} check(s) in the study, a rater meets {met(self.gold_every)}. {advice}"
        )


def target_lowered_message(old: int, new: int) -> str:
    """The warning shown wherever a target was lowered to what one rater can reach (the admin's
    study form, the study upload, import_study)."""
    return (
        f"The target per rater was lowered from {old} to {new}: one rater can get at most {new} "
        f"item{'' if new == 1 else 's'} in this "
        f"study (one per question, plus attention checks). Raise it again after adding questions."
    )


def gold_turn(votes_done: int, *, gold_every: int) -> bool:
    """Whether the item after `votes_done` votes is an attention check: every k+1-th (k = `gold_every`, 0: none)."""
    return gold_every > 0 and (votes_done + 1) % (gold_every + 1) == 0


def items_reachable(*, regular: int, gold: int, gold_every: int) -> int:
    """How many items a rater gets when every k+1-th item is an attention check (k = `gold_every`,
    0: none): a gold turn without gold left takes a regular item, a regular turn without regular
    items left ends the visit (annotations.assignment hands out in this order)."""
    return _hand_out(regular=regular, gold=gold, gold_every=gold_every, target=None)[0]


def checks_met(*, regular: int, gold: int, gold_every: int, target: int) -> int:
    """How many attention checks one rater meets before their visit ends: at their target, or
    when no item is left (annotations.assignment's order, as `items_reachable`)."""
    return _hand_out(regular=regular, gold=gold, gold_every=gold_every, target=target)[1]


def _hand_out(*, regular: int, gold: int, gold_every: int, target: int | None) -> tuple[int, int]:
    """(items, of which attention checks) one rater is handed, up to `target` (None: no limit)."""
    done = checks = 0
    while target is None or done < target:
        if gold and gold_turn(done, gold_every=gold_every):
            gold -= 1
            checks += 1
        elif regular:
            regular -= 1
        else:
            break
        done += 1
    return done, checks


class RenderedText(models.Model):
    """A `text` in markdown kept rendered and sanitised beside it, so that the pages showing it
    (the task page shows three per vote) do not render it again: `html` uses the stored render
    only while `text_html_key` matches the text and the rendering code, else renders afresh."""

    text_html = models.TextField(blank=True, default="", editable=False)
    text_html_key = models.CharField(max_length=40, blank=True, default="", editable=False)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs) -> None:
        self.refresh_html()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = set(kwargs["update_fields"]) | {"text_html", "text_html_key"}
        super().save(*args, **kwargs)

    def refresh_html(self) -> None:
        """Render and store (bulk_create skips save(): call this before it)."""
        key = rendering.render_key(self.text)
        if key != self.text_html_key:
            self.text_html = rendering.render_markdown(self.text)
            self.text_html_key = key

    @property
    def html(self) -> SafeString:
        return stored_html(self.text, self.text_html, self.text_html_key)


def stored_html(text: str, html: str, key: str) -> SafeString:
    """`html`, stored as the render of `text` under `key`, if that is still what rendering
    `text` gives (same text, same rendering code); else `text` rendered afresh."""
    if key == rendering.render_key(text):
        return mark_safe(html)  # noqa: S308 - what render_markdown returned for this text
    return rendering.render_markdown(text)


def validate_context(value: str) -> None:
    try:
        context_text.check(value)
    except context_text.ContextError as exc:
        raise ValidationError(f"context: {exc}") from None


class Question(RenderedText):
    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="questions")
    external_id = models.CharField(max_length=120)
    text = models.TextField(validators=[rendering.validate_markdown])
    bloom_level = models.CharField(
        max_length=16,
        choices=BloomLevel.choices,
        blank=True,
        help_text="The question's level in Bloom's revised taxonomy; none for an attention check.",
    )
    is_gold = models.BooleanField(
        "attention check",
        default=False,
        help_text="An attention-check question (A1 plainly better), never part of the metrics. Not the same as an "
        "item's better answer, against which judges' accuracy is given.",
    )
    # The part of an imported data set the question comes from (LLMBar's "LLMBar/Natural"), so
    # that every figure can be cut by it; empty for none.
    subset = models.CharField(max_length=120, blank=True, default="")
    # The prompt the question asks, as a key shared by every question that asks it: where
    # several systems answered one instruction (MT-bench, PRD, AlpacaEval) each pair of answers
    # is a question of its own, but their votes rise and fall with the instruction, so the
    # analysis clusters them as one (docs/STATISTICS.md). Empty: the question is its own cluster.
    prompt_key = models.CharField(max_length=120, blank=True, default="")

    class Meta:
        ordering = ["study", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "external_id"], name="question_external_id_unique"),
            # An attention check tests the rater, not a level of learning: it may have none.
            models.CheckConstraint(
                condition=Q(bloom_level__in=BloomLevel.values) | Q(is_gold=True, bloom_level=""),
                name="question_bloom_valid",
            ),
        ]

    def __str__(self) -> str:
        return self.external_id

    def clean(self) -> None:
        super().clean()
        if not self.bloom_level and not self.is_gold:
            raise ValidationError({"bloom_level": "A question needs its Bloom level (an attention check does not)."})


class AnswerQuerySet(models.QuerySet):
    def originals(self) -> AnswerQuerySet:
        return self.filter(derived_from__isnull=True)

    def variants(self) -> AnswerQuerySet:
        return self.filter(derived_from__isnull=False)


class Semantics(models.TextChoices):
    # A good judge moves away from the perturbed answer (factual error, gender bias).
    DEGRADING = "degrading", "degrading"
    # A good judge does not move (fake reference, rich content, compounds of them).
    NON_SEMANTIC = "non_semantic", "non-semantic"


class PerturbationKind(models.Model):
    """What a rewrite of an answer does to it, and so how a good judge should react (SPEC)."""

    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True)
    semantics = models.CharField(max_length=16, choices=Semantics.choices)
    # For compound kinds, the slugs of the kinds applied in order (e.g. ["reference",
    # "rich_content"]); empty for a simple kind.
    steps = models.JSONField(default=list, blank=True)
    # Built-in kinds belong to no study; a study may define its own.
    study = models.ForeignKey(
        "annotations.Study",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="perturbation_kinds",
    )
    builtin = models.BooleanField(default=False)
    # The model-based generator's instructions for this kind; empty means our default wording
    # (perturbations.modelgen.DEFAULT_PROMPTS). {question} and {answer} are filled in.
    model_prompt = models.TextField(
        blank=True,
        help_text="Instructions for the model-based generator; empty uses the built-in wording. "
        "Placeholders: {question}, {answer}.",
    )

    class Meta:
        db_table = "perturbations_perturbationkind"  # made by the perturbations app before it moved here
        ordering = ["slug"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(semantics__in=["degrading", "non_semantic"]),
                name="perturbationkind_semantics_valid",
            ),
            models.CheckConstraint(
                condition=~(models.Q(builtin=True) & models.Q(study__isnull=False)),
                name="perturbationkind_builtin_has_no_study",
            ),
        ]

    def __str__(self) -> str:
        return self.slug


class Answer(RenderedText):
    class Review(models.TextChoices):
        PENDING = "pending", "Pending review"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"

    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="answers")
    external_id = models.CharField(max_length=120)
    text = models.TextField(help_text="Markdown.", validators=[rendering.validate_markdown])
    derived_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="variants")
    kind = models.ForeignKey(
        "annotations.PerturbationKind", null=True, blank=True, on_delete=models.PROTECT, related_name="answers"
    )
    # How the text came to be: {"method": "hand"|"rule"|"model"|"import", ...} with generator,
    # model, prompt, seed, created_at and, for compounds, one entry per step under "steps".
    provenance = models.JSONField(default=dict, blank=True)
    # The system (model) that wrote an original answer, when known (e.g. "gpt4" in imported
    # PRD data); self-preference compares it with a judge's family. Blank: unknown.
    system = models.CharField(max_length=120, blank=True, default="")
    review_status = models.CharField(max_length=10, choices=Review.choices, default=Review.APPROVED)
    # For factual-error variants: [{"original": str, "error": str, "explanation": str}, ...].
    inserted_errors = models.JSONField(default=list, blank=True)
    # For a variant of a context kind (bandwagon, authority, sycophancy...): the text is the
    # original's, unchanged, and this is what both kinds of judge are told about the pair, a
    # template naming the answers {A1} and {A2} (annotations.context). Empty: no context.
    context = models.CharField(
        max_length=context_text.MAX_CHARS,
        blank=True,
        default="",
        validators=[validate_context],
        help_text="What the judges are told about the pair, one line; {A1} and {A2} name the answers "
        "(each vote shows the label the answer has there), {judge_family} and {other_family} model families.",
    )
    # Results of the perturbation checks (see perturbations.checks), shown at review.
    checks = models.JSONField(default=dict, blank=True)
    len_words = models.PositiveIntegerField(default=0, editable=False)
    len_chars = models.PositiveIntegerField(default=0, editable=False)
    len_bpe = models.PositiveIntegerField(null=True, blank=True, editable=False)
    # Null: unknown (an answer imported with its lengths instead of its text).
    len_spaces = models.PositiveIntegerField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = AnswerQuerySet.as_manager()

    class Meta:
        ordering = ["question", "external_id"]
        constraints = [
            models.UniqueConstraint(fields=["question", "external_id"], name="answer_external_id_unique"),
            # An original has no kind; a variant always says which perturbation made it.
            models.CheckConstraint(
                condition=Q(derived_from__isnull=True, kind__isnull=True)
                | Q(derived_from__isnull=False, kind__isnull=False),
                name="answer_variant_has_kind",
            ),
            models.CheckConstraint(condition=~Q(derived_from=models.F("id")), name="answer_not_derived_from_itself"),
        ]

    def __str__(self) -> str:
        return self.external_id

    def save(self, *args, **kwargs) -> None:
        # Lengths are a cache of the text: recomputed whenever the text may have changed.
        self.refresh_lengths()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = set(kwargs["update_fields"]) | {"len_words", "len_chars", "len_bpe", "len_spaces"}
        super().save(*args, **kwargs)

    @property
    def is_original(self) -> bool:
        return self.derived_from_id is None

    def refresh_lengths(self) -> None:
        measured = lengths.measure_all(self.text)
        self.len_words = measured["words"]
        self.len_chars = measured["chars"]
        self.len_bpe = measured.get("bpe")
        self.len_spaces = measured["spaces"]


def random_hand_out_rank() -> int:
    """A random rank fixed at creation: spreads raters over the slots of one round."""
    return secrets.randbelow(2**31)


class ComparisonItemQuerySet(models.QuerySet):
    def control(self) -> ComparisonItemQuerySet:
        return self.filter(kind__isnull=True, question__is_gold=False)

    def experimental(self) -> ComparisonItemQuerySet:
        return self.filter(kind__isnull=False)

    def gold(self) -> ComparisonItemQuerySet:
        return self.filter(question__is_gold=True)

    def scored(self) -> ComparisonItemQuerySet:
        """Items that enter the metrics (everything but attention checks)."""
        return self.filter(question__is_gold=False)

    def approved(self) -> ComparisonItemQuerySet:
        """Items raters may be shown: both answers approved (variants wait for their review), and
        not kept from raters by the vote import that added them (`offered_to_raters`)."""
        return self.filter(
            answer_a1__review_status=Answer.Review.APPROVED,
            answer_a2__review_status=Answer.Review.APPROVED,
            offered_to_raters=True,
        )


class ComparisonItem(models.Model):
    """Two answers to one question shown side by side: the control pair (A1, A2) or an
    experimental pair (A1, A2p). `answer_a2` is always the answer that is (or whose original
    is) perturbed in this group; `answer_a1` the other original. A gold (attention-check)
    question has one item, whose A1 is the plainly better answer.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="items")
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="items")
    kind = models.ForeignKey(
        "annotations.PerturbationKind", null=True, blank=True, on_delete=models.PROTECT, related_name="items"
    )
    answer_a1 = models.ForeignKey(Answer, on_delete=models.PROTECT, related_name="+")
    answer_a2 = models.ForeignKey(Answer, on_delete=models.PROTECT, related_name="+")
    # Which answer is known to be the better one (a data set's gold label, e.g. LLMBar's);
    # empty when unknown. Accuracy against it is reported per judge (analysis.consistency).
    # The question's better answer is its control item's; its perturbed items inherit it
    # (`inherited_better_answer`) unless set here by hand. Not to be confused with
    # Question.is_gold, an attention check.
    gold_label = models.CharField(
        "better answer",
        max_length=2,
        choices=[("a1", "A1"), ("a2", "A2")],
        blank=True,
        default="",
        help_text="The answer known to be better (a1 or a2), against which each judge's accuracy is given; empty: "
        "unknown. A perturbed item inherits its question's (the control item's), A1 for a degrading kind.",
    )
    # Off for an item a vote import added without being asked to hand it to raters: its votes
    # came from the file, and people are shown only what a researcher chose for them.
    offered_to_raters = models.BooleanField(
        default=True,
        editable=False,
        help_text="Whether human raters are handed this item (off: imported for the file's judges and LLM judges only).",
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = ComparisonItemQuerySet.as_manager()

    class Meta:
        ordering = ["question", "kind"]
        constraints = [
            models.CheckConstraint(condition=~Q(answer_a1=models.F("answer_a2")), name="item_two_different_answers"),
            models.UniqueConstraint(
                fields=["question"], condition=Q(kind__isnull=True), name="item_one_control_per_question"
            ),
            models.UniqueConstraint(fields=["question", "kind"], name="item_one_per_question_and_kind"),
            models.CheckConstraint(condition=Q(gold_label__in=["", "a1", "a2"]), name="item_gold_label_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.question.external_id}/{self.group}"

    def save(self, *args, **kwargs) -> None:
        adding = self.pk is None
        if adding and self.kind_id and not self.gold_label:
            control = ComparisonItem.objects.filter(question=self.question_id, kind__isnull=True).first()
            if control is not None:
                self.gold_label = self.inherited_better_answer(control)
        super().save(*args, **kwargs)
        if adding:
            Slot.objects.sync(self.study, items=[self])

    def inherited_better_answer(self, control: ComparisonItem, gold_label: str | None = None) -> str:
        """This perturbed item's better answer as its question has it: the control item's
        `gold_label` (or `gold_label`, what it says), named from this item's side. A degrading
        kind makes A2p the worse answer by design, so A1; otherwise the better original keeps
        its place (A1 here, or A2, whose variant A2p is). "" where the question has none."""
        told = control.gold_label if gold_label is None else gold_label
        if not told:
            return ""
        if self.kind.semantics == Semantics.DEGRADING:
            return "a1"
        better = control.answer_a1 if told == "a1" else control.answer_a2
        return "a1" if better == self.answer_a1 else "a2"

    @property
    def context(self) -> str:
        """What the judges are told about this pair (a template: annotations.context), or ''."""
        return self.answer_a2.context

    @property
    def for_raters(self) -> bool:
        """Whether human raters are handed this item (it has slots). Not attention checks, which
        come by their own turn, not an item whose context names the judge's own model
        family (self-enhancement): a person has none, and not one a vote import added without
        being asked to (`offered_to_raters`)."""
        return (
            self.offered_to_raters and not self.question.is_gold and not context_text.names_judge_family(self.context)
        )

    @property
    def group(self) -> str:
        if self.question.is_gold:
            return "gold"
        return self.kind.slug if self.kind_id else "control"


class Judge(models.Model):
    class Kind(models.TextChoices):
        HUMAN = "human", "Human rater pool"
        LLM = "llm", "LLM judge"
        SIMULATED = "simulated", "Simulated judge"
        IMPORTED = "imported", "Imported votes"

    name = models.CharField(max_length=120)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # The human pool and imported judges belong to one study; LLM and simulated judges can
    # vote on any study.
    study = models.ForeignKey(Study, null=True, blank=True, on_delete=models.CASCADE, related_name="judges")
    # Parameters of a simulated judge (see analysis.simulate); empty for the others.
    params = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["kind", "name"]
        constraints = [
            models.UniqueConstraint(fields=["study", "name"], name="judge_name_unique_in_study"),
            models.UniqueConstraint(fields=["name"], condition=Q(study__isnull=True), name="judge_name_unique_global"),
            models.UniqueConstraint(fields=["study"], condition=Q(kind="human"), name="judge_one_human_pool_per_study"),
            models.CheckConstraint(
                condition=~Q(kind="human") | Q(study__isnull=False), name="judge_human_pool_has_study"
            ),
        ]

    def __str__(self) -> str:
        return self.name


def pseudonym(rater_id: int | None) -> str:
    """How every output but the payment file and the admin's rater pages names a rater: R<id>,
    never the platform's participant id ("" for a vote without a rater)."""
    return f"R{rater_id}" if rater_id else ""


class RaterQuerySet(models.QuerySet):
    def imported(self) -> RaterQuerySet:
        """People whose votes were imported from a file (import_votes), not raters who came
        through the study link: no one paid them here and nothing was counted as a slot."""
        return self.filter(votes__judge__kind=Judge.Kind.IMPORTED).distinct()

    def crowd(self) -> RaterQuerySet:
        """Raters who came through the study link: the rater monitor and the payment file."""
        return self.exclude(pk__in=Rater.objects.imported().values("pk"))


class Rater(models.Model):
    class Source(models.TextChoices):
        DIRECT = "direct", "Direct link"
        PROLIFIC = "prolific", "Prolific"
        MTURK = "mturk", "MTurk"

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="raters")
    participant_id = models.CharField(max_length=128, help_text="Pseudonymous id typed or passed by the platform.")
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.DIRECT)
    # Platform identifiers (Prolific STUDY_ID/SESSION_ID, MTurk assignmentId/hitId).
    source_meta = models.JSONField(default=dict, blank=True)
    consent_at = models.DateTimeField(null=True, blank=True)
    target = models.PositiveIntegerField()
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=200, blank=True)
    gold_seen = models.PositiveIntegerField(default=0)
    gold_correct = models.PositiveIntegerField(default=0)
    # Every vote they gave (attention checks and not-familiar included), kept with each vote.
    votes_done = models.PositiveIntegerField(default=0, editable=False)
    # How many more of their votes on scored items (attention checks aside) had the A2 side (A2
    # or A2p) shown first than the A1 side; negative when fewer. The hand-out keeps it within
    # ±1 (annotations.assignment), so that a rater's habit of picking one side cannot line up
    # with the perturbation. Kept with each vote, under the rater's lock, as `votes_done` is.
    a2_first_lead = models.IntegerField(default=0, editable=False)
    created_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(null=True, blank=True)
    # Set once, when the rater is shown their completion code (annotations.completion.rater_finish;
    # a code the study did not have yet follows once it has one): the payment export lists who
    # finished, with which code.
    finished_at = models.DateTimeField(null=True, blank=True, editable=False)
    completion_code = models.CharField(max_length=64, blank=True, editable=False)

    objects = RaterQuerySet.as_manager()

    class Meta:
        ordering = ["study", "participant_id"]
        constraints = [
            models.UniqueConstraint(fields=["study", "participant_id"], name="rater_participant_unique_in_study"),
            models.CheckConstraint(
                condition=Q(gold_correct__lte=models.F("gold_seen")), name="rater_gold_correct_le_seen"
            ),
        ]

    def __str__(self) -> str:
        return self.participant_id

    @property
    def pseudonym(self) -> str:
        return pseudonym(self.pk)

    def may_get_items(self) -> bool:
        """The study is collecting and the rater has not reached their target."""
        return self.study.status == Study.Status.COLLECTING and self.votes_done < self.target

    def order_needed(self) -> str:
        """The display order the rater's next scored item must have to keep their own balance
        within ±1 (`a2_first_lead`), or "" when either will do."""
        if self.a2_first_lead > 0:
            return Shown.A1_FIRST
        if self.a2_first_lead < 0:
            return Shown.A2_FIRST
        return ""

    def score_attention_check(self, *, correct: bool) -> None:
        """Count one attention check and (un)flag the rater against the study's bar, once they
        have had GOLD_MIN_SEEN of them (one slip does not flag). Saved by the caller."""
        self.gold_seen += 1
        self.gold_correct += int(correct)
        if self.gold_seen < GOLD_MIN_SEEN:
            return
        bar = self.study.gold_min_accuracy
        if self.gold_correct / self.gold_seen < bar:
            self.flagged = True
            self.flag_reason = f"{GOLD_FLAG}: {self.gold_correct}/{self.gold_seen} correct, under {bar:.0%}"
        elif self.failed_attention_checks:
            self.flagged = False
            self.flag_reason = ""

    @property
    def failed_attention_checks(self) -> bool:
        """Flagged by ``score_attention_check`` (not by hand, nor unflagged by staff since)."""
        return self.flagged and is_attention_check_flag(self.flag_reason)


# Attention checks a rater must have had before their accuracy can flag them, and how the flag's
# reason begins (read only through is_attention_check_flag).
GOLD_MIN_SEEN = 3
GOLD_FLAG = "attention checks"


def is_attention_check_flag(flag_reason: str | None) -> bool:
    """Whether a rater's flag reason is the one ``Rater.score_attention_check`` writes: the
    exports read it from a query's values, without the rater."""
    return bool(flag_reason) and flag_reason.startswith(GOLD_FLAG)


class Shown(models.TextChoices):
    A1_FIRST = "a1", "A1 first (left)"
    A2_FIRST = "a2", "A2 first (left)"


class ChoiceShown(models.TextChoices):
    FIRST = "first", "First (left)"
    SECOND = "second", "Second (right)"
    TIE = "tie", "Tie"


class Choice(models.TextChoices):
    A1 = "a1", "A1"
    A2 = "a2", "A2"
    TIE = "tie", "Tie"


def choice_from_shown(shown_first: str, choice_shown: str) -> str:
    """Map a choice as displayed back to its meaning. The one place this rule lives."""
    if choice_shown == ChoiceShown.TIE:
        return Choice.TIE
    picked_first = choice_shown == ChoiceShown.FIRST
    a1_first = shown_first == Shown.A1_FIRST
    return Choice.A1 if picked_first == a1_first else Choice.A2


class VoteQuerySet(models.QuerySet):
    def human(self) -> VoteQuerySet:
        return self.filter(judge__kind=Judge.Kind.HUMAN)

    def valid(self) -> VoteQuerySet:
        """Votes with a parsed choice (LLM outputs that could not be parsed have none)."""
        return self.filter(choice__isnull=False)

    def familiar(self) -> VoteQuerySet:
        return self.filter(not_familiar=False)


class Vote(models.Model):
    """One judgement of one item by one judge. Never deleted by the app: exclusions (too fast,
    not familiar, flagged rater) are filters applied at analysis time.
    """

    class Parse(models.TextChoices):
        OK = "ok", "Parsed"
        INVALID = "invalid", "Could not be parsed"
        FAILED = "failed", "Request failed"

    item = models.ForeignKey(ComparisonItem, on_delete=models.PROTECT, related_name="votes")
    judge = models.ForeignKey(Judge, on_delete=models.PROTECT, related_name="votes")
    rater = models.ForeignKey(Rater, null=True, blank=True, on_delete=models.PROTECT, related_name="votes")
    # The judge run that wrote an LLM vote, by its id: the judges app gives it its meaning
    # (JudgeRun.votes), so that the core app needs no other app installed.
    run_id = models.BigIntegerField(
        null=True, blank=True, db_index=True, help_text="The judge run that wrote the vote."
    )
    round = models.PositiveSmallIntegerField(default=0, help_text="Which of an LLM judge's votes on the item this is.")
    shown_first = models.CharField(max_length=2, choices=Shown.choices)
    choice_shown = models.CharField(max_length=6, choices=ChoiceShown.choices, null=True, blank=True)
    choice = models.CharField(max_length=3, choices=Choice.choices, null=True, blank=True)
    not_familiar = models.BooleanField(default=False)
    client_ms = models.PositiveIntegerField(null=True, blank=True, help_text="Time to decide, measured in the browser.")
    server_ms = models.PositiveIntegerField(
        null=True, blank=True, help_text="From handing out the item to receiving the vote."
    )
    received_at = models.DateTimeField(default=timezone.now, db_index=True)
    # LLM votes: what the model said and how it was read.
    label_scheme = models.CharField(max_length=32, blank=True)
    labels_swapped = models.BooleanField(
        default=False,
        help_text="The answer shown first was under the scheme's second label (e.g. [B] before [A]).",
    )
    raw_output = models.TextField(blank=True)
    parse_status = models.CharField(max_length=8, choices=Parse.choices, default=Parse.OK)
    option_probs = models.JSONField(
        null=True, blank=True, help_text="Probability per choice as shown: first/second/tie."
    )
    error = models.TextField(blank=True)
    # Imported votes keep the source's own identifiers (rater, row) here.
    meta = models.JSONField(default=dict, blank=True)

    objects = VoteQuerySet.as_manager()

    class Meta:
        ordering = ["received_at", "id"]
        indexes = [models.Index(fields=["judge", "item"], name="vote_judge_item")]
        constraints = [
            # A rater votes at most once on an item: resubmissions are recognised by this.
            models.UniqueConstraint(
                fields=["rater", "item"], condition=Q(rater__isnull=False), name="vote_once_per_rater_item"
            ),
            models.UniqueConstraint(
                fields=["run_id", "item", "round"],
                condition=Q(run_id__isnull=False),
                name="vote_once_per_run_item_round",
            ),
            # The meaning must agree with what was shown; a vote with no choice has neither.
            models.CheckConstraint(
                condition=Q(choice_shown__isnull=True, choice__isnull=True)
                | Q(choice_shown="tie", choice="tie")
                | Q(shown_first="a1", choice_shown="first", choice="a1")
                | Q(shown_first="a1", choice_shown="second", choice="a2")
                | Q(shown_first="a2", choice_shown="first", choice="a2")
                | Q(shown_first="a2", choice_shown="second", choice="a1"),
                name="vote_choice_matches_order",
            ),
            models.CheckConstraint(
                condition=~Q(parse_status="ok") | Q(choice__isnull=False) | Q(not_familiar=True),
                name="vote_parsed_has_choice",
            ),
            models.CheckConstraint(condition=Q(shown_first__in=["a1", "a2"]), name="vote_shown_first_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.judge} on {self.item_id}: {self.choice or self.parse_status}"

    def save(self, *args, data_changed: bool = True, **kwargs) -> None:
        """Save, and move the study's data version on (annotations.data_version), unless the
        caller does (``data_changed=False``: the vote path, last in its transaction)."""
        if self.choice_shown and not self.choice:
            self.choice = choice_from_shown(self.shown_first, self.choice_shown)
        super().save(*args, **kwargs)
        if data_changed:
            Study.objects.of_item(self.item_id).data_changed()


# How long a rater took to decide, as every rule reads it (the vote's too-fast flag, the
# analysis): the browser's time, which counts only while the page was in view, but never more
# than the server's, which the rater cannot change: a tampered client cannot buy its votes time.
# NULL where the browser sent none (as assignment.vote_record has it, in Python).
RESPONSE_MS = models.Case(
    models.When(server_ms__lt=models.F("client_ms"), then=models.F("server_ms")), default=models.F("client_ms")
)


class LeaseQuerySet(models.QuerySet):
    def pending(self) -> LeaseQuerySet:
        """Leases still waiting for their vote (expired or not), not given up."""
        return self.filter(voted_at__isnull=True, released_at__isnull=True)


class Lease(models.Model):
    """One item handed to one rater, with the display order decided when it was handed out.

    The rater votes against the unguessable `token`, never an item id. A lease reserves its
    slot until `expires_at`; after that the item may be handed to someone else, but a vote
    that still arrives on it is stored (never dropped). `released_at` is set when an expired
    lease is given up because the rater came back after its slot had gone to someone else.
    Attention checks have no quota, so their leases hold no slot.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="leases")
    rater = models.ForeignKey(Rater, on_delete=models.CASCADE, related_name="leases")
    item = models.ForeignKey(ComparisonItem, on_delete=models.PROTECT, related_name="leases")
    # The item's question, kept here so that the hand-out finds the questions a rater has seen
    # with one probe of (rater, question) instead of a join per candidate (one variant per
    # question); indexed there, not alone.
    question = models.ForeignKey(Question, on_delete=models.PROTECT, related_name="+", db_index=False, editable=False)
    token = models.CharField(max_length=43, unique=True)
    shown_first = models.CharField(max_length=2, choices=Shown.choices)
    is_gold = models.BooleanField("attention check", default=False)
    created_at = models.DateTimeField(default=timezone.now, help_text="When the item was first handed out.")
    expires_at = models.DateTimeField(db_index=True)
    voted_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)

    objects = LeaseQuerySet.as_manager()

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["item", "expires_at"], name="lease_item_expires"),
            models.Index(fields=["rater", "question"], name="lease_rater_question"),
        ]
        constraints = [
            # A rater never gets the same item twice.
            models.UniqueConstraint(fields=["rater", "item"], name="lease_once_per_rater_item"),
            # A rater has at most one current item.
            models.UniqueConstraint(
                fields=["rater"],
                condition=Q(voted_at__isnull=True, released_at__isnull=True),
                name="lease_one_pending_per_rater",
            ),
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")), name="lease_expires_after_start"
            ),
            models.CheckConstraint(condition=Q(shown_first__in=["a1", "a2"]), name="lease_shown_first_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.rater} / {self.item_id}"

    @property
    def page(self) -> dict[str, RenderedText]:
        """What the task page shows: the question and both answers in the order shown, each with
        its `html` (read the lease with its item's question and answers, or each is a query), and
        a context kind's line with the answers named as this page names them (plain text, or '')."""
        item = self.item
        first, second = (item.answer_a1, item.answer_a2)
        left, right = (first, second) if self.shown_first == Shown.A1_FIRST else (second, first)
        context = context_text.for_rater(item.answer_a2.context or "", self.shown_first)
        return {"question": item.question, "left": left, "right": right, "context": context}


class SlotQuerySet(models.QuerySet):
    def rateable(self) -> SlotQuerySet:
        """Slots still waiting for their counted vote (free or held) on items raters may be shown
        (both answers approved)."""
        approved = Answer.Review.APPROVED
        return self.filter(
            vote__isnull=True, item__answer_a1__review_status=approved, item__answer_a2__review_status=approved
        )

    def sync(self, study: Study, *, items: list[ComparisonItem] | None = None) -> None:
        """Give each item of the study (or each of `items`) as many slots as its quota: new
        ones in the order the item has fewer of, so the orders stay balanced; when the quota
        went down, free slots go, from the order with more. Attention checks and items not for raters
        (`ComparisonItem.for_raters`) get none."""
        quota = study.votes_per_item
        existing = self.filter(study=study) if items is None else self.filter(item__in=items)
        if items is None:
            items = list(study.items.select_related("question", "answer_a2"))
        items = [item for item in items if item.for_raters]
        slots: dict[int, list[Slot]] = {item.pk: [] for item in items}
        for slot in existing:
            slots[slot.item_id].append(slot)
        new, gone = [], []
        for item in items:
            have = slots[item.pk]
            count = {Shown.A1_FIRST: 0, Shown.A2_FIRST: 0}
            for slot in have:
                count[slot.shown_first] += 1
            new += _added_slots(study, item, count, start=len(have))
            free = sorted((s for s in have if s.vote_id is None and s.rater_id is None), key=lambda s: -s.round)
            while sum(count.values()) > quota:
                fuller = max(count, key=lambda order: count[order])
                slot = next((s for s in free if s.shown_first == fuller), None)
                if slot is None:
                    break
                free.remove(slot)
                gone.append(slot.pk)
                count[fuller] -= 1
        self.bulk_create(new)
        self.filter(pk__in=gone).delete()

    def planned(self, study: Study, items: list[ComparisonItem]) -> list[Slot]:
        """The slots `sync` would give new items, unsaved: for a bulk import that builds them
        before its transaction opens. The study and items may be unsaved too; bulk_create takes
        their ids once they are saved."""
        return [
            slot
            for item in items
            if item.for_raters
            for slot in _added_slots(study, item, {Shown.A1_FIRST: 0, Shown.A2_FIRST: 0}, start=0)
        ]


def _added_slots(study: Study, item: ComparisonItem, count: dict[str, int], *, start: int) -> list[Slot]:
    """Slots for rounds `start` up to the quota, each in the order that lags (`count` is updated)."""
    added = []
    for round_ in range(start, study.votes_per_item):
        order = _lagging(count)
        count[order] += 1
        added.append(Slot(study=study, item=item, question=item.question, shown_first=order, round=round_))
    return added


def _lagging(count: dict[str, int]) -> str:
    """The order with fewer slots (at random when even), so that an odd quota's spare slot
    falls on either side."""
    if count[Shown.A1_FIRST] == count[Shown.A2_FIRST]:
        return random.choice([Shown.A1_FIRST, Shown.A2_FIRST])
    return min(count, key=lambda order: count[order])


class Slot(models.Model):
    """One of the counted votes an item needs, in one display order: the queue raters are
    handed work from (annotations.assignment). Free while `rater` is empty or their claim is
    older than the study's lease time; closed for good by the counted vote in `vote`. An item
    has `votes_per_item` slots, half in each order, so balance holds by construction; `round`
    orders the hand-out so that items fill evenly, `rank` spreads raters over one round.
    """

    study = models.ForeignKey(Study, on_delete=models.CASCADE, related_name="+")
    item = models.ForeignKey(ComparisonItem, on_delete=models.CASCADE, related_name="slots")
    # The item's question, so that "not a question the rater has seen" needs no join.
    question = models.ForeignKey(Question, on_delete=models.CASCADE, related_name="+", db_index=False)
    shown_first = models.CharField(max_length=2, choices=Shown.choices)
    round = models.PositiveIntegerField()
    rank = models.IntegerField(default=random_hand_out_rank)
    # Who holds the slot since `claimed_at`. A rater is handed an item once, so the rater and
    # the item name their lease: the claim is one UPDATE, made before the lease exists. Indexed
    # with the item (`slot_rater_item`), which finds the slot a vote closes in one probe; alone,
    # a rater's index held every slot they ever closed, walked at each vote.
    rater = models.ForeignKey(Rater, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # Not indexed alone: an index on it would tempt SQLite to find open slots (vote IS NULL) by
    # it and sort them, instead of walking `slot_open_in_order`; one vote closes one slot.
    vote = models.ForeignKey(Vote, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False)

    objects = SlotQuerySet.as_manager()

    class Meta:
        ordering = ["item_id", "round"]
        indexes = [
            models.Index(fields=["study", "round", "rank"], condition=Q(vote__isnull=True), name="slot_open_in_order"),
            models.Index(fields=["rater", "item"], name="slot_rater_item"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["vote"], condition=Q(vote__isnull=False), name="slot_one_per_vote"),
            models.CheckConstraint(condition=Q(shown_first__in=["a1", "a2"]), name="slot_shown_first_valid"),
            models.CheckConstraint(
                condition=Q(rater__isnull=True) | Q(claimed_at__isnull=False), name="slot_claim_has_time"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.item_id}/{self.shown_first}#{self.round}"


class RequestCount(models.Model):
    """How many requests of one client (`key`, e.g. an address) one limit (`scope`) has let
    through in the fixed window that starts at `window_start` (annotations.ratelimit). A row of
    the database, so every gunicorn worker and web host counts on the same one; a conditional
    UPDATE adds to it only while it is under the limit, so two requests at once cannot both take
    the last place. Rows of ended windows are deleted as new windows begin."""

    scope = models.CharField(max_length=20)
    key = models.CharField(max_length=200)
    window_start = models.BigIntegerField(help_text="Seconds since the epoch at which the window began.")
    window_end = models.BigIntegerField(db_index=True)
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["scope", "key", "window_start"], name="request_count_one_per_window"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} {self.key} @{self.window_start}: {self.count}"
