"""Read a judge's vote from its output. Pure: no Django, no I/O.

The vote sits on the line the prompt style names: the only line (vote-only), the first line
(vote-then-explain) or the last line (explain-then-vote). That line is read leniently about
case, markdown emphasis, brackets, punctuation and a leading "Verdict:"-style word, and
strictly about content: it must name exactly one of the scheme's labels, or it is invalid.
We never guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from judges.prompts import LabelScheme, PromptStyle

_EDGES = re.compile(r"[\W_]*(.*?)[\W_]*\Z", re.S)
_PREFIX = re.compile(r"(?:final\s+)?(?:vote|verdict|answer|winner|choice|decision)\s*[:=\-]+[\W_]*", re.I)
_ANSWER_WORD = re.compile(r"answer\s+", re.I)
_SQUASH = re.compile(r"[\s*_`]+")


@dataclass(frozen=True)
class ParseResult:
    choice: str | None  # "first", "second", "tie", or None when invalid
    label_offset: int | None = None  # where the label starts in the raw text
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.choice is not None


def _key(text: str) -> str:
    return _SQUASH.sub("", text).casefold()


def _read_line(line: str, scheme: LabelScheme) -> tuple[str, int] | None:
    """The choice named by one line and the offset of its label in the line, or None."""
    labels = {_key(label): choice for choice, label in scheme.labels().items()}
    edges = _EDGES.match(line)
    core, start = edges.group(1), edges.start(1)
    candidates = [(core, start)]
    prefix = _PREFIX.match(core)
    if prefix:
        candidates.append((core[prefix.end() :], start + prefix.end()))
    for text, offset in list(candidates):
        word = _ANSWER_WORD.match(text)
        if word:
            candidates.append((text[word.end() :], offset + word.end()))
    found = {labels[_key(text)]: offset for text, offset in candidates if _key(text) in labels}
    if len(found) != 1:
        return None
    return next(iter(found.items()))


def parse_vote(text: str, *, style: str, scheme: LabelScheme) -> ParseResult:
    lines = []  # (offset, line) of lines with any letters or digits in them
    offset = 0
    for line in text.splitlines(keepends=True):
        if _EDGES.match(line).group(1):
            lines.append((offset, line))
        offset += len(line)
    if not lines:
        return ParseResult(None, reason="empty output")
    if style == PromptStyle.VOTE_ONLY:
        if len(lines) != 1:
            return ParseResult(None, reason=f"expected one line, got {len(lines)}")
        line_offset, line = lines[0]
    elif style == PromptStyle.VOTE_THEN_EXPLAIN:
        line_offset, line = lines[0]
    elif style == PromptStyle.EXPLAIN_THEN_VOTE:
        line_offset, line = lines[-1]
    else:
        raise ValueError(f"unknown prompt style {style!r}")
    read = _read_line(line, scheme)
    if read is None:
        return ParseResult(None, reason=f"no single label of {scheme.slug} on the vote line: {line.strip()[:80]!r}")
    choice, label_offset = read
    return ParseResult(choice, line_offset + label_offset)
