"""The OpenAI-compatible path end to end against llama.cpp's own server on the SmolLM2 file."""

import pytest

from judges.models import CachedResponse, JudgeRun
from judges.services import judge_run_execute, judge_run_start, llm_judge_test_connection
from tests.factories import make_llm_judge, make_question, make_study
from tests.llama_server import needs_gguf

pytestmark = [pytest.mark.slow, needs_gguf]


def run_votes(study, config):
    run = judge_run_start(study=study, judge=config.judge, enqueue=False)
    run = judge_run_execute(run_id=run.pk)
    assert run.status == JudgeRun.Status.DONE
    return {(v.item_id, v.round): v for v in run.votes.all()}


def test_a_constrained_run_through_llama_cpp_server_parses_every_vote_and_repeats_exactly(db, llama_server):
    """With the grammar, the server can only write one of the labels: every vote parses, whatever
    a 135M model would have written freely. The model still chooses; we assert what the code
    guarantees (a vote per request, both orders, option probabilities that sum to 1, the same
    answers when asked again), never which answer it is."""
    study = make_study()
    make_question(study, text="What is 2 + 2?", a1="2 + 2 = 4.", a2="2 + 2 = 5.")
    make_question(study, text="Which is bigger, 3 or 7?", a1="7 is bigger than 3.", a2="3 is bigger than 7.")
    config = make_llm_judge(
        base_url=llama_server, model="smollm2", prompt_style="vote_only", votes_per_item=2, max_tokens=4,
        concurrency=1, invalid_retries=0, timeout=120, seed=0, logprobs=True, constrain_vote=True,
    )  # fmt: skip
    ok, message = llm_judge_test_connection(config=config)
    assert ok and "log-probabilities" in message, message

    votes = run_votes(study, config)
    assert len(votes) == 4
    assert {v.parse_status for v in votes.values()} == {"ok"}, [v.raw_output for v in votes.values()]
    assert {v.raw_output for v in votes.values()} <= {"Answer1", "Answer2", "Tie"}
    assert sorted(v.shown_first for v in votes.values()) == ["a1", "a1", "a2", "a2"]
    assert all(v.meta["tokens_in"] > 50 and not v.meta["cached"] for v in votes.values())
    for response in CachedResponse.objects.filter(model="smollm2"):
        assert response.logprobs and all(len(token[2]) >= 2 for token in response.logprobs)
    for vote in votes.values():
        assert vote.option_probs is not None and sum(vote.option_probs.values()) == pytest.approx(1.0)

    CachedResponse.objects.all().delete()  # ask the server again rather than read the cache
    again = run_votes(study, config)
    assert not any(v.meta["cached"] for v in again.values())
    assert {key: (v.raw_output, v.option_probs) for key, v in again.items()} == {
        key: (v.raw_output, v.option_probs) for key, v in votes.items()
    }


def test_an_unconstrained_reply_that_names_no_label_is_kept_as_invalid_never_guessed(db, llama_server):
    """Without the grammar the same model writes freely: whatever it wrote is stored verbatim, and
    a vote counts only when its line names exactly one label (asserted against our own parser)."""
    from judges.parsing import parse_vote
    from judges.prompts import label_scheme

    study = make_study()
    make_question(study, text="What is 2 + 2?", a1="2 + 2 = 4.", a2="2 + 2 = 5.")
    config = make_llm_judge(
        base_url=llama_server, model="smollm2", prompt_style="vote_only", votes_per_item=2, max_tokens=6,
        concurrency=1, invalid_retries=0, timeout=120, seed=0, logprobs=True,
    )  # fmt: skip
    votes = run_votes(study, config)
    assert len(votes) == 2
    for vote in votes.values():
        parsed = parse_vote(vote.raw_output, style="vote_only", scheme=label_scheme("answer12"))
        assert vote.parse_status == ("ok" if parsed.ok else "invalid")
        assert vote.choice_shown == parsed.choice
