"""A study's report computed from its votes and stored (``StudyReport``): the version it is current
at (``report_version``), computing, storing and pruning it, and the task's refresh.
``current_report.study_results`` decides when a stored report is computed again, in the request or by
the ``report_refresh`` task, which calls ``study_report_refresh`` here (this module queues no
task, so the task imports it)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from django.db.models import F
from django.utils import timezone

from analysis import compute, loader, ratings_service
from analysis.frame import Filters
from analysis.models import StudyReport
from annotations.models import ComparisonItem, PerturbationKind, Study
from judges.prompts import LABEL_SCHEMES


def study_groups(*, study: Study) -> tuple[list[str], dict[str, str]]:
    """The study's perturbation groups (from its items, voted on or not) and their semantics."""
    kind_ids = ComparisonItem.objects.filter(study=study, kind__isnull=False).values_list("kind_id", flat=True)
    kinds = PerturbationKind.objects.filter(id__in=kind_ids).values_list("slug", "semantics")
    semantics = dict(kinds)
    return sorted(semantics), semantics


def scheme_labels() -> dict[str, tuple[str, str]]:
    """The judges app's label schemes as (first label, second label)."""
    return {slug: (scheme.first, scheme.second) for slug, scheme in LABEL_SCHEMES.items()}


def with_scheme_labels(options: compute.Options | None) -> compute.Options:
    options = options or compute.Options()
    if not options.scheme_labels:
        options.scheme_labels = scheme_labels()
    return options


@dataclass
class Results:
    """A study's report as the pages and the API show it: when it was computed, from how many
    votes, and whether a newer one is being computed in the background (``updating``).
    ``report`` is None only while a big study's first report is being computed."""

    report: dict | None
    computed_at: datetime | None
    n_votes: int
    updating: bool
    version: str  # report_version: the data version and analysis code it was computed from


class ReportNotReady(Exception):
    """A big study's first report for these filters is still being computed."""


def study_report_refresh(*, report_id: int) -> None:
    """Compute a stored report again if its data has changed since (the ``report_refresh``
    task); whatever happens, the refresh is no longer queued afterwards."""
    stored = StudyReport.objects.select_related("study").filter(pk=report_id).first()
    if stored is None:  # its study was deleted meanwhile
        return
    try:
        version = report_version(stored.study)
        if not stored.body or stored.version != version:
            filters, options = _from_request(stored.request)
            report_store(stored, version=version, filters=filters, options=options)
    finally:
        StudyReport.objects.filter(pk=report_id).update(refresh_queued_at=None)


# The analysis code: a deploy that changes how a report is computed or shaped changes every version.
ANALYSIS_CODE = hashlib.sha256(
    b"".join(p.read_bytes() for p in sorted(Path(__file__).resolve().parent.glob("*.py")))
).hexdigest()[:16]


def report_version(study: Study) -> str:
    """The version a stored report of the study is current at: the study's data version, which
    every write of what a report reads moves on in its own transaction (annotations.data_version
    names them), and the analysis code. One query, whatever the study's size."""
    data_version = Study.objects.filter(pk=study.pk).values_list("data_version", flat=True).first()
    if data_version is None:
        raise Study.DoesNotExist(f"study {study.pk} is gone")
    return f"{data_version}-{ANALYSIS_CODE}"


def study_report(*, study: Study, filters: Filters | None = None, options: compute.Options | None = None) -> dict:
    """The study's report computed now from its votes (what ``study_results`` stores)."""
    groups, semantics = study_groups(study=study)
    filters, options = filters or Filters(), with_scheme_labels(options)
    frame = loader.study_frame(study)
    if options.style_scaling is None:
        found = ratings_service.study_style_scaling(study=study, frame=frame)
        options = replace(options, style_scaling=found.as_dict() if found is not None else None)
    return compute.analyze(
        frame,
        study=study.slug,
        filters=filters,
        options=options,
        votes_per_item=study.votes_per_item,
        groups=groups,
        semantics=semantics,
    )


def report_store(stored: StudyReport, *, version: str, filters: Filters, options: compute.Options) -> None:
    """Compute the report and store it in ``stored`` (as JSON: every reader gets what the API
    sends), with the version read before its votes were and the number of votes it read."""
    cpu = time.process_time()
    result = study_report(study=stored.study, filters=filters, options=options)
    stored.body = json.dumps(result, default=str)
    stored.version, stored.n_votes, stored.computed_at = version, result["filters"]["n_votes_total"], timezone.now()
    stored.cpu_seconds = time.process_time() - cpu
    stored.computations += 1
    StudyReport.objects.filter(pk=stored.pk).update(
        body=stored.body,
        version=version,
        n_votes=stored.n_votes,
        computed_at=stored.computed_at,
        cpu_seconds=stored.cpu_seconds,
        computations=F("computations") + 1,
    )
    reports_prune(study=stored.study)


# Beside its default view (the dashboard's, the API's and the CSVs' without filters or options),
# a study keeps the reports of at most this many other views (filters and options): the ones
# computed last, and those not computed yet. A view's report is computed again in its own row.
OTHER_VIEWS_KEPT = 10


def stored_view(*, study: Study, request: dict) -> StudyReport:
    """The study's stored report of these filters and options (``request_of``), made empty the
    first time they are asked for; the study's other views beyond ``OTHER_VIEWS_KEPT`` go then."""
    stored, created = StudyReport.objects.get_or_create(
        study=study, asked=asked_digest(request), defaults={"request": request}
    )
    if created:
        reports_prune(study=study)
    return stored


def asked_digest(request: dict) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()


def reports_prune(*, study: Study) -> None:
    """Delete the study's stored reports but its default view's and the ``OTHER_VIEWS_KEPT``
    others computed last (or not yet): each distinct seed, bootstrap or time range asked for
    makes a view, which must not pile up."""
    default = asked_digest(request_of(Filters(), with_scheme_labels(None)))
    others = StudyReport.objects.filter(study=study).exclude(asked=default)
    kept = others.order_by(F("computed_at").desc(nulls_first=True), "-pk").values("pk")[:OTHER_VIEWS_KEPT]
    others.exclude(pk__in=kept).delete()


def results_of(stored: StudyReport, *, updating: bool) -> Results:
    return Results(
        report=stored.report,
        computed_at=stored.computed_at,
        n_votes=stored.n_votes,
        updating=updating,
        version=stored.version,
    )


def request_of(filters: Filters, options: compute.Options) -> dict:
    """The filters and options as JSON (``_from_request`` makes them again)."""
    return json.loads(json.dumps({"filters": asdict(filters), "options": asdict(options)}, default=str))


def _from_request(request: dict) -> tuple[Filters, compute.Options]:
    filters = dict(request["filters"])
    for key in ("since", "until"):
        if filters[key] is not None:
            filters[key] = datetime.fromisoformat(filters[key])
    options = dict(request["options"])
    options["lc_lambdas"] = tuple(options["lc_lambdas"])
    options["scheme_labels"] = {slug: tuple(labels) for slug, labels in options["scheme_labels"].items()}
    return Filters(**filters), compute.Options(**options)
