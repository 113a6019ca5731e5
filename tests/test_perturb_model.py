"""The model-based generator, through an LLM judge configuration and the judges' backends, against
a scriptable OpenAI-compatible server on loopback, and once against the embedded local llama.cpp model.
"""

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Answer, PerturbationKind
from biasstudy.localmodel import default_gguf_path
from judges.models import LLMJudge
from judges.services import DEMO_JUDGE_NAME, llm_judge_create, llm_judge_demo_create
from perturbations import modelgen
from perturbations.services import PerturbationError, perturbation_generate
from tests.factories import make_question, make_study

A2 = "The Moon orbits the Earth about once every 27 days. Its gravity causes the ocean tides."
QUESTION = "Why does the Moon cause tides on Earth?"
FE_OUTPUT = (
    "```answer\nThe Moon orbits the Earth about once every 45 days. Its magnetism causes the ocean tides.\n```\n"
    "```errors\n"
    '[{"original": "27 days", "error": "45 days", "explanation": "The sidereal month is about 27 days."},\n'
    ' {"original": "gravity", "error": "magnetism", "explanation": "Tides come from gravity."}]\n```'
)


class ScriptedServer:
    """Answers POST /v1/chat/completions with the next scripted reply (a string; or an int: that HTTP
    status with an error body); records every request."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.requests = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - the stdlib's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                content = server.replies.pop(0) if server.replies else ""
                if isinstance(content, int):
                    payload = json.dumps({"error": {"message": f"scripted {content}", "type": "test"}}).encode()
                    self.send_response(content)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                payload = json.dumps(
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                        ],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 5
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def study(db):
    study = make_study(slug="moon")
    make_question(study, text=QUESTION, a1="Tides come from the Moon's pull.", a2=A2)
    return study


def scripted_generator(server, monkeypatch, **fields):
    """An LLM judge configuration pointing at the scripted server; the key comes from the environment."""
    monkeypatch.setenv("TEST_PERTURB_KEY", "sk-test-123")
    fields = {"timeout": 5, "max_retries": 0, "retry_base_seconds": 0, **fields}
    return llm_judge_create(
        name="Scripted rewriter",
        backend="openai_compatible",
        model="scripted-1",
        base_url=server.base_url,
        api_key_env="TEST_PERTURB_KEY",
        **fields,
    )


def test_a_factual_error_from_the_model_is_stored_with_its_declared_errors(study, monkeypatch):
    with ScriptedServer([FE_OUTPUT]) as server:
        result = perturbation_generate(
            study=study, kind="factual_error", seed=2, method="model", generator=scripted_generator(server, monkeypatch)
        )
    assert not result.failed
    (variant,) = result.created
    variant.refresh_from_db()
    assert variant.text.startswith("The Moon orbits the Earth about once every 45 days.")
    assert [e["error"] for e in variant.inserted_errors] == ["45 days", "magnetism"]
    assert variant.review_status == Answer.Review.PENDING
    step = variant.provenance["steps"][0]
    assert step["model"] == {
        "judge": "Scripted rewriter",
        "backend": "openai_compatible",
        "model": "scripted-1",
        "base_url": server.base_url,
        "temperature": 0.0,
        "max_tokens": 1024,
        "seed": 2,
    }
    assert "sk-test" not in json.dumps(variant.provenance) and "TEST_PERTURB_KEY" not in json.dumps(variant.provenance)
    assert step["raw_output"] == FE_OUTPUT
    assert "Plant two or three factual mistakes" in step["prompt"]["user"]
    # The request carried our prompt, the original answer and the key from the environment.
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["auth"] == "Bearer sk-test-123"
    body = request["body"]
    assert body["model"] == "scripted-1" and body["seed"] == 2 and body["max_tokens"] == 1024
    assert "logprobs" not in body
    assert body["messages"][0] == {"role": "system", "content": modelgen.SYSTEM_PROMPT}
    assert A2 in request["body"]["messages"][1]["content"]
    # "27" is in the answer but not in the question, so changing it is a declared error, not a warning.
    assert variant.checks["factual"]["errors_missing"] == []
    assert variant.checks["factual"]["question_terms_altered"] == []
    assert variant.checks["ok"], variant.checks["warnings"]


def test_a_nul_character_in_the_model_s_reply_is_stored_as_a_visible_replacement(study, monkeypatch):
    """PostgreSQL cannot store a NUL in text or JSON: one in a rewrite used to fail the whole
    task there. The backends clean it, so the variant is stored on either database."""
    reply = FE_OUTPUT.replace("ocean tides.", "ocean\x00tides.").replace("about 27 days.", "about\x0027 days.")
    with ScriptedServer([reply]) as server:
        result = perturbation_generate(
            study=study, kind="factual_error", seed=3, method="model", generator=scripted_generator(server, monkeypatch)
        )
    assert not result.failed
    (variant,) = result.created
    variant.refresh_from_db()
    assert variant.text.endswith("ocean\ufffdtides.")
    assert variant.inserted_errors[0]["explanation"] == "The sidereal month is about\ufffd27 days."
    assert "\x00" not in variant.provenance["steps"][0]["raw_output"]


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Sure! The Moon orbits every 45 days.", "no ```answer block"),
        ("```answer\nThe Moon orbits every 45 days.\n```", "no ```errors block"),
        ("```answer\nThe Moon orbits every 45 days.\n```\n```errors\n[{'original': 1}]\n```", "not valid JSON"),
        ("```answer\nThe Moon orbits every 45 days.\n```\n```errors\n[]\n```", "non-empty JSON list"),
        ('```answer\nX.\n```\n```errors\n[{"original": "27 days"}]\n```', "entry 1 of the ```errors block lacks error"),
    ],
)
def test_malformed_model_output_gives_a_clear_error_and_writes_nothing(study, monkeypatch, reply, message):
    count = Answer.objects.count()
    with ScriptedServer([reply]) as server:
        result = perturbation_generate(
            study=study, kind="factual_error", seed=1, method="model", generator=scripted_generator(server, monkeypatch)
        )
    assert not result.created
    ((question, why),) = result.failed
    assert question == study.questions.get().external_id and message in why
    assert Answer.objects.count() == count


def test_a_kinds_own_prompt_is_used_when_set(study, monkeypatch):
    kind = PerturbationKind.objects.get(slug="rich_content")
    kind.model_prompt = "Decorate this answer to {question} with markdown:\n{answer}"
    kind.save()
    reply = "```answer\n### 🌙 Tides\n\nThe Moon orbits the Earth about once every 27 days. Its **gravity** causes the ocean tides.\n```"
    with ScriptedServer([reply]) as server:
        result = perturbation_generate(
            study=study, kind=kind, seed=1, method="model", generator=scripted_generator(server, monkeypatch)
        )
    user = server.requests[0]["body"]["messages"][1]["content"]
    assert user.startswith(f"Decorate this answer to {QUESTION} with markdown:\n{A2}")
    assert "```answer" in user  # our output instruction is appended to a custom prompt
    (variant,) = result.created
    assert variant.checks["preservation"]["words_added"] == 0
    assert not [w for w in variant.checks["warnings"] if w.startswith("content")]


def test_a_compound_asks_the_model_once_per_step_in_order(study, monkeypatch):
    with_refs = f"```answer\n{A2.replace('days.', 'days [1].')}\n\nReferences\n[1] Vance, K. (2004). Tides.\n```"
    decorated = "```answer\n### Tides 🌊\n\n" + with_refs.split("\n", 1)[1]
    with ScriptedServer([with_refs, decorated]) as server:
        result = perturbation_generate(
            study=study,
            kind="reference_rich_content",
            seed=1,
            method="model",
            generator=scripted_generator(server, monkeypatch),
        )
    assert len(server.requests) == 2
    assert "[1]" in server.requests[1]["body"]["messages"][1]["content"]  # step 2 rewrote step 1's output
    (variant,) = result.created
    assert [s["kind"] for s in variant.provenance["steps"]] == ["reference", "rich_content"]
    assert variant.checks["preservation"]["words_lost"] == 0


def test_a_transient_failure_is_retried_with_the_judges_backoff(study, monkeypatch):
    with ScriptedServer([503, 429, FE_OUTPUT]) as server:
        config = scripted_generator(server, monkeypatch, max_retries=2)
        result = perturbation_generate(study=study, kind="factual_error", seed=1, method="model", generator=config)
    assert len(server.requests) == 3
    assert not result.failed and len(result.created) == 1


def test_retries_are_bounded_and_then_the_question_fails_with_nothing_written(study, monkeypatch):
    count = Answer.objects.count()
    with ScriptedServer([500, 500, 500, FE_OUTPUT]) as server:
        config = scripted_generator(server, monkeypatch, max_retries=1)
        result = perturbation_generate(study=study, kind="factual_error", seed=1, method="model", generator=config)
    assert len(server.requests) == 2
    ((_, why),) = result.failed
    assert "generator 'Scripted rewriter' (openai_compatible, scripted-1): gave up after 2 tries" in why
    assert "HTTP 500" in why
    assert Answer.objects.count() == count


def test_a_refused_request_is_not_retried_and_says_which_generator(study, monkeypatch):
    count = Answer.objects.count()
    with ScriptedServer([400, FE_OUTPUT]) as server:
        config = scripted_generator(server, monkeypatch, max_retries=3)
        result = perturbation_generate(study=study, kind="factual_error", seed=1, method="model", generator=config)
    assert len(server.requests) == 1
    ((_, why),) = result.failed
    assert why.startswith("generator 'Scripted rewriter' (openai_compatible, scripted-1): HTTP 400")
    assert Answer.objects.count() == count


def test_a_generator_whose_key_variable_is_unset_is_refused_before_anything_is_asked(study, monkeypatch):
    with ScriptedServer([FE_OUTPUT]) as server:
        config = scripted_generator(server, monkeypatch)
        monkeypatch.delenv("TEST_PERTURB_KEY")
        with pytest.raises(PerturbationError, match="environment variable TEST_PERTURB_KEY .* is not set"):
            perturbation_generate(study=study, kind="factual_error", seed=1, method="model", generator=config)
    assert server.requests == []
    assert not Answer.objects.filter(derived_from__isnull=False).exists()


def test_without_a_generator_the_local_demo_judge_is_used(study):
    # The demo judge exists, pointed at a missing file: the error shows it was the one chosen.
    demo = llm_judge_demo_create()
    LLMJudge.objects.filter(pk=demo.pk).update(model="/nonexistent/rewriter.gguf")
    with pytest.raises(PerturbationError) as caught:
        perturbation_generate(study=study, kind="reference", seed=1, method="model")
    assert f"generator {DEMO_JUDGE_NAME!r} (local, /nonexistent/rewriter.gguf)" in str(caught.value)
    assert "local model file not found" in str(caught.value)


def test_the_perturb_command_uses_the_named_generator(study, monkeypatch):
    with ScriptedServer([FE_OUTPUT]) as server:
        scripted_generator(server, monkeypatch)
        out = StringIO()
        call_command(
            "perturb", study="moon", kind="factual_error", seed=3, method="model", generator="Scripted rewriter",
            stdout=out,
        )  # fmt: skip
    assert len(server.requests) == 1
    (variant,) = Answer.objects.filter(kind__slug="factual_error")
    assert variant.provenance["steps"][0]["model"]["judge"] == "Scripted rewriter"
    assert "created 1 variant(s)" in out.getvalue()


def test_the_perturb_command_names_the_known_generators_when_one_is_unknown(study):
    llm_judge_demo_create()
    with pytest.raises(CommandError, match=rf"no LLM judge named 'GPT-9' \(known: {re.escape(DEMO_JUDGE_NAME)}\)"):
        call_command("perturb", study="moon", kind="reference", method="model", generator="GPT-9")
    with pytest.raises(CommandError, match="--generator only applies to --method model"):
        call_command("perturb", study="moon", kind="reference", generator=DEMO_JUDGE_NAME)


@pytest.mark.slow
@pytest.mark.skipif(default_gguf_path() is None, reason="local GGUF model not installed")
def test_the_local_model_is_wired_and_unusable_output_is_a_clear_error(study):
    # The vote-only demo judge: a rewrite request makes the local backend generate, not score labels.
    config = llm_judge_demo_create()
    local = modelgen.JudgeModel(config, seed=1, max_tokens=24)
    raw = local(modelgen.SYSTEM_PROMPT, "Say hello.")
    assert isinstance(raw, str) and raw.strip()
    assert raw not in ("1", "2", "tie")  # generated text, not a scored vote label
    count = Answer.objects.count()
    result = perturbation_generate(study=study, kind="factual_error", seed=1, method="model", complete=local)
    # 24 tokens cannot hold an answer block and an errors block: the 135M model's reply is refused.
    assert not result.created
    ((_, why),) = result.failed
    assert "```answer" in why or "```errors" in why
    assert Answer.objects.count() == count
    assert local.describe()["judge"] == DEMO_JUDGE_NAME
    assert local.describe()["model_file"].endswith(".gguf")


UPBEAT = "```answer\nGreat news! The Moon orbits the Earth about once every 27 days. Its lovely gravity causes the ocean tides!\n```"
GLOOMY_AND_WRONG = "```answer\nSadly, the Moon just orbits the Earth. Its gravity causes the tides, as usual.\n```"


@pytest.mark.parametrize(
    ("kind", "asks"),
    [("sentiment", "more enthusiastic and upbeat"), ("sentiment_negative", "more negative and gloomy")],
)
def test_a_tone_rewrite_is_asked_in_our_words_and_checked_for_its_facts(study, monkeypatch, kind, asks):
    with ScriptedServer([UPBEAT if kind == "sentiment" else GLOOMY_AND_WRONG]) as server:
        out = StringIO()
        scripted_generator(server, monkeypatch)
        call_command(
            "perturb", study="moon", kind=kind, seed=1, method="model", generator="Scripted rewriter",
            stdout=out,
        )  # fmt: skip
    assert "created 1 variant(s)" in out.getvalue()
    (request,) = server.requests
    user = request["body"]["messages"][1]["content"]
    assert asks in user and "Every fact, number, name and step must stay" in user and A2 in user
    (variant,) = Answer.objects.filter(kind__slug=kind)
    assert variant.kind.semantics == "non_semantic" and variant.review_status == Answer.Review.PENDING
    assert variant.provenance["steps"][0]["prompt"]["user"] == user
    if kind == "sentiment":
        assert variant.text.startswith("Great news!")
        assert variant.checks["facts"] == {"dropped": []}
        # A tone rewrite changes words by design: only the facts are warned about.
        assert variant.checks["ok"], variant.checks["warnings"]
    else:  # the gloomy reply dropped "27 days": the review is told
        assert variant.checks["facts"]["dropped"] == [{"term": "27", "original": 1, "variant": 0}]
        assert "content: '27' of the original is missing or less often in the variant" in variant.checks["warnings"]
