"""The grammar of the generator's reply format (modelgen.reply_grammar), checked with llama.cpp's own
grammar sampler: it admits the replies the parser needs and refuses what the parser would refuse;
and the option that sends it, from the service, the admin form, the API and the `perturb` command,
against the scriptable OpenAI-compatible server on loopback."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.urls import reverse

from annotations.models import Answer
from biasstudy import gbnf
from judges.services import llm_judge_demo_create
from perturbations import modelgen
from perturbations.services import PerturbationError, perturbation_generate
from tests.factories import make_llm_judge, make_question, make_study
from tests.llama_server import grammar_admits, needs_gguf
from tests.test_perturb_model import A2, FE_OUTPUT, QUESTION, ScriptedServer, scripted_generator

FE_GRAMMAR = modelgen.reply_grammar(wants_errors=True)
ANSWER_GRAMMAR = modelgen.reply_grammar(wants_errors=False)
CANONICAL = (
    "```answer\nThe Moon orbits the Earth about once every 45 days.\nIts magnetism 🌙 causes the `ocean` tides.\n```\n"
    '```errors\n[{"original": "27 days", "error": "45 days", "explanation": "About 27 days, \\"sidereal\\"."}, '
    '{"original": "gravity", "error": "magnetism", "explanation": ""}]\n```'
)


@pytest.fixture
def study(db):
    study = make_study(slug="moon")
    make_question(study, text=QUESTION, a1="Tides come from the Moon's pull.", a2=A2)
    return study


@needs_gguf
@pytest.mark.parametrize(
    ("grammar", "reply", "wants_errors"),
    [
        (FE_GRAMMAR, CANONICAL, True),
        (FE_GRAMMAR, CANONICAL.replace("\n```\n```errors", "\n```\n\n```errors").replace(", {", ",\n{"), True),
        (FE_GRAMMAR, "```answer\nX.\n```\n```errors\n[" + ", ".join(['{"original": "a", "error": "b", "explanation": "c"}'] * 5) + "]\n```", True),
        (ANSWER_GRAMMAR, "```answer\n### Tides 🌊\n\n- **gravity** [1]\n\nReferences\n[1] Vance (2004).\n```", False),
    ],
)  # fmt: skip
def test_the_grammar_admits_replies_in_the_format_and_each_parses(grammar, reply, wants_errors):
    assert grammar_admits(grammar, reply)
    assert modelgen.parse_output(reply, wants_errors=wants_errors).text


@needs_gguf
@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("Sure! Here it is.", id="prose"),
        pytest.param(CANONICAL[:-3], id="cut before the last fence"),
        pytest.param(CANONICAL.split("\n```errors")[0], id="no errors block"),
        pytest.param(CANONICAL.replace("answer\nThe", "answer\n The"), id="answer starts with a space"),
        pytest.param(CANONICAL.replace("45 days.\n", "45 ``` days.\n"), id="a fence inside the answer"),
        pytest.param("```answer\nX.\n```\n```errors\n[]\n```", id="empty errors list"),
        pytest.param(CANONICAL.replace('"original": "gravity"', '"original": " gravity"'), id="blank original"),
        pytest.param(CANONICAL.replace("answer\nThe", "answer\n\u00a0The"), id="answer starts with a no-break space"),
        pytest.param(CANONICAL.replace('"error": "magnetism"', '"error": "\u3000magnetism"'), id="error starts blank"),
        pytest.param(CANONICAL.replace('"error": "45 days", ', ""), id="an entry without its error"),
        pytest.param(CANONICAL.replace("27 days", "27\\u0000days"), id="a unicode escape"),
        pytest.param(CANONICAL + "\nThanks!", id="text after the blocks"),
        pytest.param(
            "```answer\nX.\n```\n```errors\n[" + ", ".join(['{"original": "a", "error": "b", "explanation": ""}'] * 6)
            + "]\n```",
            id="six errors",
        ),
    ],
)  # fmt: skip
def test_the_grammar_refuses_what_the_parser_needs_otherwise(reply):
    assert not grammar_admits(FE_GRAMMAR, reply)


@needs_gguf
def test_a_literal_grammar_admits_exactly_its_text():
    text = 'Line "one"\n\ttab \\ backslash 🌙'
    grammar = gbnf.exactly([text])
    assert grammar == 'root ::= "Line \\"one\\"\\n\\ttab \\\\ backslash 🌙"\n'
    assert grammar_admits(grammar, text)
    assert not grammar_admits(grammar, text[:-1]) and not grammar_admits(grammar, text + ".")
    with pytest.raises(ValueError, match="at least one text"):
        gbnf.exactly([])


def test_the_prompt_and_the_grammar_name_every_field_of_an_error_the_parser_reads():
    user = modelgen.build_user_prompt(
        template=modelgen.prompt_template_for("factual_error"), question=QUESTION, answer=A2, wants_errors=True
    )
    for key in modelgen.ERROR_FIELDS:
        assert f'"{key}": ' in user and f'"\\"{key}\\": "' in FE_GRAMMAR
    assert "```answer" in user and "```errors" in user
    assert "errors-block" not in ANSWER_GRAMMAR


def test_a_reply_cut_inside_a_block_says_the_block_is_never_closed():
    with pytest.raises(modelgen.ModelOutputError, match=r"the ```answer block is never closed"):
        modelgen.parse_output("```answer\nThe Moon orbits", wants_errors=False)
    with pytest.raises(modelgen.ModelOutputError, match=r"the ```errors block is never closed"):
        modelgen.parse_output(CANONICAL[:-30], wants_errors=True)


# --------------------------------------------------------------------------- the option that sends it


@pytest.mark.parametrize(("kind", "wants_errors"), [("factual_error", True), ("reference", False)])
def test_a_constrained_generation_sends_the_format_grammar_and_keeps_it_in_the_provenance(
    study, monkeypatch, kind, wants_errors
):
    reply = FE_OUTPUT if wants_errors else f"```answer\n{A2} [1]\n\nReferences\n[1] Vance, K. (2004). Tides.\n```"
    with ScriptedServer([reply, reply]) as server:
        config = scripted_generator(server, monkeypatch)
        result = perturbation_generate(
            study=study, kind=kind, seed=1, method="model", generator=config, constrain_format=True
        )
        perturbation_generate(study=study, kind=kind, seed=2, method="model", generator=config)
    grammar = modelgen.reply_grammar(wants_errors=wants_errors)
    constrained, free = (request["body"] for request in server.requests)
    assert constrained["grammar"] == grammar  # llama.cpp's server reads it at the top level of the body
    assert "grammar" not in free
    (variant,) = result.created
    assert variant.provenance["steps"][0]["prompt"]["grammar"] == grammar


@pytest.mark.parametrize("backend", ["local", "anthropic", None])
def test_a_generator_that_cannot_send_a_grammar_is_refused_before_anything_is_asked(study, monkeypatch, backend):
    monkeypatch.setenv("TEST_ANTHROPIC_KEY", "sk-ant-test")
    generator = {
        "local": llm_judge_demo_create,
        "anthropic": lambda: make_llm_judge(backend="anthropic", model="claude", api_key_env="TEST_ANTHROPIC_KEY"),
        None: lambda: None,
    }[backend]()
    with pytest.raises(PerturbationError, match="only the OpenAI-compatible backend sends a grammar"):
        perturbation_generate(
            study=study, kind="factual_error", seed=1, method="model", generator=generator, constrain_format=True
        )
    with pytest.raises(PerturbationError, match="use method 'model'"):
        perturbation_generate(study=study, kind="reference", seed=1, constrain_format=True)
    assert not Answer.objects.variants().exists()


def test_the_generator_adapter_never_drops_a_grammar_silently(study):
    local = modelgen.JudgeModel(llm_judge_demo_create(), seed=1)
    with pytest.raises(modelgen.GeneratorError, match="only the OpenAI-compatible backend sends a grammar"):
        local(modelgen.SYSTEM_PROMPT, "Say hello.", grammar=ANSWER_GRAMMAR)


def test_the_form_offers_the_grammar_for_local_llama_cpp_servers_and_queues_it(
    staff_client, study, monkeypatch, django_capture_on_commit_callbacks
):
    url = reverse("admin:perturbations_generate") + f"?ids={study.pk}"
    local = llm_judge_demo_create()
    with ScriptedServer([FE_OUTPUT]) as server:
        config = scripted_generator(server, monkeypatch)
        form = staff_client.get(url).context["form"]
        assert "local llama.cpp server" in form.fields["generator"].help_text
        assert "grammar option below" in form.fields["generator"].help_text
        assert "llama.cpp server" in form.fields["constrain_format"].help_text
        fields = {"kind": "factual_error", "seed": 1, "of": "a2", "constrain_format": "on"}
        refused = staff_client.post(url, {**fields, "method": "model", "generator": local.pk}).context["form"]
        assert "only the OpenAI-compatible backend" in refused.errors["constrain_format"][0]
        refused = staff_client.post(url, {**fields, "method": "rule", "generator": config.pk}).context["form"]
        assert "choose method model" in refused.errors["constrain_format"][0]
        assert not server.requests
        with django_capture_on_commit_callbacks(execute=True):
            response = staff_client.post(url, {**fields, "method": "model", "generator": config.pk})
    assert response.status_code == 302
    (request,) = server.requests
    assert request["body"]["grammar"] == FE_GRAMMAR
    assert Answer.objects.variants().get().inserted_errors[0]["error"] == "45 days"


def test_the_api_takes_the_option_and_refuses_it_where_no_grammar_is_sent(
    study, token_client, monkeypatch, django_capture_on_commit_callbacks
):
    url = reverse("api:study-perturbations", args=["moon"])
    body = {"kind": "factual_error", "seed": 2, "method": "model", "constrain_format": True}
    refused = token_client.post(url, body, format="json")  # the default generator is the local model
    assert refused.status_code == 400
    assert "only the OpenAI-compatible backend" in refused.json()["constrain_format"][0]
    refused = token_client.post(url, {**body, "method": "rule"}, format="json")
    assert refused.status_code == 400 and refused.json()["constrain_format"] == ["only with method 'model'"]
    with ScriptedServer([FE_OUTPUT]) as server:
        generator = scripted_generator(server, monkeypatch)
        with django_capture_on_commit_callbacks(execute=True):
            response = token_client.post(url, {**body, "generator": generator.judge.name}, format="json")
    assert response.status_code == 202
    (request,) = server.requests
    assert request["body"]["grammar"] == FE_GRAMMAR
    assert Answer.objects.variants().get().inserted_errors[1]["error"] == "magnetism"


def test_the_perturb_command_sends_the_grammar_when_asked(study, monkeypatch):
    with ScriptedServer([FE_OUTPUT]) as server:
        scripted_generator(server, monkeypatch)
        call_command(
            "perturb", study="moon", kind="factual_error", seed=3, method="model", generator="Scripted rewriter",
            constrain_format=True, stdout=StringIO(),
        )  # fmt: skip
    (request,) = server.requests
    assert request["body"]["grammar"] == FE_GRAMMAR
