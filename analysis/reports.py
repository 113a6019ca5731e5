"""A study's report computed from its votes and stored (``StudyReport``): what it is computed from
(``report_version``), computing and storing it, and the task's refresh. ``services.study_results``
decides when a stored report is computed again, in the request or by the ``report_refresh`` task,
which calls ``study_report_refresh`` here (this module queues no task, so the task imports it)."""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from django.db.models import Count, F, Max, OuterRef, Q, Subquery, Sum
from django.utils import timezone

from analysis import loader, report
from analysis.frame import Filters
from analysis.models import StudyReport
from annotations.models import Answer, BloomLevel, ComparisonItem, Judge, PerturbationKind, Question, Rater, Study, Vote


def study_groups(*, study: Study) -> tuple[list[str], dict[str, str]]:
    """The study's perturbation groups (from its items, voted on or not) and their semantics."""
    kind_ids = ComparisonItem.objects.filter(study=study, kind__isnull=False).values_list("kind_id", flat=True)
    kinds = PerturbationKind.objects.filter(id__in=kind_ids).values_list("slug", "semantics")
    semantics = dict(kinds)
    return sorted(semantics), semantics


def scheme_labels() -> dict[str, tuple[str, str]]:
    """The judges app's label schemes as (first label, second label); empty before it has them."""
    try:
        from judges.prompts import LABEL_SCHEMES
    except ImportError:  # the judges app defines its schemes in judges.prompts
        return {}
    return {slug: (scheme.first, scheme.second) for slug, scheme in LABEL_SCHEMES.items()}


def with_scheme_labels(options: report.Options | None) -> report.Options:
    options = options or report.Options()
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
    version: str  # report_version's digest of the data the report was computed from


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
    """The data version of the study's reports: a digest of what a report is computed from,
    read with one aggregate query per table. A stored report is computed again
    when any of these has changed:

    - the study's own row (its thresholds, votes per item);
    - its items (how many, the newest id, how many with each gold label, the newest vote on
      any of them), questions (how many, the newest id, how many gold, how many at each Bloom
      level) and answers (how many, the newest id);
    - its raters (how many, the newest id, which are flagged, their votes: a rater's vote
      counts in the same transaction, so one that commits after a newer vote was read is
      seen) and judge runs (how many, the newest id, the last heartbeat and end: a run beats
      as it writes its votes and as its retries rewrite failed ones in place);
    - the judges (how many, the newest id, of every study: deleting a judge deletes its votes);
    - the analysis code.

    Votes are not counted: that steps through every vote of the study (0.1-0.3 s at a million
    on SQLite), where the newest vote of each item is one index step per item. So a vote
    deleted on its own, or an edit that changes none of the above (a judge renamed, an answer's
    text, two questions swapping Bloom levels, a perturbation kind's semantics), is in the
    report computed after the study's next vote."""
    from judges.models import JudgeRun  # the judges app depends on annotations, not the reverse

    newest_vote = Vote.objects.filter(item=OuterRef("pk")).order_by("-id").values("id")[:1]
    parts = {
        "study": Study.objects.filter(pk=study.pk).values().first(),
        "items": ComparisonItem.objects.filter(study=study)
        .annotate(newest_vote=Subquery(newest_vote))
        .aggregate(
            n=Count("id"),
            max=Max("id"),
            vote_max=Max("newest_vote"),
            **{f"gold_{label}": Count("id", filter=Q(gold_label=label)) for label in ("a1", "a2")},
        ),
        "questions": Question.objects.filter(study=study).aggregate(
            n=Count("id"),
            max=Max("id"),
            gold=Count("id", filter=Q(is_gold=True)),
            **{level: Count("id", filter=Q(bloom_level=level)) for level in BloomLevel.values},
        ),
        "answers": Answer.objects.filter(question__study=study).aggregate(n=Count("id"), max=Max("id")),
        "raters": Rater.objects.filter(study=study).aggregate(
            n=Count("id"),
            max=Max("id"),
            votes=Sum("votes_done"),
            n_flagged=Count("id", filter=Q(flagged=True)),
            flagged_ids=Sum("id", filter=Q(flagged=True)),
        ),
        "runs": JudgeRun.objects.filter(study=study).aggregate(
            n=Count("id"), max=Max("id"), heartbeat=Max("heartbeat_at"), finished=Max("finished_at")
        ),
        "judges": Judge.objects.aggregate(n=Count("id"), max=Max("id")),
        "code": ANALYSIS_CODE,
    }
    if parts["study"] is None:
        raise Study.DoesNotExist(f"study {study.pk} is gone")
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def study_report(*, study: Study, filters: Filters | None = None, options: report.Options | None = None) -> dict:
    """The study's report computed now from its votes (what ``study_results`` stores)."""
    groups, semantics = study_groups(study=study)
    filters, options = filters or Filters(), with_scheme_labels(options)
    return report.analyze(
        loader.study_frame(study),
        study=study.slug,
        filters=filters,
        options=options,
        votes_per_item=study.votes_per_item,
        groups=groups,
        semantics=semantics,
    )


def report_store(stored: StudyReport, *, version: str, filters: Filters, options: report.Options) -> None:
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


def results_of(stored: StudyReport, *, updating: bool) -> Results:
    return Results(
        report=stored.report,
        computed_at=stored.computed_at,
        n_votes=stored.n_votes,
        updating=updating,
        version=stored.version,
    )


def request_of(filters: Filters, options: report.Options) -> dict:
    """The filters and options as JSON (``_from_request`` makes them again)."""
    return json.loads(json.dumps({"filters": asdict(filters), "options": asdict(options)}, default=str))


def _from_request(request: dict) -> tuple[Filters, report.Options]:
    filters = dict(request["filters"])
    for key in ("since", "until"):
        if filters[key] is not None:
            filters[key] = datetime.fromisoformat(filters[key])
    options = dict(request["options"])
    options["lc_lambdas"] = tuple(options["lc_lambdas"])
    options["scheme_labels"] = {slug: tuple(labels) for slug, labels in options["scheme_labels"].items()}
    return Filters(**filters), report.Options(**options)
