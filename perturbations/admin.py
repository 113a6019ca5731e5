"""Admin for perturbations: kinds (with their editable model prompt), the per-study generate and
review pages, and a list of perturbed answers with bulk actions. Everything calls services.py.
"""

from __future__ import annotations

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.views.decorators.http import require_http_methods
from django_htmx.http import HttpResponseClientRefresh

from annotations.admin import StudyAdmin
from annotations.models import Answer, PerturbationKind, Study
from biasstudy.queue import QueueUnavailable
from judges.services import llm_judge_demo_create
from perturbations.forms import ContextEditForm, EditForm, GenerateForm, KindForm, ReviewFilterForm, ReviewForm
from perturbations.models import AnswerRevision, GenerationReport, PerturbationStudy, Variant
from perturbations.services import (
    PerturbationError,
    answer_context_edit,
    answer_edit,
    answers_checks_run,
    answers_review,
    kind_changes_context,
    kind_new_group,
    perturbation_generate,
    variant_checks,
)
from perturbations.tasks import perturbation_generate_queue

REVIEW_PAGE_SIZE = 20


@admin.register(PerturbationKind)
class PerturbationKindAdmin(admin.ModelAdmin):
    form = KindForm
    list_display = ("slug", "name", "semantics", "steps", "builtin", "study")
    list_filter = ("semantics", "builtin")
    search_fields = ("slug", "name")
    fields = ("slug", "name", "semantics", "steps", "study", "description", "model_prompt", "builtin")

    def get_readonly_fields(self, request, obj=None):
        # A built-in kind's identity is code (kinds.py); its prompt and wording stay editable.
        if obj is not None and obj.builtin:
            return ("slug", "semantics", "steps", "study", "builtin")
        return ("builtin",)

    def has_delete_permission(self, request, obj=None) -> bool:
        return not (obj is not None and obj.builtin) and super().has_delete_permission(request, obj)


def _can_review(request: HttpRequest) -> bool:
    return request.user.has_perm(Variant.REVIEW_PERMISSION)


@admin.action(description="Generate perturbations…")
def generate_perturbations(modeladmin, request: HttpRequest, queryset: QuerySet) -> HttpResponseRedirect:
    """Open the generate form for the selected studies (usable from any Study admin)."""
    ids = ",".join(str(pk) for pk in queryset.values_list("pk", flat=True))
    return HttpResponseRedirect(f"{reverse('admin:perturbations_generate')}?ids={ids}")


# The study's admin belongs to the core app, which knows nothing of perturbations: the action
# that starts them is added from here.
StudyAdmin.actions = [*StudyAdmin.actions, generate_perturbations]


@admin.register(PerturbationStudy)
class PerturbationStudyAdmin(admin.ModelAdmin):
    """Studies as the perturbation workflow sees them: generate, then review."""

    list_display = ("title", "slug", "pending", "approved", "rejected", "review_link")
    formfield_overrides = StudyAdmin.formfield_overrides  # the same study, and its URL field
    actions = [generate_perturbations]
    search_fields = ("title", "slug")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_view_permission(self, request, obj=None) -> bool:
        return request.user.has_perm(Variant.VIEW_PERMISSION) or _can_review(request)

    def get_queryset(self, request):
        variants = "questions__answers"
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_pending=Count(
                    variants,
                    filter=Q(**{f"{variants}__review_status": "pending", f"{variants}__derived_from__isnull": False}),
                ),
                n_approved=Count(
                    variants,
                    filter=Q(**{f"{variants}__review_status": "approved", f"{variants}__derived_from__isnull": False}),
                ),
                n_rejected=Count(
                    variants,
                    filter=Q(**{f"{variants}__review_status": "rejected", f"{variants}__derived_from__isnull": False}),
                ),
            )
        )

    @admin.display(ordering="n_pending")
    def pending(self, obj) -> int:
        return obj.n_pending

    @admin.display(ordering="n_approved")
    def approved(self, obj) -> int:
        return obj.n_approved

    @admin.display(ordering="n_rejected")
    def rejected(self, obj) -> int:
        return obj.n_rejected

    @admin.display(description="review")
    def review_link(self, obj) -> str:
        return format_html('<a href="{}">Review variants</a>', reverse("admin:perturbations_review", args=[obj.pk]))

    def get_urls(self):
        view = self.admin_site.admin_view
        return [
            path("generate/", view(self.generate_view), name="perturbations_generate"),
            path("<int:study_id>/review/", view(self.review_view), name="perturbations_review"),
            path("<int:study_id>/review/<int:answer_id>/edit/", view(self.edit_view), name="perturbations_edit"),
            *super().get_urls(),
        ]

    def _context(self, request: HttpRequest, **extra) -> dict:
        return {**self.admin_site.each_context(request), "opts": self.model._meta, **extra}

    # --- generate ------------------------------------------------------------------------------

    @method_decorator(require_http_methods(["GET", "POST"]))
    def generate_view(self, request: HttpRequest) -> HttpResponse:
        if not _can_review(request):
            raise PermissionDenied
        raw_ids = request.GET.get("ids", "")
        if not all(part.isdigit() for part in raw_ids.split(",")):
            messages.error(request, "Choose studies from the list first.")
            return HttpResponseRedirect(reverse("admin:perturbations_perturbationstudy_changelist"))
        studies = list(Study.objects.filter(pk__in=[int(p) for p in raw_ids.split(",")]).order_by("title"))
        if not studies:
            messages.error(request, "Choose studies from the list first.")
            return HttpResponseRedirect(reverse("admin:perturbations_perturbationstudy_changelist"))
        form = GenerateForm(request.POST or None, studies=studies, default_generator=llm_judge_demo_create())
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            for study in studies:
                # A new group is a kind of the study's own: its items start from zero votes.
                kind = kind_new_group(study=study, kind=data["kind"]) if data["new_group"] else data["kind"]
                if data["method"] == "model":
                    # A model rewrites one answer at a time: queue the study instead of holding the request.
                    try:
                        perturbation_generate_queue(
                            study=study,
                            kind=kind.slug,
                            seed=data["seed"],
                            of=data["of"],
                            user=request.user,
                            generator=data["generator"],
                            constrain_format=data["constrain_format"],
                        )
                    except QueueUnavailable as exc:
                        messages.error(request, f"{study.title}: {exc}")
                        continue
                    messages.info(
                        request,
                        f"{study.title}: queued model-based {kind.slug} variants by {data['generator']}; they appear "
                        "on the review page as pending when done, with every question that failed and why.",
                    )
                    continue
                try:
                    result = perturbation_generate(
                        study=study,
                        kind=kind,
                        seed=data["seed"],
                        method=data["method"],
                        of=data["of"],
                        user=request.user,
                    )
                except PerturbationError as exc:
                    messages.error(request, f"{study.title}: {exc}")
                    continue
                messages.success(
                    request,
                    f"{study.title}: created {len(result.created)} pending variant(s) of {kind.slug}, "
                    f"{len(result.flagged)} with warnings; skipped {len(result.skipped)} existing"
                    + (f"; left out {len(result.blocked)} whose item already has votes" if result.blocked else "")
                    + (f"; {len(result.failed)} failed (see the review page)" if result.failed else "")
                    + ".",
                )
            if len(studies) == 1:
                return HttpResponseRedirect(reverse("admin:perturbations_review", args=[studies[0].pk]))
            return HttpResponseRedirect(reverse("admin:perturbations_perturbationstudy_changelist"))
        return render(
            request,
            "admin/perturbations/generate.html",
            self._context(
                request,
                title="Generate perturbations",
                form=form,
                studies=studies,
                vote_summaries=form.vote_summaries(),
            ),
        )

    # --- review --------------------------------------------------------------------------------

    @method_decorator(require_http_methods(["GET", "POST"]))
    def review_view(self, request: HttpRequest, study_id: int) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        study = get_object_or_404(Study, pk=study_id)
        if request.method == "POST":
            if not _can_review(request):
                raise PermissionDenied
            form = ReviewForm(request.POST, study=study)
            if form.is_valid():
                data = form.cleaned_data
                result = answers_review(
                    answers=data["answers"], decision=data["decision"], user=request.user, note=data["note"]
                )
                if result.done:
                    verb = "approved" if data["decision"] == "approve" else "rejected"
                    messages.success(
                        request, f"{verb} {len(result.done)}: {', '.join(a.external_id for a in result.done)}"
                    )
                for _answer, why in result.refused:
                    messages.error(request, why)
            else:
                for error in dict.fromkeys(e for errors in form.errors.values() for e in errors):
                    messages.error(request, error)
            return HttpResponseRedirect(request.get_full_path())

        running = list(GenerationReport.objects.filter(study=study, finished_at__isnull=True).order_by("created_at"))
        if request.htmx:  # the poll of a generation's progress
            if not running:  # it ended: the whole page, with the new variants and the report
                return HttpResponseClientRefresh()
            return render(request, "admin/perturbations/review.html#generation", {"running": running})
        filters = ReviewFilterForm(request.GET or None, study=study)
        variants = (
            Answer.objects.variants()
            .filter(question__study=study)
            .select_related("question__study", "kind", "derived_from")
            .order_by("question__external_id", "kind__slug", "external_id")
        )
        page_number = 1
        if filters.is_valid():
            data = filters.cleaned_data
            if data["status"]:
                variants = variants.filter(review_status=data["status"])
            if data["kind"]:
                variants = variants.filter(kind=data["kind"])
            if data["flagged"]:
                variants = variants.filter(checks__ok=False)
            page_number = data["page"] or 1
        page = Paginator(variants, REVIEW_PAGE_SIZE).get_page(page_number)
        by_status = dict(
            Answer.objects.variants()
            .filter(question__study=study)
            .order_by()
            .values_list("review_status")
            .annotate(n=Count("id"))
        )
        for variant in page:
            if not variant.checks:  # imported with its study: checked for this page only
                variant.checks = variant_checks(answer=variant)
        query = request.GET.copy()
        query.pop("page", None)
        return render(
            request,
            "admin/perturbations/review.html",
            self._context(
                request,
                title=f"Review perturbations: {study.title}",
                study=study,
                page=page,
                filters=filters,
                query=query.urlencode(),
                can_review=_can_review(request),
                status_counts=[(value, label, by_status.get(value, 0)) for value, label in Answer.Review.choices],
                n_variants=sum(by_status.values()),
                none_shown=_none_shown(filters),
                reports=GenerationReport.objects.filter(study=study, finished_at__isnull=False).select_related("user")[
                    :5
                ],
                running=running,
            ),
        )

    @method_decorator(require_http_methods(["GET", "POST"]))
    def edit_view(self, request: HttpRequest, study_id: int, answer_id: int) -> HttpResponse:
        if not _can_review(request):
            raise PermissionDenied
        answer = get_object_or_404(
            Answer.objects.variants().select_related("question", "kind", "derived_from"),
            pk=answer_id,
            question__study_id=study_id,
        )
        # A context kind's variant keeps the original's text: its context is what is edited.
        field = "context" if answer.context or kind_changes_context(answer.kind) else "text"
        edit_form, edit = (ContextEditForm, answer_context_edit) if field == "context" else (EditForm, answer_edit)
        form = edit_form(request.POST or None, initial={field: getattr(answer, field)})
        if request.method == "POST" and form.is_valid():
            try:
                edit(
                    answer=answer,
                    user=request.user,
                    note=form.cleaned_data["note"],
                    **{field: form.cleaned_data[field]},
                )
            except PerturbationError as exc:
                form.add_error(field, str(exc))
            else:
                messages.success(request, f"Saved {answer.external_id}; its checks were run again.")
                return HttpResponseRedirect(reverse("admin:perturbations_review", args=[study_id]))
        revisions = AnswerRevision.objects.filter(answer=answer).select_related("user").order_by("-created_at")
        return render(
            request,
            "admin/perturbations/edit.html",
            self._context(request, title=f"Edit {answer.external_id}", answer=answer, form=form, revisions=revisions),
        )


def _none_shown(filters: ReviewFilterForm) -> str:
    """What the review page says when its filters leave nothing: "No pending variants of kind
    reference with warnings", not "No variants yet" when the study has some."""
    data = filters.cleaned_data if filters.is_valid() else {}
    words = ["No"]
    if data.get("status"):
        words.append(str(Answer.Review(data["status"]).label).split()[0].lower())
    words.append("variants")
    if data.get("kind"):
        words.append(f"of kind {data['kind'].slug}")
    if data.get("flagged"):
        words.append("with warnings")
    return " ".join(words)


@admin.register(Variant)
class VariantAdmin(admin.ModelAdmin):
    """All perturbed answers, with bulk approve / reject / re-check."""

    list_display = ("external_id", "question", "kind", "review_status", "warnings", "created_at")
    list_filter = ("question__study", "kind", "review_status")
    search_fields = ("external_id", "question__external_id", "text")
    actions = ["approve", "reject", "rerun_checks"]
    list_select_related = ("question", "kind")
    readonly_fields = (
        "question",
        "external_id",
        "derived_from",
        "kind",
        "review_status",
        "provenance",
        "inserted_errors",
        "checks",
        "text",
    )
    exclude = ("len_words", "len_chars", "len_bpe")

    def get_queryset(self, request):
        return super().get_queryset(request).filter(derived_from__isnull=False)

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    @admin.display(description="warnings")
    def warnings(self, obj) -> int:
        return len(obj.checks.get("warnings", []))

    def _decide(self, request: HttpRequest, queryset: QuerySet, decision: str) -> None:
        result = answers_review(answers=list(queryset), decision=decision, user=request.user)
        if result.done:
            self.message_user(request, f"{decision}d {len(result.done)} variant(s).", messages.SUCCESS)
        for _answer, why in result.refused:
            self.message_user(request, why, messages.ERROR)

    @admin.action(description="Approve selected variants (creates their items)", permissions=["change"])
    def approve(self, request, queryset) -> None:
        self._decide(request, queryset, "approve")

    @admin.action(description="Reject selected variants", permissions=["change"])
    def reject(self, request, queryset) -> None:
        self._decide(request, queryset, "reject")

    @admin.action(description="Run the checks again", permissions=["change"])
    def rerun_checks(self, request, queryset) -> None:
        count = answers_checks_run(answers=queryset.select_related("question__study", "kind", "derived_from"))
        self.message_user(request, f"checked {count} variant(s) again.", messages.SUCCESS)
