"""Keeping a running Prolific study's submissions in step outside the page: the worker's job and
the `prolific_sync` command (for cron where no worker defers jobs), against the loopback Prolific."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotations import assignment
from annotations.models import Lease
from prolific import services, tasks
from prolific.models import ProlificCall, ProlificStudy, ProlificSubmission
from tests.prolific_helpers import draft, prolific, prolific_rater, study_for_prolific

__all__ = ["prolific"]  # the fixture

pytestmark = pytest.mark.django_db


def _running_study_with_a_returned_rater(prolific):
    study = study_for_prolific()
    link = draft(study)
    services.prolific_study_transition(study=study, user=None, action="PUBLISH")
    rater, sub = prolific_rater(study, prolific, link)
    lease = assignment.lease_next(rater=rater)
    prolific.submission_set(sub, status="TIMED-OUT")
    return study, lease


def test_the_workers_job_syncs_and_frees_a_timed_out_raters_item(prolific):
    study, lease = _running_study_with_a_returned_rater(prolific)
    # The tests' task backend runs jobs at once and cannot defer: the job does not chain itself.
    assert tasks.prolific_sync_schedule(study=study) is False
    tasks.prolific_sync.call(study_id=study.pk)
    assert Lease.objects.get(pk=lease.pk).released_at is not None
    assert ProlificSubmission.objects.get().status == "TIMED-OUT"
    assert ProlificCall.objects.filter(what="sync submissions", user=None).exists()


def test_the_workers_job_survives_prolific_being_away(prolific):
    study, lease = _running_study_with_a_returned_rater(prolific)
    prolific.fail_next(503, times=1, detail="Service unavailable")
    tasks.prolific_sync.call(study_id=study.pk)  # logged, tried again at the next look
    assert Lease.objects.get(pk=lease.pk).released_at is None
    assert ProlificCall.objects.filter(what="sync study", ok=False).exists()


def test_the_command_syncs_every_running_study_and_says_what_failed(prolific):
    study, lease = _running_study_with_a_returned_rater(prolific)
    out = StringIO()
    call_command("prolific_sync", stdout=out)
    assert f"{study.slug}: 1 submissions, 1 raters freed" in out.getvalue()
    assert Lease.objects.get(pk=lease.pk).released_at is not None
    with pytest.raises(CommandError, match="has no Prolific study"):
        call_command("prolific_sync", study="no-such-study")
    prolific.fail_next(500, detail="Internal error")
    err = StringIO()
    with pytest.raises(CommandError, match="1 Prolific study could not be synced"):
        call_command("prolific_sync", study=study.slug, stderr=err)
    assert "Internal error" in err.getvalue()


def test_publishing_starts_one_chain_of_deferred_syncs_and_a_newer_chain_replaces_it(prolific, settings):
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    study, lease = _running_study_with_a_returned_rater(prolific)
    assert tasks.prolific_sync_schedule(study=study) is True
    first = DBTaskResult.objects.get()
    assert first.run_after > first.enqueued_at  # deferred by PROLIFIC_SYNC_SECONDS
    old_chain = first.args_kwargs["kwargs"]["chain"]
    tasks.prolific_sync_schedule(study=study)  # resumed again: a new chain
    # A job of the old chain does nothing and queues nothing; the new chain's job syncs and goes on.
    tasks.prolific_sync.call(study_id=study.pk, chain=old_chain)
    assert Lease.objects.get(pk=lease.pk).released_at is None and DBTaskResult.objects.count() == 2
    new_chain = ProlificStudy.objects.get(study=study).sync_chain
    tasks.prolific_sync.call(study_id=study.pk, chain=new_chain)
    assert Lease.objects.get(pk=lease.pk).released_at is not None
    assert DBTaskResult.objects.filter(args_kwargs__kwargs__chain=new_chain).count() == 2
