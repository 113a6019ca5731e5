"""The results dashboard: staff only, with the model permissions of what each page shows
(biasstudy.permissions, analysis.exports' *_PERMISSIONS); every view, fragments included, checks them."""

from __future__ import annotations

from decimal import Decimal
from urllib.parse import urlencode

from django.contrib.admin.views.decorators import staff_member_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.utils.cache import get_conditional_response, patch_cache_control
from django.views.decorators.http import require_GET

from analysis import current_report, exports, plots, stored_reports, tables
from analysis.forms import FilterForm, PaymentForm, PowerForm
from analysis.power import power_defaults, power_groups, power_table
from analysis.rater_monitor import imported_people, raters_monitor
from annotations.models import Rater, Study
from biasstudy.permissions import has_model_perms, model_permissions_required


def _study(slug: str) -> Study:
    return get_object_or_404(Study, slug=slug)


@require_GET
@staff_member_required
@model_permissions_required("annotations.view_study")
def study_list(request: HttpRequest) -> HttpResponse:
    return render(request, "analysis/study_list.html", {"studies": Study.objects.order_by("title")})


@require_GET
@staff_member_required
@model_permissions_required(*exports.METRICS_PERMISSIONS)
def study_dashboard(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    form = FilterForm.for_study(request.GET or None, study=study)
    context = {"study": study, "form": form, "result": None, "results": None, "query": request.GET.urlencode()}
    status = 400 if form.is_bound and not form.is_valid() else 200
    if status == 200:
        if not form.is_bound:
            form = FilterForm({})  # the defaults: empty data picks none of the study's choices
            form.is_valid()
        context["results"] = results = current_report.study_results(
            study=study, filters=form.filters(), options=form.options()
        )
        if (result := results.report) is not None:
            consistency_rows, consistency_subset_rows = tables.consistency_rows(result)
            context.update(
                result=result,
                consistency_rows=consistency_rows,
                consistency_subset_rows=consistency_subset_rows,
                table1=tables.table1(result),
                table2=tables.table2(result),
                agreement=tables.agreement(result),
                judges_against_people=tables.judges_against_people(result),
                mixed_effects_rows=tables.mixed_effects_rows(result),
                self_preference_rows=tables.self_preference_rows(result),
                verbosity_rows=tables.verbosity_rows(result),
                lc_rows=tables.lc_rows(result),
                label_rows=tables.label_rows(result),
                option_prob_rows=tables.option_prob_rows(result),
                bloom_tables={b: tables.table1(result, part=b) for b in tables.blooms(result)},
                bloom_position_rows=tables.bloom_position_rows(result),
                section_figures=tables.every_section_figures(result),
                glossary=tables.glossary(result),
                labels=tables.labels(),
                plots=plots.PLOTS,
                systems=tables.systems(result),
            )
    template = "analysis/study.html#results" if request.htmx else "analysis/study.html"
    return render(request, template, context, status=status)


@require_GET
@staff_member_required
@model_permissions_required(*exports.PAYMENT_PERMISSIONS)  # it shows platform participant ids too
def rater_monitor(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    rows = raters_monitor(study=study)
    imported = imported_people(study=study)
    # The bonus field: the payment links carry it, previewed with what it pays in all.
    payment_form = PaymentForm(request.GET)
    bonus = payment_form.cleaned_data["bonus_per_counted_vote"] if payment_form.is_valid() else None
    context = {
        "study": study,
        "rows": rows,
        "imported": imported,
        "payment_form": payment_form,
        "bonus": exports.bonus_preview(rows, bonus) if bonus else None,
        "query": urlencode({"bonus_per_counted_vote": bonus}) if bonus else "",
    }
    template = "analysis/raters.html#monitor" if request.htmx else "analysis/raters.html"
    return render(request, template, context, status=400 if payment_form.errors else 200)


@require_GET
@staff_member_required
@model_permissions_required("annotations.view_study")
def power(request: HttpRequest, slug: str) -> HttpResponse:
    study = _study(slug)
    defaults = power_defaults(study=study)
    # The page opens on the study's own design, simulated; the form changes it.
    form = PowerForm(request.GET or defaults, initial=defaults)
    groups = power_groups(study=study)
    kinds = stored_reports.study_groups(study=study)[0]
    rows = power_table(**form.cleaned_data, groups=groups) if form.is_valid() else None
    context = {
        "study": study,
        "form": form,
        "rows": rows,
        "study_groups": [g for g in kinds if g in groups],
        "judge_only_groups": [g for g in kinds if g not in groups],  # no rater is handed their items
        "raters_so_far": Rater.objects.filter(study=study).crowd().count(),
        "questions": study.questions.filter(is_gold=False).count(),
    }
    template = "analysis/power.html#table" if request.htmx else "analysis/power.html"
    return render(request, template, context, status=400 if form.errors else 200)


def _filter_form(request: HttpRequest, study: Study) -> FilterForm:
    form = FilterForm.for_study(request.GET, study=study)
    form.is_valid()
    return form


def _bad_filters(form: FilterForm) -> HttpResponse:
    return HttpResponse(f"bad filters: {form.errors.as_text()}", status=400, content_type="text/plain")


@require_GET
@staff_member_required
def export_csv(request: HttpRequest, slug: str, name: str) -> HttpResponse:
    if name not in exports.EXPORTS:
        raise Http404("no such export")
    if not has_model_perms(request.user, exports.EXPORT_PERMISSIONS[name]):
        raise PermissionDenied
    study = _study(slug)
    filters = options = None
    if name not in exports.UNFILTERED:
        form = _filter_form(request, study)
        if form.errors:
            return _bad_filters(form)
        filters, options = form.filters(), form.options()
    try:
        return exports.export_download(name, study, filters=filters, options=options)
    except stored_reports.ReportNotReady:
        return _not_ready()


def _not_ready() -> HttpResponse:
    response = HttpResponse(
        "The study's first figures for these filters are being computed: try again in a minute.",
        status=503,
        content_type="text/plain",
    )
    response["Retry-After"] = "30"
    return response


@require_GET
@staff_member_required
@model_permissions_required(*exports.PAYMENT_PERMISSIONS)
def payment_csv(request: HttpRequest, slug: str) -> HttpResponse:
    """The file for the platform's bulk approve / reject and bonus pages (``?paste=approve`` or
    ``?paste=bonus``: just the lines Prolific's bulk pages take). The one export with platform
    participant ids: its file name says so."""
    study = _study(slug)
    form = PaymentForm(request.GET)
    if not form.is_valid():
        return HttpResponse(f"bad payment settings: {form.errors.as_text()}", status=400, content_type="text/plain")
    bonus = form.cleaned_data["bonus_per_counted_vote"] or Decimal("0")
    if shape := form.cleaned_data["paste"]:
        text = exports.payment_paste(study, shape, bonus_per_counted_vote=bonus)
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-prolific-{shape}-WITH-PLATFORM-IDS.txt"'
        return response
    rows = exports.payment_rows(study, bonus_per_counted_vote=bonus)
    return exports.csv_response(rows, f"{study.slug}-payment-WITH-PLATFORM-IDS.csv")


@require_GET
@staff_member_required
@model_permissions_required(*exports.METRICS_PERMISSIONS)
def plot(request: HttpRequest, slug: str, name: str, fmt: str) -> HttpResponse:
    """One figure of the dashboard as SVG or PNG, or the CSV of the numbers it draws, for the
    same filters as the page."""
    if name not in plots.PLOTS or fmt not in (*plots.FORMATS, "csv"):
        raise Http404("no such plot")
    study = _study(slug)
    form = _filter_form(request, study)
    if form.errors:
        return _bad_filters(form)
    results = current_report.study_results(study=study, filters=form.filters(), options=form.options())
    if results.report is None:
        return _not_ready()
    if fmt == "csv":
        return exports.csv_response(plots.draw(name, results.report)[1], f"{study.slug}-plot-{name}.csv")
    # The same report draws the same figure: a browser that has it is told so (304), not sent
    # it again (the page's refresh every 10 s asks for each figure again).
    etag = f'"{results.version}-{name}.{fmt}"'
    if (not_modified := get_conditional_response(request, etag=etag)) is not None:
        return not_modified
    response = HttpResponse(plots.render(plots.draw(name, results.report)[0], fmt), content_type=plots.FORMATS[fmt])
    response["ETag"] = etag
    patch_cache_control(response, private=True, no_cache=True)
    if "download" in request.GET:
        response["Content-Disposition"] = f'attachment; filename="{study.slug}-{name}.{fmt}"'
    return response
