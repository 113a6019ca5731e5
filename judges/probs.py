"""Option probabilities from token log-probabilities. Pure: no Django, no I/O.

A server that returns the top log-probabilities of each generated token tells us more than the
vote: how much mass the judge put on each option. We walk the tokens of the vote from where
its label starts; at each position, every alternative token that settles one option adds
(probability of the path so far) x (its probability) to that option; the walk follows the
chosen token while it is still a common prefix of several labels ("Answer" before "1"/"2").
The result is normalised over the three options, so it sums to 1; mass on tokens that name no
option (or several) is left out. None when no alternative names an option.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from judges.prompts import LabelScheme

_LEAD = re.compile(r"^[\W_]+")
_SQUASH = re.compile(r"[\s*_`]+")
MAX_TOKENS_WALKED = 8


@dataclass(frozen=True)
class TokenLogprob:
    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


def _norm(text: str) -> str:
    return _SQUASH.sub("", _LEAD.sub("", text)).casefold()


def _consistent(text: str, labels: dict[str, str]) -> set[str]:
    """Options whose label `text` is the beginning of, or which `text` names completely."""
    found = set()
    for choice, label in labels.items():
        if label.startswith(text) or text.startswith(label) and not text[len(label)].isalnum():
            found.add(choice)
    return found


def normalise(probs: dict[str, float]) -> dict[str, float] | None:
    total = sum(probs.values())
    if total <= 0:
        return None
    return {choice: value / total for choice, value in probs.items()}


def option_probs(tokens: list[TokenLogprob], *, label_offset: int, scheme: LabelScheme) -> dict[str, float] | None:
    labels = {choice: _norm(label) for choice, label in scheme.labels().items()}
    start = 0
    first = None
    for index, token in enumerate(tokens):
        if start <= label_offset < start + len(token.token):
            first = index
            break
        start += len(token.token)
    if first is None:
        return None
    mass = dict.fromkeys(labels, 0.0)
    path = 1.0
    before = ""
    for token in tokens[first : first + MAX_TOKENS_WALKED]:
        alternatives = dict(token.top)
        alternatives.setdefault(token.token, token.logprob)
        for alternative, logprob in alternatives.items():
            settled = _consistent(_norm(before + alternative), labels)
            if len(settled) == 1 and _norm(before + alternative):
                mass[settled.pop()] += path * math.exp(logprob)
        before += token.token
        if len(_consistent(_norm(before), labels)) <= 1 and _norm(before):
            break
        path *= math.exp(token.logprob)
    return normalise(mass)
