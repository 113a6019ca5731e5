"""A study's report as every output reads it (the dashboard, its figures, the exports, the API and
``manage.py analyze``): the stored one while the study's data is unchanged since it was computed,
else computed again in the request or by the ``report_refresh`` task (``study_results``); and
which subsets and runs its filters may pick. The computation is ``compute.py``, the stored rows
``stored_reports.py``."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from functools import partial

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from analysis import compute, tasks
from analysis.frame import Filters
from analysis.models import StudyReport
from analysis.stored_reports import (
    Results,
    report_store,
    report_version,
    request_of,
    results_of,
    stored_view,
    with_scheme_labels,
)
from annotations.models import Answer, Study, Vote
from biasstudy.queue import QueueUnavailable, enqueue_on_commit
from judges.models import JudgeRun


def study_subsets(*, study: Study) -> list[str]:
    """The subsets the study's questions come from (imported data sets such as LLMBar), sorted."""
    named = study.questions.exclude(subset="").values_list("subset", flat=True)
    return sorted(set(named))


def study_systems(*, study: Study) -> list[str]:
    """The systems the study's answers name (what the ratings' anchor may be), sorted."""
    named = Answer.objects.filter(question__study=study).exclude(system="").values_list("system", flat=True)
    return sorted(set(named))


def study_runs(*, study: Study) -> list[int]:
    """Ids of the study's LLM judge runs (what the "runs" filter may pick)."""
    return list(JudgeRun.objects.filter(study=study).order_by("id").values_list("id", flat=True))


def study_analyze(*, study: Study, filters: Filters | None = None, options: compute.Options | None = None) -> dict:
    """The study's current report: the stored one while the data it was computed from is
    unchanged, else computed now, whatever the study's size (``manage.py analyze`` waits)."""
    return study_results(study=study, filters=filters, options=options, wait=True).report


# A refresh task queued (or running) longer than this is taken for lost (its worker died): the
# next request queues another.
REFRESH_LOST_AFTER = timedelta(minutes=10)


def study_results(
    *, study: Study, filters: Filters | None = None, options: compute.Options | None = None, wait: bool = False
) -> Results:
    """The study's report for these filters and options, stored (one ``StudyReport`` per study,
    filters and options: its default view and its last few others, ``stored_reports.stored_view``) and
    computed again when ``report_version`` (the study's data version) has moved on: at once for
    a study of up to ``settings.ANALYSIS_BACKGROUND_VOTES`` votes (or with ``wait``); above that
    by the ``report_refresh`` task, queued once, while the last report is returned, marked
    ``updating``. Whether the stored one is current costs two queries, whatever the study's size."""
    filters, options = filters or Filters(), with_scheme_labels(options)
    version = report_version(study)
    stored = stored_view(study=study, request=request_of(filters, options))
    if stored.body and stored.version == version:
        return results_of(stored, updating=False)
    # The study's size as of its last report (counting its votes costs as much as a page).
    n_votes = stored.n_votes if stored.body else Vote.objects.filter(item__study=study).count()
    if wait or n_votes <= settings.ANALYSIS_BACKGROUND_VOTES:
        report_store(stored, version=version, filters=filters, options=options)
        return results_of(stored, updating=False)
    claimed = (
        StudyReport.objects.filter(pk=stored.pk)
        .filter(Q(refresh_queued_at__isnull=True) | Q(refresh_queued_at__lt=timezone.now() - REFRESH_LOST_AFTER))
        .update(refresh_queued_at=timezone.now())
    )
    if claimed:
        # Outside a transaction (a page, the API) the job is queued here and now. A refused one
        # has its claim released, so the next request (the page asks again every 10 s) queues it
        # again; this one shows the last report, marked updating, as while a refresh runs.
        with contextlib.suppress(QueueUnavailable):
            enqueue_on_commit(
                partial(tasks.report_refresh.enqueue, report_id=stored.pk),
                undo=partial(StudyReport.objects.filter(pk=stored.pk).update, refresh_queued_at=None),
                what=f"the refresh of {study.slug}'s report",
            )
    return results_of(stored, updating=True)
