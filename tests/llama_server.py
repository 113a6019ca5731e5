"""llama.cpp's own OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`, installed with
its extras) on the SmolLM2 file, on a free loopback port: the real server behind the judges' and the
generator's OpenAI-compatible backend. One per test session, started by the first test that asks.
And llama.cpp's grammar sampler on SmolLM2's tokenizer, to ask whether a grammar admits a text.
"""

from __future__ import annotations

import ctypes
import functools
import math
import subprocess
import sys
import time
import urllib.request

import pytest

from biasstudy.localmodel import default_gguf_path
from tests.live import free_port

STARTUP_SECONDS = 120

needs_gguf = pytest.mark.skipif(default_gguf_path() is None, reason="SmolLM2 GGUF not installed")


@pytest.fixture(scope="session")
def llama_server():
    """The server's base URL (…/v1). n_ctx 2048 holds a rewrite prompt and its reply; one thread,
    since the machine is shared and the tests bound every reply with max_tokens."""
    pytest.importorskip("uvicorn", reason="pip install -r requirements-test.txt (llama-cpp-python[server] extras)")
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()), "--host", "127.0.0.1",
         "--port", str(port), "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
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


@functools.cache
def _vocab() -> tuple:
    import llama_cpp

    llm = llama_cpp.Llama(model_path=str(default_gguf_path()), vocab_only=True, verbose=False)
    return llm, llama_cpp.llama_model_get_vocab(llm._model.model)


def grammar_admits(grammar: str, text: str) -> bool:
    """Whether llama.cpp's own grammar sampler lets a model write exactly `text` and then stop:
    `text` in SmolLM2's tokens, each offered alone to the sampler (refused: its logit becomes
    -inf), then the end-of-text token. Only the tokenizer is loaded (vocab_only), no weights."""
    import llama_cpp

    llm, vocab = _vocab()
    sampler = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
    if not sampler:
        raise ValueError("llama.cpp cannot parse the grammar")
    try:
        tokens = [*llm.tokenize(text.encode(), add_bos=False, special=False), llama_cpp.llama_vocab_eos(vocab)]
        for n, token in enumerate(tokens, start=1):
            candidate = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(token, 0.0, 0.0))
            llama_cpp.llama_sampler_apply(
                sampler, ctypes.byref(llama_cpp.llama_token_data_array(candidate, 1, -1, False))
            )
            if math.isinf(candidate[0].logit):
                return False
            if n < len(tokens):  # accepting a refused token would abort the process: only the admitted ones
                llama_cpp.llama_sampler_accept(sampler, token)
        return True
    finally:
        llama_cpp.llama_sampler_free(sampler)
