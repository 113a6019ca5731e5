"""Model-made factual errors through the OpenAI-compatible backend on llama.cpp's own server (the
SmolLM2 file), with the grammar of the reply format: once narrowed to a scripted reply, so the whole
path from request to stored variant runs on a known text, and once as it is, so SmolLM2 chooses.

Both go through `perturbation_generate`, the function the admin form, the API and the task worker
call; `complete` is a JudgeModel of the configuration (as the service makes one) with a small
max_tokens, so that each request takes seconds on one thread.
"""

import pytest
from django.urls import reverse
from django.utils.html import escape

from annotations.models import Answer
from biasstudy import gbnf
from perturbations import modelgen
from perturbations.services import perturbation_generate
from tests.factories import make_llm_judge, make_question, make_study
from tests.llama_server import needs_gguf

pytestmark = [pytest.mark.slow, needs_gguf]

QUESTION = "Why does the Moon cause tides on Earth?"
A2 = "The Moon orbits the Earth about once every 27 days. Its gravity causes the ocean tides."
# In the format the grammar admits (one line of JSON, ", " between entries): what a model able to
# follow the prompt would write.
SCRIPTED_REPLY = (
    "```answer\nThe Moon orbits the Earth about once every 45 days. Its magnetism causes the ocean tides.\n```\n"
    '```errors\n[{"original": "27 days", "error": "45 days", "explanation": "The Moon takes about 27 days."}, '
    '{"original": "gravity", "error": "magnetism", "explanation": "Tides come from gravity."}]\n```'
)


@pytest.fixture
def study(db):
    study = make_study(slug="moon", title="Tides")
    make_question(study, external_id="moon", text=QUESTION, a1="Tides come from the Moon's pull.", a2=A2)
    return study


@pytest.fixture
def generator(llama_server):
    return make_llm_judge(
        name="SmolLM2 on llama.cpp's server", base_url=llama_server, model="smollm2", timeout=120, max_retries=0
    )


class ScriptedReply(modelgen.JudgeModel):
    """The configuration's model with the reply format's grammar narrowed to one fixed text (built
    with the same GBNF helper): the server can then write only that reply. Keeps the grammars it
    was asked to send, to show that the service asked for the format's."""

    def __init__(self, *args, reply: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reply = reply
        self.asked: list[str | None] = []

    def __call__(self, system: str, user: str, *, grammar: str | None = None) -> str:
        self.asked.append(grammar)
        return super().__call__(system, user, grammar=gbnf.exactly([self.reply]))


def test_a_scripted_factual_error_reply_from_llama_cpp_server_is_stored_with_its_errors(study, generator):
    model = ScriptedReply(generator, seed=1, max_tokens=160, reply=SCRIPTED_REPLY)
    result = perturbation_generate(
        study=study, kind="factual_error", seed=1, method="model", complete=model, constrain_format=True
    )
    assert model.asked == [modelgen.reply_grammar(wants_errors=True)]
    assert not result.failed, result.failed
    (variant,) = result.created
    variant.refresh_from_db()
    assert variant.review_status == Answer.Review.PENDING
    assert variant.text == "The Moon orbits the Earth about once every 45 days. Its magnetism causes the ocean tides."
    assert variant.inserted_errors == [
        {"original": "27 days", "error": "45 days", "explanation": "The Moon takes about 27 days."},
        {"original": "gravity", "error": "magnetism", "explanation": "Tides come from gravity."},
    ]
    step = variant.provenance["steps"][0]
    assert step["raw_output"] == SCRIPTED_REPLY  # what the server wrote, token by token, under the grammar
    assert step["prompt"]["grammar"] == modelgen.reply_grammar(wants_errors=True)
    assert step["model"]["base_url"] == generator.base_url and step["model"]["backend"] == "openai_compatible"
    assert variant.checks["factual"]["errors_missing"] == []
    assert result.report.created == 1 and result.report.failures == []


def test_with_the_format_grammar_alone_smollm2_answers_in_blocks_and_a_failure_shows_what_it_wrote(
    study, generator, staff_client
):
    """SmolLM2 chooses the words; the grammar only lets it write our blocks. Whether its reply
    parses within 48 tokens is the model's doing, so both outcomes are checked for what the code
    guarantees: a parsed reply is stored as parsed, a failed one is on the review page with the
    model's raw output and the reason."""
    model = modelgen.JudgeModel(generator, seed=1, max_tokens=48)
    result = perturbation_generate(
        study=study, kind="factual_error", seed=1, method="model", complete=model, constrain_format=True
    )
    if result.created:
        (variant,) = result.created
        variant.refresh_from_db()
        raw = variant.provenance["steps"][0]["raw_output"]
        parsed = modelgen.parse_output(raw, wants_errors=True)
        assert (variant.text, variant.inserted_errors) == (parsed.text, parsed.errors)
        assert variant.inserted_errors and "ok" in variant.checks
    else:
        ((question, why),) = result.failed
        (failure,) = result.report.failures
        raw = failure["raw_output"]
        assert failure == {"question": "moon", "reason": why, "raw_output": raw}
        with pytest.raises(modelgen.ModelOutputError) as caught:
            modelgen.parse_output(raw, wants_errors=True)
        assert str(caught.value) == why
        assert not Answer.objects.variants().exists()
        html = staff_client.get(reverse("admin:perturbations_review", args=[study.pk])).content.decode()
        assert escape(why) in html and escape(raw) in html
    # Unconstrained, SmolLM2 opens with prose; the grammar allows only the answer block first.
    assert raw.startswith("```answer\n"), raw
