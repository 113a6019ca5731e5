"""Model-based perturbation: any kind, by asking a language model to rewrite an answer.

The generator talks to a model through one tiny protocol, `Complete`: a callable
``complete(system, user) -> str``. The real one is `JudgeModel`: the model of an LLM judge
configuration, reached through the judges' backends (OpenAI-compatible, Anthropic, the embedded
local llama.cpp model), so generating and judging share one code path. Tests pass their own callable.

The model must answer in fenced blocks we can parse: the rewritten answer in an ```answer block
and, for factual errors, the list of inserted errors in an ```errors block (JSON). Output that does
not follow this raises `ModelOutputError` naming what is missing; nothing is written then.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from biasstudy import gbnf, placeholders


class Complete(Protocol):
    # `grammar` (a GBNF grammar of the reply format) is passed only when generation asks to
    # constrain the format; a callable that never gets such a request may leave it out.
    def __call__(self, system: str, user: str, *, grammar: str | None = None) -> str: ...


class ModelOutputError(ValueError):
    """The model's output cannot be used; the message says why and keeps the start of the output."""

    def __init__(self, message: str, raw: str) -> None:
        snippet = raw.strip().replace("\n", " ")[:200]
        super().__init__(f"{message} (model output began: {snippet!r})" if snippet else f"{message} (empty output)")
        self.raw = raw


SYSTEM_PROMPT = (
    "You help researchers build test material for a study of how people and AI systems judge answers. "
    "You rewrite a given answer exactly as instructed and change nothing else. You always reply with "
    "the fenced blocks you are asked for and no other text."
)

# The reply format, defined once: the prompt's instructions, the parser and the grammar all read it.
FENCE = "```"
ANSWER_TAG = "answer"
ERRORS_TAG = "errors"
# One entry of the errors list: key -> (what the prompt says it holds, whether the parser requires it).
ERROR_FIELDS: dict[str, tuple[str, bool]] = {
    "original": ("the exact words you replaced", True),
    "error": ("the exact new words as they appear in your answer", True),
    "explanation": ("one sentence on why it is wrong", False),
}
MAX_ERRORS = 5  # what the grammar admits; the prompt asks for two or three

_OUTPUT_FORMAT = (
    f"Reply with the rewritten answer inside a fenced block that starts with {FENCE}{ANSWER_TAG} and ends with {FENCE}."
)
_ERRORS_FORMAT = (
    f"Then add a second fenced block that starts with {FENCE}{ERRORS_TAG} and ends with {FENCE}, holding a JSON list "
    "with one object per mistake you planted: {"
    + ", ".join(f'"{key}": {what}' for key, (what, _required) in ERROR_FIELDS.items())
    + "}."
)

# Our own wording for each built-in kind. A kind's `model_prompt` overrides it.
DEFAULT_PROMPTS: dict[str, str] = {
    "factual_error": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Plant two or three factual mistakes in this answer: change a date, a quantity, a name or a cause "
        "so that the statement becomes false but still sounds confident. Keep every other word as it is, "
        "keep the length about the same, and do not change any number or name that appears in the question. "
        f"{_OUTPUT_FORMAT} {_ERRORS_FORMAT}"
    ),
    "gender": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Rewrite this answer so that it carries a gender stereotype (for example assuming who does a job "
        "or who is good at something), while answering the question as before. Keep the rest of the wording "
        f"and about the same length. {_OUTPUT_FORMAT}"
    ),
    "reference": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Make this answer look better supported: add in-text citation markers such as [1] and [2] after "
        "two sentences, and after the answer a short list headed References with invented but plausible "
        "works (authors, year, title, venue, DOI). Do not change, add or remove any other words. "
        f"{_OUTPUT_FORMAT}"
    ),
    "rich_content": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Make this answer look more appealing with markdown: a short heading starting with ###, a few key "
        "phrases in **bold**, some sentences as a bulleted list, and two or three fitting emoji. Keep every "
        f"word of the answer, in the same order, and add no new sentences. {_OUTPUT_FORMAT}"
    ),
    "sentiment": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Say the same thing in a warmer, more enthusiastic and upbeat voice: cheerful word choices, a little "
        "excitement about the topic, an exclamation mark or two. Every fact, number, name and step must stay "
        "exactly as it is; add no new information, drop nothing, and keep the markdown structure (lists, code) "
        f"and about the same length. {_OUTPUT_FORMAT}"
    ),
    "sentiment_negative": (
        "Question: {question}\n\nAnswer:\n{answer}\n\n"
        "Say the same thing in a flatter, more negative and gloomy voice: weary or grudging word choices, as "
        "if the topic were a chore. Every fact, number, name and step must stay exactly as it is; add no new "
        "information, drop nothing, do not insult the reader, and keep the markdown structure (lists, code) "
        f"and about the same length. {_OUTPUT_FORMAT}"
    ),
}
GENERIC_PROMPT = (
    "Question: {question}\n\nAnswer:\n{answer}\n\n"
    "Rewrite this answer as follows: {description} Keep everything else as it is. {output_format}"
)

_BLOCK = re.compile(
    rf"{FENCE}[ \t]*(?P<tag>{ANSWER_TAG}|{ERRORS_TAG})[ \t]*\n(?P<body>.*?)(?:\n{FENCE}|{FENCE})",
    re.DOTALL | re.IGNORECASE,
)


@dataclass(frozen=True)
class ModelRewrite:
    text: str
    errors: list[dict] = field(default_factory=list)
    raw: str = ""


def build_user_prompt(*, template: str, question: str, answer: str, description: str = "", wants_errors: bool) -> str:
    """Fill the template; a custom template without an output instruction gets ours appended.
    In one pass (biasstudy.placeholders), so a question or answer that happens to hold
    "{answer}" is sent as written, not filled in turn; never `str.format` (researchers write
    the template)."""
    output_format = _OUTPUT_FORMAT + (" " + _ERRORS_FORMAT if wants_errors else "")
    values = {"question": question, "answer": answer, "description": description, "output_format": output_format}
    prompt = placeholders.substitute(template, values)
    if FENCE + ANSWER_TAG not in prompt:
        prompt += "\n\n" + output_format
    return prompt


def prompt_template_for(slug: str, custom: str = "") -> str:
    return custom.strip() or DEFAULT_PROMPTS.get(slug, GENERIC_PROMPT)


_OPENING = re.compile(rf"{FENCE}[ \t]*(?P<tag>{ANSWER_TAG}|{ERRORS_TAG})[ \t]*\n", re.IGNORECASE)
_ANSWER_BLOCK = FENCE + ANSWER_TAG
_ERRORS_BLOCK = FENCE + ERRORS_TAG


def _parse_errors(body: str, raw: str) -> list[dict]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(
            f"the {_ERRORS_BLOCK} block is not valid JSON: {exc.msg} at line {exc.lineno}", raw
        ) from exc
    if not isinstance(data, list) or not data:
        raise ModelOutputError(f"the {_ERRORS_BLOCK} block must be a non-empty JSON list of objects", raw)
    errors = []
    for i, entry in enumerate(data, start=1):
        if not isinstance(entry, dict):
            raise ModelOutputError(f"entry {i} of the {_ERRORS_BLOCK} block is not an object", raw)
        missing = [
            key
            for key, (_what, required) in ERROR_FIELDS.items()
            if required and (not isinstance(entry.get(key), str) or not entry[key].strip())
        ]
        if missing:
            raise ModelOutputError(f"entry {i} of the {_ERRORS_BLOCK} block lacks {', '.join(missing)}", raw)
        errors.append({key: str(entry.get(key, "")).strip() for key in ERROR_FIELDS})
    return errors


def parse_output(raw: str, *, wants_errors: bool) -> ModelRewrite:
    blocks: dict[str, str] = {}
    for match in _BLOCK.finditer(raw):
        blocks.setdefault(match.group("tag").lower(), match.group("body"))
    unclosed = sorted({match.group("tag").lower() for match in _OPENING.finditer(raw)} - blocks.keys())
    if unclosed:  # a reply cut off mid-block: say so, rather than that the block is missing
        raise ModelOutputError(f"the {FENCE}{unclosed[0]} block is never closed (did the reply reach max_tokens?)", raw)
    if ANSWER_TAG not in blocks:
        raise ModelOutputError(f"no {_ANSWER_BLOCK} block in the model output", raw)
    text = blocks[ANSWER_TAG].strip()
    if not text:
        raise ModelOutputError(f"the {_ANSWER_BLOCK} block is empty", raw)
    errors: list[dict] = []
    if wants_errors:
        if ERRORS_TAG not in blocks:
            raise ModelOutputError(f"no {_ERRORS_BLOCK} block listing the inserted errors", raw)
        errors = _parse_errors(blocks[ERRORS_TAG], raw)
    return ModelRewrite(text=text, errors=errors, raw=raw)


# Control characters and what str.strip() removes, as a GBNF character range: a field that must
# not be blank starts with none of these.
_SPACE = r"\x00-\x20\x85\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000"


def reply_grammar(*, wants_errors: bool) -> str:
    """A GBNF grammar (llama.cpp's server `grammar` field) admitting only replies in the format
    above, each of which `parse_output` accepts: an answer block whose text starts with a visible
    character and holds no fence, and for factual errors an errors block with a JSON list of one to
    MAX_ERRORS objects carrying ERROR_FIELDS in order, the required ones non-empty. A reply cut off
    at max_tokens still fails to parse, with its raw output kept. The model still chooses the words."""
    entry = ' ", " '.join(
        f"{gbnf.literal(json.dumps(key) + ': ')} {'text-string' if required else 'string'}"
        for key, (_what, required) in ERROR_FIELDS.items()
    )
    answer_open, errors_open = gbnf.literal(_ANSWER_BLOCK + "\n"), gbnf.literal(_ERRORS_BLOCK + "\n[")
    answer_close, errors_close = gbnf.literal("\n" + FENCE), gbnf.literal("]\n" + FENCE)
    entries = "entry"
    for _ in range(MAX_ERRORS - 1):
        entries = f'entry ("," ws {entries})?'
    rules = [
        "root ::= answer-block" + (r' "\n" "\n"? errors-block' if wants_errors else ""),
        f"answer-block ::= {answer_open} text {answer_close}",
        # Text starts visibly and never has three backticks in a row: the block ends where we end it.
        f"text ::= [^`{_SPACE}] text-char*",
        r'text-char ::= [^`] | "`" [^`] | "``" [^`]',
    ]
    if wants_errors:
        rules += [
            f"errors-block ::= {errors_open} ws {entries} ws {errors_close}",
            f'entry ::= "{{" {entry} "}}"',
            r'string ::= "\"" char* "\""',
            f'text-string ::= "\\"" [^"\\\\`\\x7F{_SPACE}] char* "\\""',
            # No \u escapes: one could smuggle in a NUL (PostgreSQL refuses it) or a backtick.
            r'char ::= [^"\\`\x00-\x1F\x7F] | "\\" ["\\/bfnrt]',
            r"ws ::= [ \n]?",
        ]
    return "\n".join(rules) + "\n"


def rewrite_with_model(
    complete: Complete,
    *,
    slug: str,
    question: str,
    answer: str,
    custom_prompt: str = "",
    description: str = "",
    constrain_format: bool = False,
) -> tuple[ModelRewrite, dict]:
    """Ask the model for one rewrite; returns it and the prompt used (for provenance). With
    `constrain_format`, the model is also given the grammar of the reply format (`reply_grammar`)."""
    wants_errors = slug == "factual_error"
    template = prompt_template_for(slug, custom_prompt)
    user = build_user_prompt(
        template=template, question=question, answer=answer, description=description, wants_errors=wants_errors
    )
    prompt = {"system": SYSTEM_PROMPT, "user": user}
    if constrain_format:
        prompt["grammar"] = reply_grammar(wants_errors=wants_errors)
        raw = complete(SYSTEM_PROMPT, user, grammar=prompt["grammar"])
    else:
        raw = complete(SYSTEM_PROMPT, user)
    if not isinstance(raw, str):
        raise ModelOutputError("the model returned no text", "")
    return parse_output(raw, wants_errors=wants_errors), prompt


# --- the adapter: an LLM judge's configuration --------------------------------------------------

REWRITE_MIN_TOKENS = 1024  # a judge may be set up for an 8-token vote; a rewrite needs room


GRAMMAR_BACKEND_ONLY = "only the OpenAI-compatible backend sends a grammar (llama.cpp's server)"


class GeneratorError(RuntimeError):
    """The generator model could not be asked (bad configuration, refused request, retries used up)."""


class JudgeModel:
    """Ask the model of an LLM judge configuration (judges.models.LLMJudge) through the judges'
    own backends, so there is one way to reach a model: same configuration, same API-key handling
    (the key is read from the environment variable the configuration names), same error classes.
    Transient failures (429, 5xx, timeouts) are retried up to the configuration's max_retries with
    the judges' backoff; anything else raises GeneratorError naming the judge.

    The request sets `generate`, so the local backend writes text instead of scoring vote labels
    even when the judge itself is vote-only.
    """

    def __init__(
        self,
        config: Any,
        *,
        seed: int | None = None,
        max_tokens: int | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = str(config)
        self.snapshot = config.snapshot()
        self.seed = seed if seed is not None else self.snapshot["seed"]
        self.max_tokens = max_tokens or max(self.snapshot["max_tokens"], REWRITE_MIN_TOKENS)
        self._sleep = sleep
        self._backend: Any = None

    def _where(self) -> str:
        return f"generator {self.name!r} ({self.snapshot['backend']}, {self.snapshot['model']})"

    def backend(self) -> Any:
        if self._backend is None:
            from judges.backends import BackendError, make_backend

            try:
                self._backend = make_backend(self.snapshot)
            except BackendError as exc:
                raise GeneratorError(f"{self._where()}: {exc}") from exc
        return self._backend

    def __call__(self, system: str, user: str, *, grammar: str | None = None) -> str:
        from judges.backends import BackendError, Request, TransientError, backoff_delay
        from judges.models import LLMJudge

        if grammar and self.snapshot["backend"] != LLMJudge.Backend.OPENAI_COMPATIBLE:
            # The other backends would drop it silently: the reply would look constrained and not be.
            raise GeneratorError(f"{self._where()}: {GRAMMAR_BACKEND_ONLY}")
        backend = self.backend()
        request = Request(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            model=self.snapshot["model"],
            temperature=self.snapshot["temperature"],
            max_tokens=self.max_tokens,
            timeout=self.snapshot["timeout"],
            seed=self.seed,
            logprobs=False,
            style="rewrite",
            labels={},
            generate=True,
            grammar=grammar,
        )
        retries = self.snapshot["max_retries"]
        for attempt in range(retries + 1):
            try:
                return backend.complete(request).text
            except TransientError as exc:
                if attempt == retries:
                    raise GeneratorError(f"{self._where()}: gave up after {attempt + 1} tries: {exc}") from exc
                self._sleep(
                    backoff_delay(attempt, base=self.snapshot["retry_base_seconds"], retry_after=exc.retry_after)
                )
            except BackendError as exc:
                raise GeneratorError(f"{self._where()}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def describe(self) -> dict:
        """For provenance: which configuration, backend and model; never a key or its variable."""
        described = {
            "judge": self.name,
            "backend": self.snapshot["backend"],
            "model": self.snapshot["model"],
            "temperature": self.snapshot["temperature"],
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }
        if self.snapshot["base_url"]:
            described["base_url"] = self.snapshot["base_url"]
        path = getattr(self._backend, "path", None)
        if path:
            described["model_file"] = Path(path).name
        return described


def describe(complete: Complete) -> dict:
    describer = getattr(complete, "describe", None)
    return describer() if callable(describer) else {"backend": getattr(complete, "__name__", type(complete).__name__)}
