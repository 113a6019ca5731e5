"""Admin for LLM judges: their configuration (with "test connection"), starting runs, and the
live run page (htmx polling) with cancel and resume. Every action goes through judges.services.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.apps import apps as django_apps
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRefresh

from annotations.models import ComparisonItem, Judge, Shown, Study, Vote
from biasstudy.limits import VOTES_PER_ITEM_MAX
from biasstudy.queue import QueueUnavailable
from judges import prompts
from judges.models import CachedResponse, JudgeRun, LLMJudge
from judges.plan import LABEL_ORDERS
from judges.runner import vote_messages
from judges.services import (
    JudgeRunError,
    judge_run_cancel,
    judge_run_resume,
    judge_run_start,
    llm_judge_create,
    llm_judge_test_connection,
)

CONFIG_FIELDS = [
    "backend", "model", "base_url", "api_key_env", "temperature", "max_tokens", "timeout", "seed", "prompt_style",
    "system_template", "user_template", "label_schemes", "family", "votes_per_item", "concurrency", "rpm_limit", "max_retries",
    "retry_base_seconds", "invalid_retries", "logprobs", "constrain_vote", "price_in_per_mtok", "price_out_per_mtok",
]  # fmt: skip


class LLMJudgeForm(forms.ModelForm):
    name = forms.CharField(max_length=120, help_text="How the judge appears in tables and exports.")
    # Boxes to tick, not a JSON list to type: the schemes are a fixed set (judges.prompts).
    label_schemes = forms.MultipleChoiceField(
        choices=[(slug, f"{slug}: {s.first} / {s.second} / {s.tie}") for slug, s in prompts.LABEL_SCHEMES.items()],
        widget=forms.CheckboxSelectMultiple,
        initial=["answer12"],
        help_text="How the two answers and a tie are named; tick several to permute them and probe label bias.",
    )
    base_url = forms.URLField(
        max_length=300, required=False, assume_scheme="http", help_text=LLMJudge._meta.get_field("base_url").help_text
    )

    class Meta:
        model = LLMJudge
        fields = CONFIG_FIELDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["name"].initial = self.instance.judge.name

    def _template(self, field: str) -> str:
        # Browsers send a textarea's lines ending in CR LF; the prompt a model sees must be the one
        # configured (and the same as a judge made by the command), so lines end in LF.
        return self.cleaned_data[field].replace("\r\n", "\n")

    def clean_system_template(self) -> str:
        return self._template("system_template")

    def clean_user_template(self) -> str:
        return self._template("user_template")

    def clean_name(self) -> str:
        name = self.cleaned_data["name"]
        others = Judge.objects.filter(name=name, study__isnull=True)
        if self.instance.pk:
            others = others.exclude(pk=self.instance.judge_id)
        if others.exists():
            raise ValidationError(f"A judge named {name!r} already exists.")
        return name


class PromptPreviewForm(forms.Form):
    """Which prompt to show: an item of a study, in one display order, label scheme and label
    order (a run's plan gives each vote one of each, judges.plan)."""

    study = forms.ModelChoiceField(queryset=Study.objects.order_by("title"), help_text="Its items are listed below.")
    item = forms.ModelChoiceField(queryset=ComparisonItem.objects.none(), help_text="question / group")
    shown_first = forms.ChoiceField(label="Display order", choices=Shown.choices, initial=Shown.A1_FIRST)
    label_order = forms.ChoiceField(
        choices=[
            (LABEL_ORDERS[0], "the answer shown first under the first label"),
            (LABEL_ORDERS[1], "the answer shown first under the second label"),
        ],
        initial=LABEL_ORDERS[0],
    )
    scheme = forms.ChoiceField(label="Label scheme", choices=())

    def __init__(self, data: QueryDict, *, judge: LLMJudge) -> None:
        data = data.copy()
        chosen = data.get("study", "")
        if not chosen:  # the page opens on the latest study
            study = Study.objects.order_by("-created_at").first()
        else:  # a study that is not one is the field's error
            study = Study.objects.filter(pk=chosen).first() if chosen.isdigit() else None
        items = ComparisonItem.objects.none()
        if study is not None:
            items = study.items.select_related("question", "kind").order_by("question__external_id", "kind__slug")
            data.setdefault("study", str(study.pk))
            chosen_item = data.get("item", "")
            if not (chosen_item.isdigit() and items.filter(pk=chosen_item).exists()):  # another study's: its first
                data["item"] = str(next(iter(items.values_list("pk", flat=True)[:1]), ""))
        for name in ("shown_first", "label_order"):
            data.setdefault(name, self.base_fields[name].initial)
        data.setdefault("scheme", judge.label_schemes[0] if judge.label_schemes else "")
        super().__init__(data)
        self.fields["item"].queryset = items
        self.fields["scheme"].choices = [(slug, slug) for slug in judge.label_schemes]


@admin.register(LLMJudge)
class LLMJudgeAdmin(admin.ModelAdmin):
    form = LLMJudgeForm
    # The form's own base_url field replaces the model's, but the model's is made first, and
    # warned without a scheme (RemovedInDjango60Warning): the same as the form's.
    formfield_overrides = {models.URLField: {"assume_scheme": "http"}}
    list_display = ["__str__", "backend", "model", "prompt_style", "votes_per_item", "concurrency"]
    list_filter = ["backend", "prompt_style"]
    search_fields = ["judge__name", "model"]
    actions = ["start_run"]
    change_form_template = "admin/judges/llmjudge/change_form.html"
    fieldsets = [
        (None, {"fields": ["name", "backend", "model", "base_url", "api_key_env"]}),
        ("Sampling", {"fields": ["temperature", "max_tokens", "seed", "logprobs", "constrain_vote"]}),
        ("Prompt", {"fields": ["prompt_style", "label_schemes", "system_template", "user_template", "family"]}),
        ("Votes and limits", {"fields": [
            "votes_per_item", "concurrency", "rpm_limit", "timeout", "max_retries", "retry_base_seconds",
            "invalid_retries",
        ]}),
        ("Prices (optional)", {"fields": ["price_in_per_mtok", "price_out_per_mtok"]}),
    ]  # fmt: skip

    def save_model(self, request: HttpRequest, obj: LLMJudge, form: LLMJudgeForm, change: bool) -> None:
        name = form.cleaned_data["name"]
        if change:
            obj.save()
            if obj.judge.name != name:
                obj.judge.name = name
                obj.judge.save(update_fields=["name"])  # its save moves the reports that name it on
            return
        # One code path creates a judge with its configuration: the service.
        created = llm_judge_create(name=name, **{field: getattr(obj, field) for field in CONFIG_FIELDS})
        obj.pk, obj.judge = created.pk, created.judge

    def get_urls(self):
        urls = [
            path(
                "<int:object_id>/test-connection/",
                self.admin_site.admin_view(require_POST(self.test_connection_view)),
                name="judges_llmjudge_test_connection",
            ),
            path(
                "<int:object_id>/prompt/",
                self.admin_site.admin_view(require_GET(self.prompt_view)),
                name="judges_llmjudge_prompt",
            ),
        ]
        return urls + super().get_urls()

    def prompt_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The exact messages the judge, as configured now, sends for the item chosen."""
        config = get_object_or_404(LLMJudge.objects.select_related("judge"), pk=object_id)
        if not self.has_view_or_change_permission(request, config):
            raise PermissionDenied
        form = PromptPreviewForm(request.GET, judge=config)
        prompt = None
        if form.is_valid():
            data = form.cleaned_data
            prompt = _prompt(config.snapshot(), data["item"], data["shown_first"], data["scheme"], data["label_order"])
        return _prompt_page(
            request,
            self,
            f"What {config} is sent",
            form=form,
            prompt=prompt,
            judge=config,
            status=200 if prompt else 400,
        )

    def test_connection_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        config = get_object_or_404(LLMJudge, pk=object_id)
        if not self.has_change_permission(request, config):
            raise PermissionDenied
        ok, message = llm_judge_test_connection(config=config)
        self.message_user(request, message, messages.SUCCESS if ok else messages.ERROR)
        return redirect("admin:judges_llmjudge_change", object_id)

    @admin.action(description="Start a run of the selected judge")
    def start_run(self, request: HttpRequest, queryset) -> HttpResponse | None:
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one judge to start a run.", messages.WARNING)
            return None
        return HttpResponseRedirect(f"{reverse('admin:judges_judgerun_add')}?judge={queryset.get().judge_id}")


class StartRunForm(forms.Form):
    study = forms.ModelChoiceField(queryset=Study.objects.all())
    judge = forms.ModelChoiceField(queryset=Judge.objects.filter(kind=Judge.Kind.LLM, llm_config__isnull=False))
    votes_per_item = forms.IntegerField(
        min_value=1, max_value=VOTES_PER_ITEM_MAX, required=False, help_text="Blank: the judge's own setting."
    )


def _start_initial(request: HttpRequest) -> dict:
    """The study and judge "Start a run" came from: named in the link (?study=, ?judge=) or, from
    the runs list filtered by them, in the admin's `_changelist_filters`."""
    filters = QueryDict(request.GET.get("_changelist_filters", ""))
    return {
        "study": request.GET.get("study") or filters.get("study__id__exact"),
        "judge": request.GET.get("judge") or filters.get("judge__id__exact"),
    }


class ResumeForm(forms.Form):
    retry_failed = forms.BooleanField(required=False)


@admin.register(JudgeRun)
class JudgeRunAdmin(admin.ModelAdmin):
    list_display = ["__str__", "study", "judge", "status", "total", "created_at", "finished_at"]
    list_filter = ["status", "judge"]
    list_select_related = ["study", "judge"]
    run_template = "admin/judges/judgerun/run.html"

    def has_delete_permission(self, request: HttpRequest, obj: JudgeRun | None = None) -> bool:
        return False  # a run's votes are never deleted with it

    def get_urls(self):
        def wrap(view, name):
            view = self.admin_site.admin_view(require_POST(view))
            return path(f"<int:object_id>/{name}/", view, name=f"judges_judgerun_{name}")

        prompt = path(
            "<int:object_id>/votes/<int:vote_id>/prompt/",
            self.admin_site.admin_view(require_GET(self.vote_prompt_view)),
            name="judges_judgerun_vote_prompt",
        )
        return [wrap(self.cancel_view, "cancel"), wrap(self.resume_view, "resume"), prompt] + super().get_urls()

    def vote_prompt_view(self, request: HttpRequest, object_id: int, vote_id: int) -> HttpResponse:
        """The messages one vote of the run was given: the run's configuration as it started, the
        vote's item, display order, label scheme and label order."""
        run = get_object_or_404(JudgeRun.objects.select_related("study", "judge"), pk=object_id)
        if not self.has_view_or_change_permission(request, run):
            raise PermissionDenied
        vote = get_object_or_404(Vote.objects.select_related("item__question", "item__kind"), pk=vote_id, run_id=run.pk)
        if not vote.label_scheme:
            raise Http404("this vote has no label scheme: it was not sent by a run")
        label_order = LABEL_ORDERS[1] if vote.labels_swapped else LABEL_ORDERS[0]
        prompt = _prompt(run.config, vote.item, vote.shown_first, vote.label_scheme, label_order)
        return _prompt_page(
            request, self, f"What vote #{vote.pk} of run #{run.pk} was given", prompt=prompt, run=run, vote=vote
        )

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: dict | None = None) -> HttpResponse:
        """Start a run: pick a study and an LLM judge. The run itself goes to the task worker."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = StartRunForm(request.POST or None, initial=_start_initial(request))
        if request.method == "POST" and form.is_valid():
            try:
                run = judge_run_start(
                    study=form.cleaned_data["study"],
                    judge=form.cleaned_data["judge"],
                    votes_per_item=form.cleaned_data["votes_per_item"],
                    user=request.user,
                )
            except (JudgeRunError, QueueUnavailable) as exc:
                form.add_error(None, str(exc))
            else:
                self.message_user(request, f"Run #{run.pk} queued: {run.total} votes.", messages.SUCCESS)
                return redirect("admin:judges_judgerun_change", run.pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Start a judge run",
            "form": form,
        }
        return TemplateResponse(request, "admin/judges/judgerun/start.html", context)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None) -> HttpResponse:
        """The live run page; htmx polls it for its progress fragment."""
        run = get_object_or_404(JudgeRun.objects.select_related("study", "judge"), pk=object_id)
        if not self.has_view_or_change_permission(request, run):
            raise PermissionDenied
        return self._render_run(request, run)

    def _render_run(self, request: HttpRequest, run: JudgeRun) -> HttpResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Run #{run.pk}: {run.judge} on {run.study}",
            "run": run,
            "progress": run.progress(),
            "can_change": self.has_change_permission(request, run),
            "resume_form": ResumeForm(),
            "votes_url": f"{reverse('admin:annotations_vote_changelist')}?run_id__exact={run.pk}"
            if self.admin_site.is_registered(run.votes.model)
            else "",
        }
        if request.htmx and not run.can_cancel:
            # The run has stopped (the last poll, or a cancel): the whole page again, in its
            # final state, without the "queued" message or the pause button, with its results.
            return HttpResponseClientRefresh()
        template = f"{self.run_template}#progress" if request.htmx else self.run_template
        return TemplateResponse(request, template, context)

    def _run_for_change(self, request: HttpRequest, object_id: int) -> JudgeRun:
        run = get_object_or_404(JudgeRun.objects.select_related("study", "judge"), pk=object_id)
        if not self.has_change_permission(request, run):
            raise PermissionDenied
        return run

    def _after_action(self, request: HttpRequest, run: JudgeRun) -> HttpResponse:
        if request.htmx:
            run.refresh_from_db()
            return self._render_run(request, run)
        return redirect("admin:judges_judgerun_change", run.pk)

    @staticmethod
    def _report(request: HttpRequest, action, message: str) -> None:
        try:
            action()
        except (JudgeRunError, QueueUnavailable) as exc:
            messages.error(request, str(exc))
        else:
            messages.success(request, message)

    def cancel_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        run = self._run_for_change(request, object_id)
        self._report(request, lambda: judge_run_cancel(run=run), f"Run #{run.pk} cancelled; its votes are kept.")
        return self._after_action(request, run)

    def resume_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        run = self._run_for_change(request, object_id)
        form = ResumeForm(request.POST)
        retry_failed = form.is_valid() and form.cleaned_data["retry_failed"]
        self._report(
            request, lambda: judge_run_resume(run=run, retry_failed=retry_failed), f"Run #{run.pk} queued again."
        )
        return self._after_action(request, run)


def _prompt(config: dict, item: ComparisonItem, shown_first: str, scheme: str, label_order: str) -> dict:
    """The messages (the runner's own function renders them) and what they were rendered for."""
    messages_sent = vote_messages(config, item, shown_first=shown_first, scheme=scheme, label_order=label_order)
    return {
        "messages": messages_sent,
        "item": item,
        "shown_first": shown_first,
        "scheme": scheme,
        "label_order": label_order,
    }


def _prompt_page(
    request: HttpRequest, model_admin: admin.ModelAdmin, title: str, *, status: int = 200, **context
) -> HttpResponse:
    context = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "title": title,
        **context,
    }
    return TemplateResponse(request, "admin/judges/prompt.html", context, status=status)


@admin.register(CachedResponse)
class CachedResponseAdmin(admin.ModelAdmin):
    list_display = ["key", "backend", "model", "tokens_in", "tokens_out", "created_at"]
    list_filter = ["backend"]
    search_fields = ["key", "model", "text"]
    readonly_fields = [f.name for f in CachedResponse._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


# The Redis queue's dashboard, when Redis is the queue: for those with its permission only.
if django_apps.is_installed("django_rq"):
    from django_rq.models import Dashboard

    from biasstudy.rq_admin import PermittedQueueAdmin

    admin.site.register(Dashboard, PermittedQueueAdmin)
