"""The study's Prolific page, linked from its admin page: the draft, its cost, publish / pause /
resume / stop, sync, approve and reject (one, or all that our quality rules pass or fail), the
bonus previewed with its total, then paid. Every button posts a form to this one view, which
calls prolific.services and shows Prolific's errors as Prolific gives them.

Staff with the permission to change studies and to see raters (the page shows Prolific's
participant ids, as the payment file does)."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotations.models import Study
from biasstudy.permissions import model_permissions_required
from prolific import services, tasks
from prolific.client import ProlificError
from prolific.forms import ActionForm, BonusForm, DraftForm, RejectForm, ReviewForm, TransitionForm
from prolific.models import BonusBatch, ProlificStudy

PERMISSIONS = ("annotations.change_study", "annotations.view_rater")


@require_http_methods(["GET", "POST"])
@staff_member_required
@model_permissions_required(*PERMISSIONS)
def prolific_page(request: HttpRequest, pk: int) -> HttpResponse:
    study = get_object_or_404(Study, pk=pk)
    link = ProlificStudy.objects.filter(study=study).first()
    forms = {
        "draft": DraftForm(initial=services.prolific_draft_defaults(study=study)) if link is None else None,
        "reject": RejectForm(),
        "bonus": BonusForm(request.GET if "per_vote" in request.GET or "per_rater" in request.GET else None),
    }
    if request.method == "POST":
        answer = _post(request, study, forms)
        if answer is not None:
            return answer
    return _render(request, study, forms, status=400 if request.method == "POST" else 200)


def _post(request: HttpRequest, study: Study, forms: dict) -> HttpResponse | None:
    """Do what the button says; a redirect back when done or refused by Prolific (its message
    shown), None to show the page again with the form's errors."""
    action = ActionForm(request.POST)
    if not action.is_valid():
        return None
    what = action.cleaned_data["action"]
    form = {
        "create": DraftForm,
        "transition": TransitionForm,
        "approve": ReviewForm,
        "reject": RejectForm,
        "pay": BonusForm,
    }.get(what)
    bound = form(request.POST) if form else None
    if bound is not None and not bound.is_valid():
        forms[{"create": "draft", "pay": "bonus"}.get(what, "reject" if what == "reject" else "action")] = bound
        messages.error(request, f"Nothing was sent to Prolific: {_errors(bound)}")
        return None
    data = bound.cleaned_data if bound is not None else {}
    try:
        done = _do(request, study, what, data)
    except ProlificError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done)
    return HttpResponseRedirect(reverse("prolific:study", args=[study.pk]))


def _do(request: HttpRequest, study: Study, what: str, data: dict) -> str:
    user = request.user
    if what == "create":
        landing = request.build_absolute_uri(reverse("annotations:landing", args=[study.slug]))
        url = study.entry_links(landing)["prolific"]
        link = services.prolific_study_create(study=study, user=user, study_url=url, **data)
        return f"Draft study {link.prolific_id} created on Prolific."
    if what == "cost":
        return f"Prolific's cost calculator: {services.prolific_study_cost(study=study, user=user)} in all, fees and VAT included."  # noqa: E501
    if what == "transition":
        link = services.prolific_study_transition(study=study, user=user, action=data["study_action"])
        if link.running:
            tasks.prolific_sync_schedule(study=study)
        return f"Prolific study now {link.status}."
    if what == "sync":
        counts = services.prolific_submissions_sync(study=study, user=user)
        return f"{counts['submissions']} submissions in step; {counts['freed']} raters' items freed."
    ids = [data["submission"]] if data.get("submission") else None
    if what == "approve":
        n = services.prolific_approve(study=study, user=user, submission_ids=ids, suggested=data["suggested"])
        return f"{n} submission{'s' if n != 1 else ''} approved."
    if what == "reject":
        n = services.prolific_reject(
            study=study,
            user=user,
            submission_ids=ids,
            suggested=data["suggested"],
            category=data["category"],
            message=data["message"],
        )
        return f"{n} submission{'s' if n != 1 else ''} rejected."
    batch = services.prolific_bonuses_pay(
        study=study, user=user, per_vote=data["per_vote"], per_rater=data["per_rater"]
    )
    if batch is None:
        return "Nothing to pay: every rater's bonus has been asked for already (none was paid twice)."
    return f"Bonuses {batch.get_state_display()}: {batch.bonuses.count()} raters."


def _errors(form) -> str:
    return "; ".join(f"{name if name != '__all__' else 'form'}: {' '.join(errs)}" for name, errs in form.errors.items())


def _render(request: HttpRequest, study: Study, forms: dict, *, status: int) -> HttpResponse:
    link = ProlificStudy.objects.filter(study=study).first()
    preview = None
    bonus = forms["bonus"]
    if link is not None and bonus.is_bound and bonus.is_valid():
        preview = services.prolific_bonuses_preview(
            study=study, per_vote=bonus.cleaned_data["per_vote"], per_rater=bonus.cleaned_data["per_rater"]
        )
    context = {
        **admin.site.each_context(request),
        "title": f"Prolific — {study.title}",
        "study": study,
        "opts": Study._meta,
        "link": link,
        "forms": forms,
        "rows": services.prolific_review_rows(study=study) if link else [],
        "preview": preview,
        "batches": BonusBatch.objects.filter(prolific_study=link)[:10] if link else [],
        "calls": study.prolific_calls.select_related("user")[:20],
        "actions": services.STUDY_ACTIONS,
    }
    return render(request, "prolific/study.html", context, status=status)
