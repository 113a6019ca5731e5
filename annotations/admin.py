"""Admin for the study's items and votes: everything editable and searchable, votes read-only
and never deletable (exclusions are analysis-time filters)."""

import json

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from annotations.models import Answer, ComparisonItem, Judge, Lease, Question, Rater, Study, Vote
from annotations.study_io import study_export, validate_answer_record
from biasstudy.rendering import MAX_MARKDOWN_CHARS


def _short(text: str, length: int = 80) -> str:
    return Truncator(text).chars(length)


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ("title", "slug", "status", "question_count", "item_count", "rater_count", "vote_count", "results", "created_at")
    list_filter = ("status",)
    search_fields = ("title", "slug")
    prepopulated_fields = {"slug": ("title",)}
    actions = ["export_json", "export_votes_csv"]  # the perturbations app adds its own
    fieldsets = (
        (None, {"fields": ("title", "slug", "status")}),
        (
            "What raters read",
            {"fields": ("instructions", "consent", "completion_code", "per_rater_codes", "prolific_completion_url")},
        ),
        (
            "Protocol",
            {
                "fields": (
                    "votes_per_item",
                    ("target_per_rater", "most_items_per_rater"),
                    "one_variant_per_question",
                    "lease_seconds",
                    ("min_response_ms", "ms_per_word"),
                    ("gold_every", "gold_min_accuracy"),
                    "max_length_ratio",
                )
            },
        ),
    )

    readonly_fields = ("most_items_per_rater",)

    @admin.display(description="most items one rater can get")
    def most_items_per_rater(self, obj: Study) -> int | str:
        """The cap on the target: one item per question, plus the attention checks' cadence."""
        return obj.most_items_per_rater() if obj.pk else "–"

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_questions=Count("questions", filter=Q(questions__is_gold=False), distinct=True),
                n_items=Count("items", distinct=True),
                n_raters=Count("raters", distinct=True),
            )
        )

    @admin.display(description="questions", ordering="n_questions")
    def question_count(self, obj: Study) -> int:
        return obj.n_questions

    @admin.display(description="items", ordering="n_items")
    def item_count(self, obj: Study) -> int:
        return obj.n_items

    @admin.display(description="raters", ordering="n_raters")
    def rater_count(self, obj: Study) -> int:
        return obj.n_raters

    @admin.display(description="votes")
    def vote_count(self, obj: Study) -> int:
        return Vote.objects.filter(item__study=obj).count()

    @admin.display(description="results")
    def results(self, obj: Study) -> str:
        return format_html('<a href="{}">dashboard</a>', reverse("analysis:study", args=[obj.slug]))

    @admin.action(description="Download the votes of the selected study as CSV")
    def export_votes_csv(self, request: HttpRequest, queryset) -> HttpResponse | None:
        # The dashboard's download is the one code path for exports: send the browser there.
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one study to download its votes.", level=messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("analysis:export", args=[queryset.get().slug, "votes"]))

    @admin.action(description="Export selected studies as biasstudy JSON")
    def export_json(self, request: HttpRequest, queryset) -> HttpResponse:
        documents = [study_export(study=study) for study in queryset]
        payload = documents[0] if len(documents) == 1 else documents
        name = queryset.first().slug if len(documents) == 1 else "studies"
        response = HttpResponse(json.dumps(payload, ensure_ascii=False, indent=2), content_type="application/json")
        response["Content-Disposition"] = f'attachment; filename="{name}.json"'
        return response


class AnswerForm(forms.ModelForm):
    """An answer as staff edit it: text no longer than a study file may hold, and the JSON fields
    of the types the review page and the checks read (annotations.study_io)."""

    text = forms.CharField(widget=forms.Textarea, strip=False, max_length=MAX_MARKDOWN_CHARS)

    def clean(self) -> dict:
        data = super().clean()

        def fail(message: str, field: str, near: str | None = None) -> None:
            name = field.split(".")[1].split("[")[0]
            shown = f"{field.removeprefix('answer.')}: {message}"
            raise ValidationError({name if name in self.fields else None: shown})

        record = {"id": "answer"}
        json_fields = ("review_status", "inserted_errors", "provenance", "checks")
        record.update({key: data[key] for key in json_fields if key in data})
        validate_answer_record(record, "answer", fail)
        return data


class AnswerInline(admin.StackedInline):
    form = AnswerForm
    model = Answer
    fk_name = "question"
    extra = 0
    fields = ("external_id", "text", "derived_from", "kind", "review_status", "inserted_errors", "provenance", "lengths")
    readonly_fields = ("lengths",)
    show_change_link = True

    @admin.display(description="lengths")
    def lengths(self, obj: Answer) -> str:
        return f"{obj.len_words} words, {obj.len_chars} chars, {obj.len_bpe if obj.len_bpe is not None else '–'} BPE"


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    formfield_overrides = {models.TextField: {"max_length": MAX_MARKDOWN_CHARS}}
    list_display = ("external_id", "short_text", "bloom_level", "study", "is_gold")
    list_filter = ("study", "bloom_level", "is_gold")
    search_fields = ("external_id", "text")
    inlines = [AnswerInline]
    list_select_related = ("study",)

    @admin.display(description="question")
    def short_text(self, obj: Question) -> str:
        return _short(obj.text)


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    form = AnswerForm
    list_display = ("external_id", "question", "kind", "derived_from", "review_status", "len_words", "len_chars", "len_bpe")
    list_filter = ("question__study", "kind", "review_status")
    search_fields = ("external_id", "text", "question__external_id")
    readonly_fields = ("len_words", "len_chars", "len_bpe", "created_at")
    raw_id_fields = ("question", "derived_from")
    list_select_related = ("question", "kind", "derived_from")


@admin.register(ComparisonItem)
class ComparisonItemAdmin(admin.ModelAdmin):
    list_display = ("__str__", "study", "group_name", "answer_a1", "answer_a2", "vote_count")
    list_filter = ("study", "kind", "question__is_gold", "question__bloom_level")
    search_fields = ("question__external_id", "question__text")
    raw_id_fields = ("question", "answer_a1", "answer_a2")
    list_select_related = ("study", "question", "kind", "answer_a1", "answer_a2")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(n_votes=Count("votes"))

    @admin.display(description="group", ordering="kind")
    def group_name(self, obj: ComparisonItem) -> str:
        return obj.group

    @admin.display(description="votes", ordering="n_votes")
    def vote_count(self, obj: ComparisonItem) -> int:
        return obj.n_votes


@admin.register(Judge)
class JudgeAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "study", "created_at")
    list_filter = ("kind", "study")
    search_fields = ("name",)


@admin.register(Rater)
class RaterAdmin(admin.ModelAdmin):
    list_display = ("participant_id", "study", "source", "target", "vote_count", "gold", "flagged", "flag_reason", "finished_at", "completion_code", "last_seen_at")
    list_filter = ("study", "source", "flagged", ("finished_at", admin.EmptyFieldListFilter))
    search_fields = ("participant_id", "completion_code")
    readonly_fields = ("created_at", "last_seen_at", "consent_at", "gold_seen", "gold_correct", "finished_at", "completion_code")
    list_select_related = ("study",)
    actions = ["flag", "unflag"]

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(n_votes=Count("votes"))

    @admin.display(description="votes", ordering="n_votes")
    def vote_count(self, obj: Rater) -> int:
        return obj.n_votes

    @admin.display(description="attention checks")
    def gold(self, obj: Rater) -> str:
        return f"{obj.gold_correct}/{obj.gold_seen}" if obj.gold_seen else "–"

    @admin.action(description="Flag selected raters (excludable at analysis time)")
    def flag(self, request: HttpRequest, queryset) -> None:
        queryset.update(flagged=True, flag_reason="flagged by staff")

    @admin.action(description="Clear the flag of selected raters")
    def unflag(self, request: HttpRequest, queryset) -> None:
        queryset.update(flagged=False, flag_reason="")


@admin.register(Vote)
class VoteAdmin(admin.ModelAdmin):
    """Votes are evidence: viewable and filterable, never edited or deleted here."""

    list_display = (
        "id",
        "item",
        "judge",
        "rater",
        "shown_first",
        "choice_shown",
        "choice",
        "not_familiar",
        "client_ms",
        "server_ms",
        "parse_status",
        "assignment",
        "received_at",
    )
    list_filter = ("item__study", "judge__kind", "judge", "run", "choice", "shown_first", "not_familiar", "parse_status", "item__kind")
    search_fields = ("rater__participant_id", "item__question__external_id", "raw_output")
    date_hierarchy = "received_at"
    list_select_related = ("item__question", "item__kind", "judge", "rater")
    list_per_page = 100

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.method in ("GET", "HEAD") and super().has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="counted?")
    def assignment(self, obj: Vote) -> str:
        """How the rater app judged a human vote when it arrived (counted, too fast, late)."""
        info = (obj.meta or {}).get("assignment")
        if not info:
            return "–"
        return ", ".join(key.replace("_", " ") for key, value in info.items() if value is True) or "not counted"



@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    """Items handed to raters: who holds what, in which order, until when."""

    list_display = ("id", "study", "rater", "item", "shown_first", "is_gold", "created_at", "expires_at", "voted_at", "released_at")
    list_filter = ("study", "is_gold", "shown_first")
    search_fields = ("rater__participant_id", "item__question__external_id")
    list_select_related = ("study", "rater", "item__question", "item__kind")
    exclude = ("token",)  # a bearer secret of the rater's session

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return [field.name for field in self.model._meta.fields if field.name != "token"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False
