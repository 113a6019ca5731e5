"""Judge runs through the API: started, cancelled and resumed by the judges app's services,
with the run executed for real against the scriptable OpenAI-compatible server on loopback."""

import pytest
from django.urls import reverse

from annotations.models import Vote
from judges.models import JudgeRun
from judges.services import judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer


@pytest.fixture
def server():
    with JudgeServer() as srv:
        yield srv


@pytest.fixture
def judged_study(db):
    study = make_study(slug="judged")
    for n in range(3):
        make_question(study, text=f"Question {n}?", a1="A GOOD answer.", a2="A weak answer.")
    return study


def llm_judge(server=None, **kw):
    kw.setdefault("prompt_style", "vote_only")
    kw.setdefault("votes_per_item", 2)
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 5)
    if server is not None:
        kw["base_url"] = server.base_url
    return make_llm_judge(**kw)


def start(client, study, judge, **extra):
    return client.post(reverse("api:runs"), {"study": study.slug, "judge": judge.pk, **extra}, format="json")


def test_a_run_started_through_the_api_runs_and_its_votes_land(
    server, judged_study, token_client, django_capture_on_commit_callbacks
):
    config = llm_judge(server)
    with django_capture_on_commit_callbacks(execute=True):
        response = start(token_client, judged_study, config.judge, votes_per_item=3)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert response["Location"] == reverse("api:run-detail", args=[body["id"]])
    assert body["study"] == "judged" and body["judge"] == config.judge.pk and body["total"] == 9
    assert body["status"] == "queued" and body["can_cancel"]  # as it was when the request answered
    assert body["config"]["votes_per_item"] == 3

    # The immediate task backend of the tests ran it on commit: every vote is in.
    run = JudgeRun.objects.get(pk=body["id"])
    assert run.status == JudgeRun.Status.DONE
    assert Vote.objects.filter(run_id=run.pk, judge=config.judge).count() == 9
    assert len(server.log) == 9
    assert run.created_by.is_staff

    detail = token_client.get(reverse("api:run-detail", args=[run.pk])).json()
    assert detail["status"] == "done" and not detail["can_cancel"] and detail["can_resume"]
    progress = detail["progress"]
    assert progress["done"] == progress["total"] == 9 and progress["remaining"] == 0
    assert progress["percent"] == 100.0 and progress["failed"] == 0 and progress["last_errors"] == []
    # The vote list of the API finds them by run.
    votes = token_client.get(reverse("api:votes"), {"run": run.pk}).json()["results"]
    assert len(votes) == 9 and {v["choice"] for v in votes} == {"a1"}


def test_the_list_shows_each_run_with_progress_and_filters_by_study_judge_and_status(judged_study, token_client):
    first, second = llm_judge(), llm_judge()
    other_study = make_study(slug="other")
    make_question(other_study)
    run1 = judge_run_start(study=judged_study, judge=first.judge, enqueue=False)
    run2 = judge_run_start(study=other_study, judge=second.judge, enqueue=False)
    run2.cancel()

    def ids(**params):
        response = token_client.get(reverse("api:runs"), params)
        assert response.status_code == 200, response.json()
        return [row["id"] for row in response.json()["results"]]

    assert ids() == [run1.pk, run2.pk]
    assert ids(study="judged") == [run1.pk]
    assert ids(judge=second.judge.pk) == [run2.pk]
    assert ids(status="cancelled") == [run2.pk]
    assert ids(status="queued", study="other") == []
    row = token_client.get(reverse("api:runs")).json()["results"][0]
    assert row["progress"]["total"] == 6 and row["progress"]["done"] == 0 and row["judge_name"] == first.judge.name


@pytest.mark.parametrize(
    ("params", "field"),
    [({"study": "nope"}, "study"), ({"judge": "x"}, "judge"), ({"status": "sleeping"}, "status")],
)
def test_a_bad_run_filter_is_a_400_naming_it(db, token_client, params, field):
    response = token_client.get(reverse("api:runs"), params)
    assert response.status_code == 400
    assert field in response.json()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"judge": 1}, "study"),
        ({"study": "nope"}, "study"),
        ({"study": "judged", "judge": 10**6}, "judge"),
        ({"study": "judged", "votes_per_item": 0}, "votes_per_item"),
        ({"study": "judged", "votes_per_item": 101}, "votes_per_item"),
    ],
)
def test_a_bad_start_request_is_a_400_naming_the_field(judged_study, token_client, body, field):
    config = llm_judge()
    body = {"judge": config.judge.pk, **body} if "judge" not in body else body
    response = token_client.post(reverse("api:runs"), body, format="json")
    assert response.status_code == 400
    assert field in response.json(), response.json()
    assert not JudgeRun.objects.exists()


def test_what_the_service_refuses_is_a_400_with_its_reason(judged_study, token_client, voted_study):
    config = llm_judge()
    # Not an LLM judge: the human pool of another study.
    response = start(token_client, judged_study, voted_study.humans)
    assert response.status_code == 400
    assert "not an LLM judge" in response.json()["detail"]
    # A second run while the first is still queued.
    assert start(token_client, judged_study, config.judge).status_code == 201
    response = start(token_client, judged_study, config.judge)
    assert response.status_code == 400
    assert "still queued" in response.json()["detail"]
    assert JudgeRun.objects.count() == 1


def test_a_run_is_cancelled_and_resumed_through_the_api(
    server, judged_study, token_client, django_capture_on_commit_callbacks
):
    config = llm_judge(server)
    run = judge_run_start(study=judged_study, judge=config.judge, enqueue=False)
    cancel = reverse("api:run-cancel", args=[run.pk])
    response = token_client.post(cancel)
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled" and response.json()["can_resume"]
    # Cancelling again: the service says why not.
    response = token_client.post(cancel)
    assert response.status_code == 400 and "only queued or running" in response.json()["detail"]

    with django_capture_on_commit_callbacks(execute=True):
        response = token_client.post(reverse("api:run-resume", args=[run.pk]), {"retry_failed": True}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "queued" and response.json()["retry_failed"] is True
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.DONE and run.votes.count() == 6


def test_a_live_run_cannot_be_resumed_and_a_bad_flag_is_named(judged_study, token_client):
    run = judge_run_start(study=judged_study, judge=llm_judge().judge, enqueue=False)
    resume = reverse("api:run-resume", args=[run.pk])
    response = token_client.post(resume, {"retry_failed": "perhaps"}, format="json")
    assert response.status_code == 400 and "retry_failed" in response.json()
    response = token_client.post(resume)
    assert response.status_code == 400 and "cannot be resumed" in response.json()["detail"]


def test_llm_judges_are_listed_with_the_key_s_variable_name_only(db, token_client, monkeypatch):
    monkeypatch.setenv("TEST_JUDGE_KEY", "sk-secret-value-123")
    config = llm_judge(api_key_env="TEST_JUDGE_KEY")
    response = token_client.get(reverse("api:llm-judges"))
    assert response.status_code == 200
    (row,) = response.json()["results"]
    assert row["id"] == config.pk and row["judge"] == config.judge.pk and row["name"] == config.judge.name
    assert row["api_key_env"] == "TEST_JUDGE_KEY" and row["prompt_style"] == "vote_only"
    detail = token_client.get(reverse("api:llm-judge-detail", args=[config.pk]))
    assert detail.json() == row
    assert b"sk-secret-value-123" not in response.content + detail.content


@pytest.mark.parametrize("name", ["api:run-detail", "api:run-cancel", "api:run-resume", "api:llm-judge-detail"])
def test_a_missing_run_or_judge_is_a_404(db, token_client, name):
    url = reverse(name, args=[10**6])
    response = token_client.post(url) if name.endswith(("cancel", "resume")) else token_client.get(url)
    assert response.status_code == 404 and response.json()["detail"]
    huge = url.replace(str(10**6), str(2**70))
    assert (
        token_client.post(huge) if name.endswith(("cancel", "resume")) else token_client.get(huge)
    ).status_code == 404


@pytest.mark.parametrize(
    ("persona", "status"), [("anon_client", 401), ("rater_session_client", 401), ("user_client", 403)]
)
def test_only_staff_may_see_start_cancel_or_resume_runs(judged_study, rater, persona, status, request):
    client = request.getfixturevalue(persona)
    config = llm_judge()
    run = judge_run_start(study=judged_study, judge=config.judge, enqueue=False)
    for url in [reverse("api:runs"), reverse("api:run-detail", args=[run.pk]), reverse("api:llm-judges")]:
        assert client.get(url).status_code == status, url
    other = llm_judge()
    body = {"study": judged_study.slug, "judge": other.judge.pk}
    assert client.post(reverse("api:runs"), body, content_type="application/json").status_code == status
    assert client.post(reverse("api:run-cancel", args=[run.pk])).status_code == status
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.QUEUED
    assert client.post(reverse("api:run-resume", args=[run.pk])).status_code == status
    assert JudgeRun.objects.count() == 1
