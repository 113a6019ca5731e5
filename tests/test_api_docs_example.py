"""The Python examples in docs/API.md run as written against a real server: import a study, read
its votes, start a judge run (against the loopback judge server), poll it and read the metrics."""

import re
from pathlib import Path

import pytest
from rest_framework.authtoken.models import Token

from annotations.models import Study, Vote
from judges.models import JudgeRun
from tests.factories import make_llm_judge, make_staff
from tests.judge_server import JudgeServer

DOC = Path(__file__).resolve().parents[1] / "docs" / "API.md"


@pytest.mark.slow
def test_the_python_examples_in_the_api_docs_work(live_server, transactional_db, monkeypatch, capsys):
    from django.core.cache import cache

    cache.clear()
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 2
    token = Token.objects.create(user=make_staff())
    monkeypatch.chdir(DOC.parents[1])
    namespace: dict = {}
    with JudgeServer() as server:
        # The judge the example asks for, here voting once per item through the loopback server.
        config = make_llm_judge(
            name="gpt-4o vote-only", base_url=server.base_url, prompt_style="vote_only", votes_per_item=1, max_retries=0
        )
        for block in blocks:
            code = block.replace("https://biasstudy.example.org", live_server.url)
            code = code.replace("9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b", token.key)
            exec(compile(code, str(DOC), "exec"), namespace)  # noqa: S102 - our own documentation
    study = Study.objects.get(slug="demo-2")
    run = JudgeRun.objects.get(study=study, judge=config.judge)
    items = study.items.count()
    # The tests' task backend runs the run when it is queued, so the example finds it done.
    assert run.status == JudgeRun.Status.DONE and Vote.objects.filter(run_id=run.pk).count() == items
    assert len(server.log) == items
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0] == "0 votes"
    assert lines[1] == f"run done: {items} of {items} votes"
    assert lines[2].startswith("gpt-4o vote-only ASR(reference) = ")
    assert float(lines[2].rsplit("= ", 1)[1]) >= 0
