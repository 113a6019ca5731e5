"""The results dashboard: staff only, every view (fragments included) checks it."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET

from analysis import exports, services, tables
from analysis.forms import FilterForm, PowerForm
from annotations.models import Study


def _study(slug: str) -> Study:
    return get_object_or_404(Study, slug=slug)


@require_GET
@staff_member_required
def study_list(request: HttpRequest) -> HttpResponse:
    return render(request, "analysis/study_list.html", {"studies": Study.objects.order_by("title")})


@require_GET
@staff_member_required
def study_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    groups, _ = services.study_groups(study=study)
    known_runs = services.study_runs(study=study)
    form = FilterForm(request.GET or None, groups=groups, known_runs=known_runs)
    context = {"study": study, "form": form, "result": None, "query": request.GET.urlencode()}
    if form.is_bound and not form.is_valid():
        status = 400
    else:
        status = 200
        if not form.is_bound:
            form = FilterForm({}, groups=groups, known_runs=known_runs)
            form.is_valid()
        result = services.study_analyze(study=study, filters=form.filters(), options=form.options())
        consistency_rows, consistency_subset_rows = tables.consistency_rows(result)
        context.update(
            result=result,
            consistency_rows=consistency_rows,
            consistency_subset_rows=consistency_subset_rows,
            table1=tables.table1(result),
            table2=tables.table2(result),
            lc_rows=tables.lc_rows(result),
            bloom_tables={b: tables.table1(result, part=b) for b in _blooms(result)},
            # Built by analysis.svg from escaped text only.
            verbosity_svg=mark_safe(tables.verbosity_svg(result)),  # noqa: S308
        )
    template = "analysis/study.html#results" if request.htmx else "analysis/study.html"
    return render(request, template, context, status=status)


def _blooms(result: dict) -> list[str]:
    seen = {b for j in result["judges"] for b in j["by_bloom"]}
    order = ["remembering", "understanding", "applying", "analyzing", "evaluating", "creating"]
    return [b for b in order if b in seen]


@require_GET
@staff_member_required
def rater_monitor(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    rows = services.raters_monitor(study=study)
    template = "analysis/raters.html#monitor" if request.htmx else "analysis/raters.html"
    return render(request, template, {"study": study, "rows": rows})


@require_GET
@staff_member_required
def power(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    form = PowerForm(request.GET or None, initial=PowerForm.initial_for(study))
    rows = None
    if form.is_bound and form.is_valid():
        rows = services.power_table(**form.cleaned_data)
    template = "analysis/power.html#table" if request.htmx else "analysis/power.html"
    return render(request, template, {"study": study, "form": form, "rows": rows}, status=400 if form.errors else 200)


@require_GET
@staff_member_required
def export_csv(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    if name not in exports.EXPORTS:
        raise Http404("no such export")
    study = _study(slug)
    kwargs = {}
    if name != "votes":
        groups, _ = services.study_groups(study=study)
        form = FilterForm(request.GET, groups=groups, known_runs=services.study_runs(study=study))
        if not form.is_valid():
            return HttpResponse(f"bad filters: {form.errors.as_text()}", status=400, content_type="text/plain")
        kwargs["filters"] = form.filters()
        if name == "metrics":
            kwargs["options"] = form.options()
    response = StreamingHttpResponse(
        exports.csv_lines(exports.EXPORTS[name](study, **kwargs)), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{study.slug}-{name}.csv"'
    return response
