"""The OpenAI-compatible path end to end against llama.cpp's own server on the SmolLM2 file."""

import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from biasstudy.localmodel import default_gguf_path
from judges.models import CachedResponse, JudgeRun
from judges.services import judge_run_execute, judge_run_start, llm_judge_test_connection
from tests.factories import make_llm_judge, make_question, make_study

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(default_gguf_path() is None, reason="SmolLM2 GGUF not installed"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server():
    pytest.importorskip("uvicorn", reason="pip install -r requirements-test.txt (llama-cpp-python[server] extras)")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base_url}/models", timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"llama_cpp.server did not start: {process.stderr.read()[-2000:]!r}") from None
                time.sleep(0.3)
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_a_run_through_llama_cpp_server_stores_votes_with_option_probabilities(db, llama_server):
    study = make_study()
    make_question(study, text="What is 2 + 2?", a1="2 + 2 = 4.", a2="2 + 2 = 5.")
    config = make_llm_judge(
        base_url=llama_server, model="smollm2", prompt_style="vote_only", votes_per_item=2, max_tokens=2,
        concurrency=1, invalid_retries=0, timeout=120, seed=0, logprobs=True,
    )  # fmt: skip
    ok, message = llm_judge_test_connection(config=config)
    assert ok and "log-probabilities" in message, message

    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    run = judge_run_execute(run_id=run.pk)
    assert run.status == JudgeRun.Status.DONE
    votes = list(run.votes.all())
    assert len(votes) == 2
    assert {v.parse_status for v in votes} <= {"ok", "invalid"}  # the server answered every request
    assert {v.shown_first for v in votes} == {"a1", "a2"}
    for response in CachedResponse.objects.filter(model="smollm2"):
        assert response.logprobs and all(len(token[2]) >= 2 for token in response.logprobs)
    parsed = [v for v in votes if v.parse_status == "ok"]
    assert parsed, [v.raw_output for v in votes]
    for vote in parsed:
        assert sum(vote.option_probs.values()) == pytest.approx(1.0)
        assert vote.option_probs[vote.choice_shown] == max(vote.option_probs.values())
        assert vote.meta["tokens_in"] > 50
