"""Importing votes collected elsewhere from the admin: the page behind the Study admin's "Import
votes" action. The file is kept (vote_imports/uploads.py) and imported by the task worker through the
service `manage.py import_votes` calls (as the API's uploads are); a progress page follows it."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from annotations.admin import StudyAdmin
from annotations.uploads import UploadError
from biasstudy.permissions import model_permissions_required
from biasstudy.queue import QueueUnavailable
from vote_imports import importers, uploads, vote_import
from vote_imports.tasks import votes_upload_import_queue


class VotesImportForm(forms.Form):
    file = forms.FileField(
        help_text="A vote file (docs/VOTE_FILES.md); for mtbench, prd and llmbar a zip of the data set's folder."
    )
    format = forms.ChoiceField(
        choices=[(f, f) for f in vote_import.UPLOAD_FORMATS],
        help_text="csv: one file. MT-bench, PRD and LLMBar read their data set's folder: upload it zipped.",
    )
    study = forms.SlugField(max_length=80, help_text="Slug of the study the votes go into.")
    create = forms.BooleanField(required=False, label="Create the study if there is none by that slug")
    title = forms.CharField(required=False, max_length=200, help_text="Title of a study made here (default: its slug).")
    add_to_collecting = forms.BooleanField(
        required=False,
        label="Add items to a collecting study",
        help_text="Without it, a file that would add items (pairs) to a study collecting votes from people is refused.",
    )
    for_raters = forms.BooleanField(
        required=False,
        label="Hand the items this import adds to raters",
        help_text="Without it, new items are for the file's judges and LLM judges only; raters are never shown them.",
    )

    def clean_file(self):
        file = self.cleaned_data["file"]
        if file.size > settings.API_IMPORT_MAX_MB * 1024 * 1024:
            raise forms.ValidationError(f"larger than the {settings.API_IMPORT_MAX_MB} MB an upload may be")
        return file


@require_http_methods(["GET", "POST"])
@staff_member_required
@model_permissions_required("annotations.add_vote")
def votes_import(request: HttpRequest) -> HttpResponse:
    """The file and the study; the task worker imports it, the progress page follows. Making
    the study (`create`) needs the permission to add studies too, as in the API; new questions,
    answers, items, judges and raters need theirs (checked by the import: vote_import.CREATES)."""
    form = VotesImportForm(request.POST or None, request.FILES or None, initial={"study": request.GET.get("study", "")})
    status = 200
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if data["create"] and not request.user.has_perm("annotations.add_study"):
            raise PermissionDenied
        try:
            upload = uploads.votes_upload_store(
                chunks=data["file"].chunks(),
                name=data["file"].name,
                fmt=data["format"],
                slug=data["study"],
                user=request.user,
                create=data["create"],
                title=data["title"],
                add_to_collecting=data["add_to_collecting"],
                for_raters=data["for_raters"],
            )
        except vote_import.StudyNotFound as exc:
            form.add_error("study", str(exc))
        except (importers.ImportProblem, UploadError) as exc:
            form.add_error("file", f"nothing was imported: {exc}")
        else:
            try:
                votes_upload_import_queue(upload=upload)
            except QueueUnavailable as exc:
                form.add_error(None, str(exc))
                status = 503
            else:
                return HttpResponseRedirect(reverse("vote_imports:votes-import-progress", args=[upload.token]))
    context = {**admin.site.each_context(request), "form": form, "title": "Import votes"}
    return render(
        request, "vote_imports/votes_import.html", context, status=400 if form.errors and status == 200 else status
    )


@require_http_methods(["GET"])
@staff_member_required
@model_permissions_required("annotations.add_vote")  # following one's own import, as in the API
def votes_import_progress(request: HttpRequest, token: str) -> HttpResponse:
    """The task worker's progress, polled by htmx: its steps, then the counts or every problem."""
    try:
        upload = uploads.votes_upload_get(token=token)
    except UploadError as exc:
        messages.error(request, str(exc))
        return HttpResponseRedirect(reverse("vote_imports:votes-import"))
    progress = uploads.votes_upload_progress(upload=upload)
    context = {
        **admin.site.each_context(request),
        "title": "Import votes",
        "upload": upload,
        "progress": progress,
        "counts": vote_import.votes_import_counts(progress.get("counts", {})),
        "ignored_columns": progress.get("counts", {}).get(vote_import.IGNORED_COLUMNS, {}),
        "warnings": progress.get("counts", {}).get(vote_import.WARNINGS, []),
        "steps": vote_import.VOTES_IMPORT_STEPS,
        "unit": "steps done",
        "running_title": "importing",
        "done_template": "vote_imports/_votes_import_done.html",
        "again_url": f"{reverse('vote_imports:votes-import')}?study={upload.slug}",
        "breadcrumbs_template": "vote_imports/_votes_import_breadcrumbs.html",
    }
    template = "admin/upload_progress.html"  # the study upload's page (annotations/admin.py)
    return render(request, f"{template}#progress" if request.htmx else template, context)


@admin.action(description="Import votes into the selected study")
def import_votes(modeladmin, request: HttpRequest, queryset) -> HttpResponseRedirect:
    study = queryset.order_by("pk").first()
    return HttpResponseRedirect(f"{reverse('vote_imports:votes-import')}?study={study.slug if study else ''}")


# The study's admin belongs to the core app, which knows nothing of the vote import: its action is added here.
StudyAdmin.actions = [*StudyAdmin.actions, import_votes]
