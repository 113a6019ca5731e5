"""The worker's Prolific job (a thin wrapper): keep a running Prolific study's submissions in
step, every PROLIFIC_SYNC_SECONDS, chained while the study runs (as judges.tasks.watch_run is)."""

from __future__ import annotations

import logging
import secrets
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, task, task_backends

from annotations.models import Study
from prolific.client import ProlificError
from prolific.models import RUNNING, ProlificStudy
from prolific.services import prolific_submissions_sync

log = logging.getLogger(__name__)


def prolific_sync_schedule(*, study: Study, chain: str = "") -> bool:
    """Queue the next sync of the study's submissions, deferred by PROLIFIC_SYNC_SECONDS: the
    next link of `chain`, or the first of a new chain that replaces any earlier one. False where
    the task backend cannot defer (the immediate one of the tests): then the page's button and
    the `prolific_sync` command keep it in step."""
    if not task_backends[DEFAULT_TASK_BACKEND_ALIAS].supports_defer:
        return False
    if not chain:
        chain = secrets.token_hex(8)
        ProlificStudy.objects.filter(study=study).update(sync_chain=chain)
    run_after = timezone.now() + timedelta(seconds=settings.PROLIFIC_SYNC_SECONDS)
    prolific_sync.using(run_after=run_after).enqueue(study_id=study.pk, chain=chain)
    return True


@task()
def prolific_sync(*, study_id: int, chain: str = "") -> None:
    """One sync, then the next one while the Prolific study runs (also after a failed look:
    Prolific or the database away for a while). A job of a chain that a newer one replaced
    does nothing."""
    link = ProlificStudy.objects.select_related("study").filter(study_id=study_id).first()
    if link is None or (chain and link.sync_chain != chain):
        return
    try:
        prolific_submissions_sync(study=link.study)
    except (ProlificError, DatabaseError):
        log.warning("study %s: the Prolific sync failed; trying again later", study_id, exc_info=True)
    if ProlificStudy.objects.filter(study_id=study_id, status__in=RUNNING).exists():
        prolific_sync_schedule(study=link.study, chain=chain)
