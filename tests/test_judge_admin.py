"""The judges admin: configuration with test connection, starting a run, the live run page."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from judges.models import JudgeRun, LLMJudge
from judges.services import judge_run_start
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer


@pytest.fixture
def server():
    with JudgeServer() as srv:
        yield srv


@pytest.fixture
def study(db):
    study = make_study()
    for _ in range(2):
        make_question(study, a1="A GOOD answer.", a2="A weak answer.")
    return study


def form_data(server, **kw):
    data = {
        "name": "Loopback judge", "backend": "openai_compatible", "model": "m", "base_url": server.base_url,
        "api_key_env": "", "temperature": "0", "max_tokens": "16", "timeout": "5", "seed": "0",
        "prompt_style": "vote_only", "label_schemes": ["answer12", "ab"], "votes_per_item": "2",
        "concurrency": "2", "rpm_limit": "0", "max_retries": "1", "retry_base_seconds": "0.01",
        "invalid_retries": "1", "logprobs": "on", "system_template": "Judge fairly.",
        "user_template": LLMJudge._meta.get_field("user_template").default,
    }  # fmt: skip
    data.update(kw)
    return data


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


def test_staff_create_a_judge_and_its_judge_row_in_one_go(staff_client, server):
    response = staff_client.post(reverse("admin:judges_llmjudge_add"), form_data(server))
    assert response.status_code == 302, response.context["adminform"].form.errors
    config = LLMJudge.objects.get()
    assert (config.judge.name, config.judge.kind, config.judge.study) == ("Loopback judge", "llm", None)
    assert config.label_schemes == ["answer12", "ab"]


def test_templates_typed_in_the_browser_keep_the_line_endings_a_judge_made_by_the_command_has(staff_client, server):
    default = LLMJudge._meta.get_field("user_template").default
    data = form_data(server, user_template=default.replace("\n", "\r\n"), system_template="Judge.\r\nFairly.")
    response = staff_client.post(reverse("admin:judges_llmjudge_add"), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    config = LLMJudge.objects.get()
    assert (config.user_template, config.system_template) == (default, "Judge.\nFairly.")


def test_the_form_names_a_bad_template_field_and_a_key_given_instead_of_its_variable(staff_client, server):
    data = form_data(server, user_template="{question} {answr}", api_key_env="sk-live-123")
    response = staff_client.post(reverse("admin:judges_llmjudge_add"), data)
    errors = response.context["adminform"].form.errors
    assert "{answr}" in errors["user_template"][0]
    assert "not the key" in errors["api_key_env"][0]
    assert not LLMJudge.objects.exists()


def test_the_form_refuses_a_vote_grammar_where_no_server_would_apply_it(staff_client, server):
    data = form_data(server, backend="local", model="default", base_url="", constrain_vote="on")
    response = staff_client.post(reverse("admin:judges_llmjudge_add"), data)
    assert "Only the OpenAI-compatible backend" in response.context["adminform"].form.errors["constrain_vote"][0]
    assert not LLMJudge.objects.exists()


def test_test_connection_makes_one_call_and_reports(staff_client, server):
    config = make_llm_judge(base_url=server.base_url)
    url = reverse("admin:judges_llmjudge_test_connection", args=[config.pk])
    assert staff_client.get(url).status_code == 405
    response = staff_client.post(url)
    assert response.status_code == 302
    assert len(server.log) == 1
    assert messages_of(response)[-1].startswith("OK in ")

    broken = make_llm_judge(base_url="http://127.0.0.1:9/v1", timeout=1)
    response = staff_client.post(reverse("admin:judges_llmjudge_test_connection", args=[broken.pk]))
    assert messages_of(response)[-1].startswith("Failed: APIConnectionError")


def test_staff_start_a_run_that_the_task_worker_carries_out(
    staff_client, server, study, django_capture_on_commit_callbacks
):
    config = make_llm_judge(base_url=server.base_url, prompt_style="vote_only", votes_per_item=2)
    page = staff_client.get(reverse("admin:judges_judgerun_add") + f"?judge={config.judge_id}")
    assert page.status_code == 200 and b"Start run" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        response = staff_client.post(
            reverse("admin:judges_judgerun_add"), {"study": study.pk, "judge": config.judge_id}
        )
    run = JudgeRun.objects.get()
    assert response.url == reverse("admin:judges_judgerun_change", args=[run.pk])
    assert run.status == "done" and run.votes.count() == 4

    full = staff_client.get(response.url)
    assert b"htmx.min.js" in full.content and b"4 / 4" in full.content
    assert b"hx-trigger" not in full.content and b"Pause updates" not in full.content  # a finished run stops polling
    assert reverse("analysis:study", args=[study.slug]).encode() in full.content  # and links to its results
    # The poll that finds it finished reloads the page, so that nothing of the live page stays.
    last_poll = staff_client.get(response.url, HTTP_HX_REQUEST="true")
    assert last_poll.headers["HX-Refresh"] == "true"


def test_a_running_run_polls_and_can_be_cancelled_then_resumed(staff_client, server, study):
    config = make_llm_judge(base_url=server.base_url)
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    page = staff_client.get(reverse("admin:judges_judgerun_change", args=[run.pk]))
    assert b'hx-trigger="every 2s"' in page.content and b"Cancel run" in page.content
    fragment = staff_client.get(reverse("admin:judges_judgerun_change", args=[run.pk]), HTTP_HX_REQUEST="true")
    assert fragment.content.lstrip().startswith(b'<section id="run-progress"') and b"<html" not in fragment.content

    cancel = reverse("admin:judges_judgerun_cancel", args=[run.pk])
    assert staff_client.get(cancel).status_code == 405
    assert staff_client.post(cancel, HTTP_HX_REQUEST="true").headers["HX-Refresh"] == "true"
    page = staff_client.get(reverse("admin:judges_judgerun_change", args=[run.pk]))
    assert b"Cancelled" in page.content and b"Resume run" in page.content and b"Pause updates" not in page.content
    run.refresh_from_db()
    assert run.status == "cancelled"

    response = staff_client.post(reverse("admin:judges_judgerun_resume", args=[run.pk]), {"retry_failed": "on"})
    assert response.status_code == 302
    run.refresh_from_db()
    assert (run.status, run.retry_failed) == ("queued", True)
    response = staff_client.post(reverse("admin:judges_judgerun_resume", args=[run.pk]))
    assert "cannot be resumed" in messages_of(response)[-1]


def test_the_start_page_says_why_a_run_cannot_start(staff_client, server):
    config = make_llm_judge(base_url=server.base_url)
    empty = make_study()
    response = staff_client.post(reverse("admin:judges_judgerun_add"), {"study": empty.pk, "judge": config.judge_id})
    assert response.status_code == 200
    assert b"has no comparison items" in response.content
    assert not JudgeRun.objects.exists()


def test_visitors_and_raters_never_reach_the_judge_admin(anon_client, server, study):
    config = make_llm_judge(base_url=server.base_url)
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    user = get_user_model().objects.create_user(username="rater-like", password="pw-12345-abc")
    logged_in = Client()
    logged_in.force_login(user)
    for client in (anon_client, logged_in):
        for url in (
            reverse("admin:judges_judgerun_change", args=[run.pk]),
            reverse("admin:judges_judgerun_add"),
        ):
            assert client.get(url).status_code == 302
        for url in (
            reverse("admin:judges_judgerun_cancel", args=[run.pk]),
            reverse("admin:judges_llmjudge_test_connection", args=[config.pk]),
        ):
            assert client.post(url).status_code == 302
    run.refresh_from_db()
    assert run.status == "queued" and not server.log
