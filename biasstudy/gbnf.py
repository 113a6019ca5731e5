"""GBNF, llama.cpp's grammar format: the pieces our grammars are made of.

A grammar sent in the `grammar` field of llama.cpp's OpenAI-compatible server limits what the
model can write. The judges send one that admits only a vote label (`judges.prompts.vote_grammar`),
the perturbation generator one that admits only its fenced reply format
(`perturbations.modelgen.reply_grammar`); `exactly` admits a fixed list of texts (a scripted reply).
"""

from __future__ import annotations

from collections.abc import Iterable

_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def literal(text: str) -> str:
    """`text` as a quoted GBNF literal (backslash, quote and line breaks escaped)."""
    return '"' + "".join(_ESCAPES.get(char, char) for char in text) + '"'


def one_of(texts: Iterable[str]) -> str:
    """Alternatives: any one of `texts`, written out literally."""
    alternatives = [literal(text) for text in texts]
    if not alternatives:
        raise ValueError("a GBNF alternative needs at least one text")
    return " | ".join(alternatives)


def exactly(texts: Iterable[str]) -> str:
    """A whole grammar that admits exactly one of `texts` and nothing else."""
    return f"root ::= {one_of(texts)}\n"
