"""Starting or resuming a judge run, importing a vote file, or confirming a large study upload
while the task queue is away (Redis stopped): one operation, so either the run (or upload) and
its job both exist or neither does. The admin says "try again", the API answers 503 with
Retry-After and a `detail`, the command fails with that message; nothing is left behind (a
study upload goes back to its preview, unconfirmed), and once Redis is back the same request
works. A real redis-server on loopback, stopped and started again."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from rest_framework.test import APIClient

from annotations.models import Vote
from judges.models import JudgeRun
from tests.factories import make_llm_judge, make_question, make_staff, make_study
from tests.live import RedisServer
from vote_imports import uploads

pytestmark = pytest.mark.django_db(transaction=True)  # the job is queued when the run's transaction commits

UNAVAILABLE = "The task queue is unavailable"


@pytest.fixture
def redis_queue(tmp_path, settings):
    """The Redis queue, as deployed, on a redis-server of the test's own (started)."""
    server = RedisServer(tmp_path).start()
    settings.TASKS = {"default": {"BACKEND": "django_tasks_rq.RQBackend"}}
    settings.RQ_QUEUES = {"default": {"URL": server.url, "DEFAULT_TIMEOUT": 3600}}
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    try:
        yield server
    finally:
        server.stop()


def _jobs(server: RedisServer) -> tuple[int, int]:
    """(jobs waiting for a worker, deferred jobs) in the queue."""
    import redis
    from rq import Queue
    from rq.registry import ScheduledJobRegistry

    connection = redis.Redis.from_url(server.url)
    return Queue("default", connection=connection).count, ScheduledJobRegistry("default", connection=connection).count


@pytest.fixture
def setup(db):
    study = make_study(slug="queue-outage")
    make_question(study)
    config = make_llm_judge(name="queue-judge", votes_per_item=2)
    client = APIClient()
    client.force_authenticate(make_staff())
    return study, config.judge, client


def test_a_run_started_through_the_api_while_redis_is_down_is_a_503_and_leaves_no_run(redis_queue, setup):
    study, judge, client = setup
    redis_queue.stop()
    refused = client.post("/api/v1/runs/", {"study": study.slug, "judge": judge.pk}, format="json")
    assert refused.status_code == 503, refused.content
    assert refused["Retry-After"] == "5"
    assert UNAVAILABLE in refused.json()["detail"] and "Try again" in refused.json()["detail"]
    assert not JudgeRun.objects.exists()

    redis_queue.start()  # back: the same request starts the run, with its job and its watchdog
    started = client.post("/api/v1/runs/", {"study": study.slug, "judge": judge.pk}, format="json")
    assert started.status_code == 201, started.content
    assert JudgeRun.objects.get().status == JudgeRun.Status.QUEUED
    assert _jobs(redis_queue) == (1, 1)


def test_a_run_started_in_the_admin_or_by_the_command_while_redis_is_down_says_try_again(redis_queue, setup):
    study, judge, _ = setup
    redis_queue.stop()
    from django.test import Client

    admin = Client()
    admin.force_login(make_staff())
    page = admin.post(reverse("admin:judges_judgerun_add"), {"study": study.pk, "judge": judge.pk, "votes_per_item": 2})
    assert page.status_code == 200 and UNAVAILABLE in page.content.decode()
    with pytest.raises(CommandError, match=UNAVAILABLE):
        call_command("run_judge", "--study", study.slug, "--judge", judge.name, stdout=io.StringIO())
    assert not JudgeRun.objects.exists()

    redis_queue.start()
    call_command("run_judge", "--study", study.slug, "--judge", judge.name, stdout=io.StringIO())
    assert JudgeRun.objects.get().status == JudgeRun.Status.QUEUED


def test_a_resume_while_redis_is_down_is_a_503_and_leaves_the_run_as_it_was(redis_queue, setup):
    study, judge, client = setup
    from judges.services import judge_run_start

    run = judge_run_start(study=study, judge=judge, enqueue=False)
    run.cancel()
    before = JudgeRun.objects.filter(pk=run.pk).values("status", "finished_at", "heartbeat_at", "retry_failed").get()
    redis_queue.stop()
    refused = client.post(f"/api/v1/runs/{run.pk}/resume/", {"retry_failed": True}, format="json")
    assert refused.status_code == 503 and UNAVAILABLE in refused.json()["detail"], refused.content
    after = JudgeRun.objects.filter(pk=run.pk).values("status", "finished_at", "heartbeat_at", "retry_failed").get()
    assert after == before

    redis_queue.start()
    resumed = client.post(f"/api/v1/runs/{run.pk}/resume/", {}, format="json")
    assert resumed.status_code == 200 and resumed.json()["status"] == "queued"
    assert _jobs(redis_queue) == (1, 1)


def _vote_file() -> io.BytesIO:
    file = io.BytesIO(b"question,answer_a1,answer_a2,judge,choice\nQ?,One.,Two.,someone,a1\n")
    file.name = "votes.csv"
    return file


def _import_through_the_api(client: APIClient, slug: str):
    return client.post(
        "/api/v1/votes/import/", {"file": _vote_file(), "format": "csv", "study": slug}, format="multipart"
    )


def test_a_vote_import_while_redis_is_down_is_a_503_and_keeps_no_upload(redis_queue, setup, settings):
    study, _, client = setup
    redis_queue.stop()
    refused = _import_through_the_api(client, study.slug)
    assert refused.status_code == 503, refused.content
    assert refused["Retry-After"] == "5" and UNAVAILABLE in refused.json()["detail"]
    assert not any(settings.STUDY_UPLOAD_DIR.glob("*/*")), "the refused upload was kept"

    from django.test import Client

    admin = Client()
    admin.force_login(make_staff())
    page = admin.post(
        reverse("vote_imports:votes-import"), {"file": _vote_file(), "format": "csv", "study": study.slug}
    )
    assert page.status_code == 503 and UNAVAILABLE in page.content.decode()
    assert not any(settings.STUDY_UPLOAD_DIR.glob("*/*"))
    assert not Vote.objects.exists()

    redis_queue.start()
    accepted = _import_through_the_api(client, study.slug)
    assert accepted.status_code == 202, accepted.content
    assert accepted.json()["state"] == "queued" and _jobs(redis_queue) == (1, 0)
    assert uploads.votes_upload_get(token=accepted["Location"].rstrip("/").rsplit("/", 1)[1]).path.exists()


def test_a_large_study_upload_confirmed_while_redis_is_down_says_try_again_and_can_be_confirmed_again(
    redis_queue, settings
):
    import json

    from django.core.files.uploadedfile import SimpleUploadedFile
    from django.test import Client

    from annotations import uploads as study_uploads
    from annotations.models import Study
    from tests.test_study_import import minimal_document

    settings.STUDY_UPLOAD_BACKGROUND_QUESTIONS = 0  # every study is imported by the task worker
    admin = Client()
    admin.force_login(make_staff())
    stored = admin.post(
        reverse("admin:annotations_study_upload"),
        {"file": SimpleUploadedFile("mini.json", json.dumps(minimal_document()).encode())},
    )
    preview_url = stored["Location"]
    upload = study_uploads.study_upload_get(token=preview_url.rstrip("/").rsplit("/", 1)[1])
    redis_queue.stop()
    refused = admin.post(preview_url)
    assert refused.status_code == 503 and UNAVAILABLE in refused.content.decode()
    # Not left "queued" for a job that will never run: the preview is there to confirm again.
    assert study_uploads.study_upload_progress(upload=upload)["state"] == "new"
    assert admin.get(preview_url).status_code == 200
    assert not Study.objects.exists()

    redis_queue.start()
    accepted = admin.post(preview_url)
    assert accepted.status_code == 302
    assert accepted["Location"] == preview_url + "progress/"
    assert study_uploads.study_upload_progress(upload=upload)["state"] == "queued"
    assert _jobs(redis_queue) == (1, 0)


def test_a_model_based_generation_asked_while_redis_is_down_is_a_503_and_leaves_no_queued_report(redis_queue, setup):
    from perturbations.models import GenerationReport

    study, judge, client = setup
    url = reverse("api:study-perturbations", args=[study.slug])
    body = {"kind": "factual_error", "seed": 2, "method": "model", "generator": judge.name}
    redis_queue.stop()
    refused = client.post(url, body, format="json")
    assert refused.status_code == 503, refused.content
    assert refused["Retry-After"] == "5" and UNAVAILABLE in refused.json()["detail"]
    assert not GenerationReport.objects.exists(), "the review page would show it queued forever"

    from django.test import Client

    from judges.models import LLMJudge

    admin = Client()
    admin.force_login(make_staff())
    page = admin.post(
        reverse("admin:perturbations_generate") + f"?ids={study.pk}",
        {**body, "of": "a2", "generator": LLMJudge.objects.get(judge=judge).pk},
        follow=True,
    )
    assert page.status_code == 200 and UNAVAILABLE in page.content.decode()
    assert not GenerationReport.objects.exists()

    redis_queue.start()
    queued = client.post(url, body, format="json")
    assert queued.status_code == 202, queued.content
    assert GenerationReport.objects.count() == 1 and _jobs(redis_queue) == (1, 0)


def test_a_report_refresh_refused_while_redis_is_down_is_queued_by_the_next_request(redis_queue, setup, settings):
    from analysis import current_report
    from analysis.models import StudyReport
    from tests.factories import make_vote

    study, judge, client = setup
    make_vote(study.items.get(), judge)
    settings.ANALYSIS_BACKGROUND_VOTES = 0  # computed by the task worker, whatever the study's size
    redis_queue.stop()
    results = current_report.study_results(study=study)
    assert results.updating and results.report is None
    assert StudyReport.objects.get(study=study).refresh_queued_at is None, "no request would queue it for 10 min"

    redis_queue.start()
    assert current_report.study_results(study=study).updating
    assert StudyReport.objects.get(study=study).refresh_queued_at is not None and _jobs(redis_queue) == (1, 0)
