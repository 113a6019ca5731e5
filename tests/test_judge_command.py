"""manage.py run_judge and create_demo_judges."""

import io

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Judge
from judges.models import JudgeRun
from judges.services import DEMO_JUDGE_NAME
from tests.factories import make_llm_judge, make_question, make_study
from tests.judge_server import JudgeServer


def test_run_judge_with_wait_runs_inline_and_prints_a_summary(db):
    study = make_study(slug="cmd-study")
    make_question(study, a1="A GOOD answer.", a2="A weak answer.")
    with JudgeServer() as server:
        make_llm_judge(name="cmd-judge", base_url=server.base_url, prompt_style="vote_only", votes_per_item=4)
        out = io.StringIO()
        call_command("run_judge", "--study", "cmd-study", "--judge", "cmd-judge", "--wait", stdout=out, verbosity=0)
        assert out.getvalue() == ""
        call_command("run_judge", "--study", "cmd-study", "--judge", "cmd-judge", "--resume", "--wait", stdout=out)
    run = JudgeRun.objects.get()
    assert run.status == "done" and run.votes.count() == 4
    assert "votes 4/4 (invalid 0, failed 0, from cache 0)" in out.getvalue()


def test_run_judge_without_wait_queues_the_run(db, django_capture_on_commit_callbacks):
    study = make_study(slug="queued")
    make_question(study)
    make_llm_judge(name="queued-judge")
    out = io.StringIO()
    call_command("run_judge", "--study", "queued", "--judge", "queued-judge", "--votes-per-item", "3", stdout=out)
    run = JudgeRun.objects.get()
    assert run.total == 3 and "queued" in out.getvalue()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--study", "nope", "--judge", "j"], "--study 'nope': no study"),
        (["--study", "s1", "--judge", "nope"], "--judge 'nope': no LLM judge"),
        (["--study", "s1", "--judge", "j", "--resume"], "--resume: j has no run"),
        (["--study", "empty", "--judge", "j"], "has no comparison items"),
    ],
)
def test_run_judge_names_what_is_wrong(db, args, message):
    make_question(make_study(slug="s1"))
    make_study(slug="empty")
    make_llm_judge(name="j")
    with pytest.raises(CommandError, match=message):
        call_command("run_judge", *args)
    assert not JudgeRun.objects.exists()


def test_create_demo_judges_is_idempotent(db):
    call_command("create_demo_judges", verbosity=0)
    call_command("create_demo_judges", verbosity=0)
    judge = Judge.objects.get(name=DEMO_JUDGE_NAME)
    assert (judge.kind, judge.llm_config.backend, judge.llm_config.prompt_style) == ("llm", "local", "vote_only")
