"""Named length measures of an answer text.

- ``words``: whitespace-separated tokens;
- ``chars``: characters;
- ``bpe``: tokens of the local model's BPE tokenizer (SmolLM2's, read from its GGUF file with
  llama-cpp-python, vocabulary only), where that tokenizer is installed; otherwise absent;
- ``spaces``: the pieces of ``text.split(" ")``, the verbosity blog post's tokens (Dsouza 2023):
  a line break does not separate two pieces, and every further space in a run adds an empty one.

Every figure that depends on length reports which measure it used.
"""

from __future__ import annotations

import atexit
import threading
from functools import lru_cache
from typing import Any

MEASURES = ("words", "chars", "bpe", "spaces")

_lock = threading.Lock()


def count_words(text: str) -> int:
    return len(text.split())


def count_chars(text: str) -> int:
    return len(text)


def count_spaces(text: str) -> int:
    return len(text.split(" "))


@lru_cache(maxsize=1)
def _bpe_model() -> Any | None:
    from biasstudy.localmodel import default_gguf_path, quiet_native_stderr

    path = default_gguf_path()
    if path is None:
        return None
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    with quiet_native_stderr():
        model = Llama(model_path=str(path), vocab_only=True, verbose=False)
    # Free it before interpreter teardown; llama.cpp's own finaliser fails once its C
    # bindings are gone and prints a traceback at exit.
    atexit.register(model.close)
    return model


def count_bpe(text: str) -> int | None:
    """BPE tokens, or None when no offline tokenizer is available."""
    model = _bpe_model()
    if model is None:
        return None
    with _lock:  # llama.cpp's tokenizer object is not documented as thread-safe
        return len(model.tokenize(text.encode("utf-8"), add_bos=False, special=False))


def bpe_available() -> bool:
    return _bpe_model() is not None


def measure_all(text: str) -> dict[str, int | None]:
    return {
        "words": count_words(text),
        "chars": count_chars(text),
        "bpe": count_bpe(text),
        "spaces": count_spaces(text),
    }
