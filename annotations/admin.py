"""Admin for the study's items and votes: everything editable and searchable, votes read-only
and never deletable (exclusions are analysis-time filters)."""

import json

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.db.models import F, Func, IntegerField, OuterRef, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import NoReverseMatch, path, reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.text import Truncator
from django.views.decorators.http import require_http_methods

from annotations import uploads
from annotations.admin_forms import (
    AnswerForm,
    QuestionCreateForm,
    StudyAdminForm,
    StudyUploadForm,
    limit_answer_choices,
)
from annotations.models import (
    Answer,
    ComparisonItem,
    Judge,
    Lease,
    Question,
    Rater,
    Study,
    Vote,
    target_lowered_message,
)
from annotations.services import question_answers_create, question_better_answer_follow
from annotations.study_files import StudyFileError, study_export
from annotations.tasks import study_upload_import_queue
from biasstudy.limits import VOTES_PER_ITEM_MAX
from biasstudy.queue import QueueUnavailable
from biasstudy.rendering import MAX_TEXT_CHARS


def _short(text: str, length: int = 80) -> str:
    return Truncator(text).chars(length)


def _count(queryset) -> Subquery:
    """The number of rows of `queryset` (filtered on an OuterRef) as a subquery: each counts on
    its own index. Counting several reverse relations with Count(..., distinct=True) joins them
    all, questions x items x raters rows per study (32 s for 500 raters on PostgreSQL)."""
    counted = queryset.order_by().annotate(n=Func(F("pk"), function="COUNT")).values("n")
    return Subquery(counted, output_field=IntegerField())


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    form = StudyAdminForm
    # Django 6 reads a URL typed without its scheme as https; say so now (each form made without
    # it warned, RemovedInDjango60Warning). Prolific's links are https.
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    # Short columns, so that the list fits a 1280 px screen beside the admin's two sidebars (the
    # creation time in full, "Nov. 25, 2026, 1:47 a.m.", was cut off there): the slug goes under
    # the title, the creation time is a date.
    list_display = (
        "study",
        "status",
        "question_count",
        "item_count",
        "rater_count",
        "vote_count",
        "results",
        "created",
    )
    list_filter = ("status",)
    search_fields = ("title", "slug")
    prepopulated_fields = {"slug": ("title",)}
    actions = ["export_json", "export_votes_csv"]  # the perturbations app adds its own
    fieldsets = (
        (None, {"fields": ("title", "slug", "status", "questions_link")}),
        (
            "What raters read",
            {
                "fields": (
                    "instructions",
                    "consent",
                    "completion_code",
                    "per_rater_codes",
                    "prolific_completion_url",
                    "platform_completion_url",
                    "allow_mturk_frame",
                )
            },
        ),
        (
            "Protocol",
            {
                "fields": (
                    "votes_per_item",
                    ("target_per_rater", "most_items_per_rater"),
                    "one_variant_per_question",
                    "lease_seconds",
                    ("min_response_ms", "ms_per_word", "fast_notice"),
                    ("gold_every", "gold_min_accuracy"),
                    "max_length_ratio",
                )
            },
        ),
    )

    readonly_fields = ("most_items_per_rater", "questions_link")

    def save_model(self, request: HttpRequest, obj: Study, form: StudyAdminForm, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if form.lowered_target:
            messages.warning(request, target_lowered_message(*form.lowered_target))

    @admin.display(description="questions")
    def formfield_for_dbfield(self, db_field, request: HttpRequest, **kwargs):
        if db_field.name == "votes_per_item":  # the bound study files and the API hold to
            kwargs["max_value"] = VOTES_PER_ITEM_MAX
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def questions_link(self, obj: Study) -> str:
        """Step two of a study made in the admin: its questions, each with its two answers."""
        if not obj.pk:
            return "Save the study, then add its questions (each with its two answers) here."
        add = f"{reverse('admin:annotations_question_add')}?study={obj.pk}"
        listed = f"{reverse('admin:annotations_question_changelist')}?study__id__exact={obj.pk}"
        count = obj.questions.filter(is_gold=False).count()
        return format_html('<a href="{}">Add a question</a> · <a href="{}">its {} question(s)</a>', add, listed, count)

    change_list_template = "admin/annotations/study/change_list.html"
    change_form_template = "admin/annotations/study/change_form.html"

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None):
        """The study's page also shows the links raters enter by, each to copy, and links to its
        dashboard and its perturbations."""
        study = self.get_object(request, unquote(object_id))
        if study is not None:
            landing = request.build_absolute_uri(reverse("annotations:landing", args=[study.slug]))
            extra_context = {
                **(extra_context or {}),
                "entry_links": study.entry_links(landing),
                "attention_check_problem": study.attention_check_problem(),
            }
        return super().change_view(request, object_id, form_url, extra_context)

    # --- upload: file -> report and preview -> import ------------------------------------------

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("upload/", view(self.upload_view), name="annotations_study_upload"),
            path("upload/<str:token>/", view(self.upload_preview_view), name="annotations_study_upload_preview"),
            path(
                "upload/<str:token>/progress/",
                view(self.upload_progress_view),
                name="annotations_study_upload_progress",
            ),
            *super().get_urls(),
        ]

    def _upload_context(self, request: HttpRequest, **extra) -> dict:
        context = {**self.admin_site.each_context(request), "opts": self.model._meta, "title": "Upload a study file"}
        return {**context, **extra}

    def _check_add(self, request: HttpRequest) -> None:
        if not self.has_add_permission(request):
            raise PermissionDenied

    @method_decorator(require_http_methods(["GET", "POST"]))
    def upload_view(self, request: HttpRequest) -> HttpResponse:
        """Step 1: the file (kept on the server under a random name) and the optional overrides."""
        self._check_add(request)
        form = StudyUploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                upload = uploads.study_upload_store(
                    name=data["file"].name,
                    chunks=data["file"].chunks(),
                    slug=data["slug"],
                    title=data["title"],
                    status=data["status"],
                )
            except uploads.UploadError as exc:
                form.add_error("file", str(exc))
            else:
                return HttpResponseRedirect(reverse("admin:annotations_study_upload_preview", args=[upload.token]))
        return render(request, "admin/annotations/study/upload.html", self._upload_context(request, form=form))

    @method_decorator(require_http_methods(["GET", "POST"]))
    def upload_preview_view(self, request: HttpRequest, token: str) -> HttpResponse:
        """Step 2: the validation report and the preview; POST imports (step 3). Nothing is written
        before that POST, and the import is the command's own."""
        self._check_add(request)
        try:
            upload = uploads.study_upload_get(token=token)
        except uploads.UploadError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse("admin:annotations_study_upload"))
        if uploads.study_upload_progress(upload=upload)["state"] != "new":
            # Confirmed already (a second click, or back to this page): follow that import.
            return HttpResponseRedirect(reverse("admin:annotations_study_upload_progress", args=[token]))
        report = uploads.study_upload_report(upload=upload)  # the file is read and checked once
        if report.problem is not None:
            return self._upload_report(request, upload, report.problem)
        if request.method == "POST":
            if report.in_worker:
                try:
                    study_upload_import_queue(upload=upload)
                except QueueUnavailable as exc:
                    messages.error(request, str(exc))
                    context = self._upload_context(request, upload=upload, preview=report.preview, in_worker=True)
                    return render(request, "admin/annotations/study/upload_preview.html", context, status=503)
                return HttpResponseRedirect(reverse("admin:annotations_study_upload_progress", args=[token]))
            try:
                study = uploads.study_upload_import(upload=upload)
            except StudyFileError as exc:
                return self._upload_report(request, upload, exc)
            messages.success(request, f"Imported {study.title}: {report.preview.totals['questions']} questions.")
            for note in report.preview.notes:
                messages.warning(request, note)
            return HttpResponseRedirect(reverse("admin:annotations_study_change", args=[study.pk]))
        return render(
            request,
            "admin/annotations/study/upload_preview.html",
            self._upload_context(request, upload=upload, preview=report.preview, in_worker=report.in_worker),
        )

    def _upload_report(self, request: HttpRequest, upload: uploads.Upload, problem: StudyFileError) -> HttpResponse:
        context = self._upload_context(request, upload=upload, problem=problem)
        return render(request, "admin/annotations/study/upload_preview.html", context)

    @method_decorator(require_http_methods(["GET"]))
    def upload_progress_view(self, request: HttpRequest, token: str) -> HttpResponse:
        """Step 3 for a large study: the task worker's progress, polled by htmx."""
        self._check_add(request)
        try:
            upload = uploads.study_upload_get(token=token)
        except uploads.UploadError as exc:
            messages.error(request, str(exc))
            return HttpResponseRedirect(reverse("admin:annotations_study_upload"))
        context = self._upload_context(
            request,
            upload=upload,
            progress=uploads.study_upload_progress(upload=upload),
            unit="questions written",
            running_title="writing questions",
            done_template="admin/annotations/study/_upload_done.html",
            again_url=reverse("admin:annotations_study_upload"),
            breadcrumbs_template="admin/annotations/study/_upload_breadcrumbs.html",
            notes=self._upload_notes(upload),
        )
        template = "admin/upload_progress.html"  # shared with the vote files' (vote_imports/admin.py)
        return render(request, f"{template}#progress" if request.htmx else template, context)

    @staticmethod
    def _upload_notes(upload: uploads.Upload) -> list[str]:
        """What the preview said the import changes (a lowered target), for the page that shows
        the import done."""
        report = uploads.study_upload_report(upload=upload)
        return report.preview.notes if report.preview else []

    @admin.display(description="most items one rater can get")
    def most_items_per_rater(self, obj: Study) -> int | str:
        """The cap on the target: one item per question, plus the attention checks' cadence."""
        return obj.most_items_per_rater() if obj.pk else "–"

    def get_queryset(self, request: HttpRequest):
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_questions=_count(Question.objects.filter(study=OuterRef("pk"), is_gold=False)),
                n_items=_count(ComparisonItem.objects.filter(study=OuterRef("pk"))),
                n_raters=_count(Rater.objects.filter(study=OuterRef("pk"))),
                n_votes=_count(Vote.objects.filter(item__study=OuterRef("pk"))),
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

    @admin.display(description="votes", ordering="n_votes")
    def vote_count(self, obj: Study) -> int:
        return obj.n_votes

    @admin.display(description="study", ordering="title")
    def study(self, obj: Study) -> str:
        return format_html('{}<br><span class="quiet">{}</span>', obj.title, obj.slug)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Study) -> str:
        return timezone.localdate(obj.created_at).isoformat()

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


class AnswerInline(admin.StackedInline):
    form = AnswerForm
    model = Answer
    fk_name = "question"
    extra = 0
    fields = (
        "external_id",
        "text",
        "derived_from",
        "kind",
        "review_status",
        "inserted_errors",
        "provenance",
        "lengths",
    )
    readonly_fields = ("lengths",)
    show_change_link = True

    @admin.display(description="lengths")
    def lengths(self, obj: Answer) -> str:
        return f"{obj.len_words} words, {obj.len_chars} chars, {obj.len_bpe if obj.len_bpe is not None else '–'} BPE"

    def get_formset(self, request: HttpRequest, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        limit_answer_choices(formset.form, obj)
        return formset


class ItemInline(admin.TabularInline):
    """A question's items on its page, where the answer known to be better is set (accuracy
    against it on the dashboard): on the control item for the question, whose perturbed items
    inherit it, or on one item by hand. Items themselves are made with the question or by the
    perturbation pages."""

    model = ComparisonItem
    fk_name = "question"
    fields = ("group_name", "answer_a1", "answer_a2", "gold_label")
    readonly_fields = ("group_name", "answer_a1", "answer_a2")
    extra = 0
    can_delete = False
    verbose_name = "comparison item"
    verbose_name_plural = (
        "Comparison items (which answer is better: set it on the control item, and the perturbed items inherit it)"
    )

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="group")
    def group_name(self, obj: ComparisonItem) -> str:
        return obj.group


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    """A new question is added with its two answers in one form, and gets its control item;
    afterwards its answers (and hand-made variants) are edited below it."""

    formfield_overrides = {models.TextField: {"max_length": MAX_TEXT_CHARS}}
    list_display = ("external_id", "short_text", "bloom_level", "study", "is_gold")
    list_filter = ("study", "bloom_level", "is_gold")
    search_fields = ("external_id", "text")
    inlines = [AnswerInline, ItemInline]
    list_select_related = ("study",)

    def get_form(self, request: HttpRequest, obj=None, change: bool = False, **kwargs):
        if obj is None:
            kwargs["form"] = QuestionCreateForm
            kwargs["fields"] = None  # the form's own Meta.fields, plus its two answers
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj=None):
        if obj is None:
            return [
                (None, {"fields": ["study", "external_id", "bloom_level", "text", "is_gold"]}),
                ("The two answers compared", {"fields": ["answer_a1", "answer_a2", "gold_label"]}),
            ]
        return super().get_fieldsets(request, obj)

    def get_inlines(self, request: HttpRequest, obj=None):
        return self.inlines if obj is not None else []

    def save_formset(self, request: HttpRequest, form, formset, change: bool) -> None:
        """A new better answer on the control item is the question's: its perturbed items that
        still had the old one inherit it (those set by hand keep theirs)."""
        items = formset.forms if formset.model is ComparisonItem else []
        changed = [
            (f.instance, f.initial.get("gold_label", ""))
            for f in items
            if f.instance.kind_id is None and "gold_label" in f.changed_data
        ]
        super().save_formset(request, form, formset, change)
        for control, old in changed:
            followed = question_better_answer_follow(control=control, old=old)
            if followed:
                messages.info(
                    request, f"{followed} perturbed item(s) of {control.question} now have its better answer."
                )

    def save_model(self, request: HttpRequest, obj: Question, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if not change:
            data = form.cleaned_data
            question_answers_create(
                question=obj, a1=data["answer_a1"], a2=data["answer_a2"], gold_label=data["gold_label"]
            )

    def response_add(self, request: HttpRequest, obj: Question, post_url_continue=None) -> HttpResponse:
        response = super().response_add(request, obj, post_url_continue)
        if "_addanother" in request.POST:
            # The next question is most likely for the same study.
            return HttpResponseRedirect(f"{reverse('admin:annotations_question_add')}?study={obj.study_id}")
        return response

    @admin.display(description="question")
    def short_text(self, obj: Question) -> str:
        return _short(obj.text)


@admin.register(Answer)
class AnswerAdmin(admin.ModelAdmin):
    form = AnswerForm
    list_display = (
        "external_id",
        "question",
        "kind",
        "derived_from",
        "review_status",
        "len_words",
        "len_chars",
        "len_bpe",
    )
    list_filter = ("question__study", "kind", "review_status")
    search_fields = ("external_id", "text", "question__external_id")
    readonly_fields = ("len_words", "len_chars", "len_bpe", "created_at")
    raw_id_fields = ("question",)
    list_select_related = ("question", "kind", "derived_from")

    def get_form(self, request: HttpRequest, obj=None, change: bool = False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        # On the add page the question is not known yet: variants are added from their question's page.
        limit_answer_choices(form, obj.question if obj is not None else None)
        return form


@admin.register(ComparisonItem)
class ComparisonItemAdmin(admin.ModelAdmin):
    # Votes counted per row shown (a subquery on the vote's item index), not grouped over every
    # item's votes before the page is cut: 2.5 s with 100k votes on PostgreSQL.
    list_display = ("__str__", "study", "group_name", "answer_a1", "answer_a2", "vote_count")
    list_filter = ("study", "kind", "question__is_gold", "question__bloom_level")
    search_fields = ("question__external_id", "question__text")
    raw_id_fields = ("question", "answer_a1", "answer_a2")
    list_select_related = ("study", "question", "kind", "answer_a1", "answer_a2")

    def get_queryset(self, request: HttpRequest):
        return super().get_queryset(request).annotate(n_votes=_count(Vote.objects.filter(item=OuterRef("pk"))))

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
    list_display = (
        "participant_id",
        "study",
        "source",
        "target",
        "vote_count",
        "gold",
        "flagged",
        "flag_reason",
        "finished_at",
        "completion_code",
        "last_seen_at",
    )
    list_filter = ("study", "source", "flagged", ("finished_at", admin.EmptyFieldListFilter))
    search_fields = ("participant_id", "completion_code")
    readonly_fields = (
        "created_at",
        "last_seen_at",
        "consent_at",
        "gold_seen",
        "gold_correct",
        "finished_at",
        "completion_code",
    )
    list_select_related = ("study",)
    actions = ["flag", "unflag"]

    def get_queryset(self, request: HttpRequest):
        # Per row shown, as for items (1.3 s grouped over 100k votes).
        return super().get_queryset(request).annotate(n_votes=_count(Vote.objects.filter(rater=OuterRef("pk"))))

    @admin.display(description="votes", ordering="n_votes")
    def vote_count(self, obj: Rater) -> int:
        return obj.n_votes

    @admin.display(description="attention checks")
    def gold(self, obj: Rater) -> str:
        return f"{obj.gold_correct}/{obj.gold_seen}" if obj.gold_seen else "–"

    @admin.action(description="Flag selected raters (excludable at analysis time)")
    def flag(self, request: HttpRequest, queryset) -> None:
        _flag(queryset, flagged=True, reason="flagged by staff")

    @admin.action(description="Clear the flag of selected raters")
    def unflag(self, request: HttpRequest, queryset) -> None:
        _flag(queryset, flagged=False, reason="")


@transaction.atomic
def _flag(raters, *, flagged: bool, reason: str) -> None:
    """(Un)flag raters; an update() sends no signal: their studies' reports are moved on here."""
    raters.update(flagged=flagged, flag_reason=reason)
    Study.objects.filter(pk__in=raters.values("study_id")).data_changed()


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
        "prompt",
        "received_at",
    )
    list_filter = (
        "item__study",
        "judge__kind",
        "judge",
        "run_id",
        "choice",
        "shown_first",
        "not_familiar",
        "parse_status",
        "item__kind",
    )
    search_fields = ("rater__participant_id", "item__question__external_id", "raw_output")
    date_hierarchy = "received_at"
    list_select_related = ("item__question", "item__kind", "judge", "rater")
    list_per_page = 100

    def get_readonly_fields(self, request: HttpRequest, obj=None):
        return [*(field.name for field in self.model._meta.fields), "prompt"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.method in ("GET", "HEAD") and super().has_view_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="prompt")
    def prompt(self, obj: Vote) -> str:
        """A link to the messages a judge run's vote was given (the judges app's page; none for
        people's or imported votes, or where the judges app is not installed)."""
        if obj.run_id is None or not obj.label_scheme:
            return "–"
        try:
            url = reverse("admin:judges_judgerun_vote_prompt", args=[obj.run_id, obj.pk])
        except NoReverseMatch:
            return "–"
        return format_html('<a href="{}">the prompt</a>', url)

    @admin.display(description="on arrival")
    def assignment(self, obj: Vote) -> str:
        """How the rater app judged a human vote when it arrived (counted toward the item's quota,
        too fast, late). Whether the analysis counts it is decided there (the votes CSV's
        ``counted`` column), which also leaves out flagged raters' votes."""
        info = (obj.meta or {}).get("assignment")
        if not info:
            return "–"
        return ", ".join(key.replace("_", " ") for key, value in info.items() if value is True) or "not counted"


@admin.register(Lease)
class LeaseAdmin(admin.ModelAdmin):
    """Items handed to raters: who holds what, in which order, until when."""

    list_display = (
        "id",
        "study",
        "rater",
        "item",
        "shown_first",
        "is_gold",
        "created_at",
        "expires_at",
        "voted_at",
        "released_at",
    )
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
