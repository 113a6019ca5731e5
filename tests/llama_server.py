"""llama.cpp's own OpenAI-compatible server (llama-cpp-python's `llama_cpp.server`, installed with
its extras) on the SmolLM2 file, on a free loopback port: the real server behind the judges' and the
generator's OpenAI-compatible backend. One per test session, started by the first test that asks.
"""

from __future__ import annotations

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
