"""Production defaults that hold: no start with a weak secret key, /health/ tells anonymous
callers only ok or not ok (and answers a load balancer that asks by address), staff see what
each check found."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.live import live_env, manage

PRODUCTION = {"DJANGO_SETTINGS_MODULE": "biasstudy.settings", "DJANGO_DEBUG": "0"}


@pytest.mark.parametrize(
    "key", ["", "   ", "short-but-not-empty", "a" * 64], ids=["empty", "blank", "short", "one-char"]
)
def test_production_settings_refuse_an_empty_blank_or_weak_secret_key(tmp_path, key):
    env = live_env(f"sqlite:///{tmp_path / 'key.sqlite3'}", DJANGO_SECRET_KEY=key, **PRODUCTION)
    done = manage("check", env=env)
    assert done.returncode != 0
    assert "DJANGO_SECRET_KEY is too weak" in done.stderr


def test_production_settings_accept_a_long_random_secret_key(tmp_path):
    env = live_env(f"sqlite:///{tmp_path / 'key.sqlite3'}", DJANGO_SECRET_KEY="k3y-" + "x7Yq" * 13, **PRODUCTION)
    done = manage("check", env=env)
    assert done.returncode == 0, done.stderr


def test_anonymous_health_callers_see_only_ok(client, db):
    response = client.get("/health/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_staff_see_what_each_health_check_found(admin_client, db):
    body = admin_client.get("/health/").json()
    assert body["status"] == "ok"
    assert body["database"]["ok"] and body["database"]["vendor"]
    assert body["tasks"]["ok"] and body["judge_runs"]["ok"]


def test_a_load_balancer_asking_by_address_gets_the_health_answer_not_a_400(client, db):
    response = client.get("/health/", HTTP_HOST="10.0.0.5:8000")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    # Only /health/: every other page still refuses a host that is not allowed.
    assert client.get("/", HTTP_HOST="10.0.0.5:8000").status_code == 400


def test_health_is_not_redirected_to_https_so_a_plain_http_check_works(client, db, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/health/").status_code == 200
    assert client.get("/").status_code == 301


def test_a_judge_run_that_stopped_making_progress_makes_health_unhealthy(client, admin_client, db, settings):
    from judges.models import JudgeRun
    from tests.factories import make_llm_judge, make_question, make_study

    settings.JUDGE_RUN_STALE_SECONDS = 60
    study = make_study(slug="stalled")
    make_question(study)
    judge = make_llm_judge(name="stalled-judge").judge
    run = JudgeRun.objects.create(study=study, judge=judge, status=JudgeRun.Status.RUNNING, total=6)
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=90))
    assert client.get("/health/").status_code == 200  # silent for 1.5 stale times: the watchdog's turn
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(seconds=121))
    anonymous = client.get("/health/")
    assert anonymous.status_code == 503 and anonymous.json() == {"status": "unhealthy"}
    staff = admin_client.get("/health/").json()
    assert staff["judge_runs"]["stalled_runs"] == [run.pk]


def test_a_queued_judge_run_no_worker_took_makes_health_unhealthy_and_can_be_resumed(
    client, admin_client, db, settings
):
    # Its job lost: Redis restarted without its data, or the queue refused the job and the
    # database refused the undo. Resuming it queues it again.
    from judges.models import JudgeRun
    from judges.services import JudgeRunError, judge_run_resume, judge_run_start
    from tests.factories import make_llm_judge, make_question, make_study

    settings.JUDGE_RUN_STALE_SECONDS = 60
    study = make_study(slug="untaken")
    make_question(study)
    judge = make_llm_judge(name="untaken-judge").judge
    run = judge_run_start(study=study, judge=judge, enqueue=False)
    assert client.get("/health/").status_code == 200  # just queued
    with pytest.raises(JudgeRunError, match="cannot be resumed"):
        judge_run_resume(run=run, enqueue=False)
    JudgeRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=6))
    with pytest.raises(JudgeRunError, match="resume it"):
        judge_run_start(study=study, judge=judge, enqueue=False)
    assert client.get("/health/").json() == {"status": "unhealthy"}
    staff = admin_client.get("/health/").json()
    assert staff["judge_runs"]["untaken_runs"] == [run.pk] and "no worker took" in staff["judge_runs"]["error"]
    judge_run_resume(run=run, enqueue=False)
    assert client.get("/health/").status_code == 200
