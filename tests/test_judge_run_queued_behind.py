"""A queued run while a worker is busy with another: its page says it waits behind that run,
not that no worker has taken it, and offers no "Resume" (which would queue it twice); the
start page and /health/ read it the same way. Once the running run's worker falls silent, the
queued run is untaken again."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.health import judge_runs
from judges.models import JudgeRun
from judges.services import JudgeRunError, judge_run_start
from tests.factories import make_llm_judge, make_question, make_study


def two_runs():
    """Run 1 running, its worker's heartbeat fresh; run 2 queued 3 minutes ago."""
    study = make_study()
    make_question(study)
    first, second = make_llm_judge(name="first judge"), make_llm_judge(name="second judge")
    now = timezone.now()
    running = JudgeRun.objects.create(
        study=study, judge=first.judge, status="running", config=first.snapshot(), started_at=now, heartbeat_at=now
    )
    queued = JudgeRun.objects.create(
        study=study, judge=second.judge, status="queued", config=second.snapshot(),
        heartbeat_at=now - timedelta(minutes=3),
    )  # fmt: skip
    return running, queued


def test_a_run_queued_behind_a_busy_worker_says_so_and_offers_no_resume(staff_client):
    running, queued = two_runs()
    html = staff_client.get(reverse("admin:judges_judgerun_change", args=[queued.pk])).content.decode()
    assert (
        f'Waiting behind <a href="{reverse("admin:judges_judgerun_change", args=[running.pk])}">run #{running.pk}</a>'
        in html
    )
    assert "no worker has taken it" not in html and 'id="run-resume"' not in html
    assert 'id="run-cancel"' in html  # it can still be cancelled
    assert judge_runs()["ok"] is True


def test_the_start_page_says_the_run_waits_behind_the_other(db):
    running, queued = two_runs()
    with pytest.raises(JudgeRunError, match=f"waits behind run #{running.pk}, which a worker is running"):
        judge_run_start(study=queued.study, judge=queued.judge, enqueue=False)


def test_once_the_running_runs_worker_is_silent_the_queued_run_is_untaken_again(staff_client):
    running, queued = two_runs()
    JudgeRun.objects.filter(pk=running.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    JudgeRun.objects.filter(pk=queued.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    html = staff_client.get(reverse("admin:judges_judgerun_change", args=[queued.pk])).content.decode()
    assert "no worker has taken it" in html and 'id="run-resume"' in html and "Waiting behind" not in html
    assert judge_runs()["untaken_runs"] == [queued.pk]
