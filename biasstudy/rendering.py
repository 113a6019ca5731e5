"""Markdown to safe HTML, the one way user and model text reaches a page.

Answers are shown "exactly as a reader would see them": markdown rendered, then sanitised with
an allowlist that keeps headings, lists, emphasis, links (http, https, mailto only), code,
tables and emoji; scripts, styles, event handlers and iframes never survive.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

import bleach
import markdown as md
from django.utils.safestring import SafeString, mark_safe

ALLOWED_TAGS = frozenset(
    {
        "p",
        "br",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "strong",
        "b",
        "em",
        "i",
        "del",
        "s",
        "sup",
        "sub",
        "blockquote",
        "ul",
        "ol",
        "li",
        "dl",
        "dt",
        "dd",
        "code",
        "pre",
        "kbd",
        "a",
        "table",
        "thead",
        "tbody",
        "tr",
        "th",
        "td",
    }
)
ALLOWED_ATTRIBUTES = {"a": ["href", "title"], "th": ["align"], "td": ["align"], "ol": ["start"]}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
_EXTENSIONS = ["extra", "sane_lists", "nl2br"]


def _set_link_rel(attrs: dict, new: bool = False) -> dict:
    href_key = (None, "href")
    if href_key in attrs:
        attrs[(None, "rel")] = "nofollow noopener noreferrer"
        attrs[(None, "target")] = "_blank"
    return attrs


_cleaner = bleach.Cleaner(
    tags=ALLOWED_TAGS,
    attributes={**ALLOWED_ATTRIBUTES, "a": ["href", "title", "rel", "target"]},
    protocols=ALLOWED_PROTOCOLS,
    strip=True,
    strip_comments=True,
    filters=[],
)


# What the stored renders (annotations.models.RenderedText) depend on besides the text: when any
# of it changes, every stored render stops matching and the text is rendered anew.
RENDERING_FINGERPRINT = repr(
    (
        sorted(ALLOWED_TAGS),
        sorted(ALLOWED_ATTRIBUTES.items()),
        sorted(ALLOWED_PROTOCOLS),
        _EXTENSIONS,
        md.__version__,
        bleach.__version__,
        "links: nofollow noopener noreferrer, _blank",
    )
)


def render_key(text: str) -> str:
    """Identifies `text` as rendered by this code: stored HTML is used only when it matches."""
    return hashlib.sha256(f"{RENDERING_FINGERPRINT}\0{text}".encode()).hexdigest()[:40]


def render_markdown(text: str) -> SafeString:
    """Render markdown and sanitise the result; safe to put into any page."""
    return mark_safe(_render(text or ""))  # noqa: S308 - sanitised by the allowlist in _render


# The same question and answers are shown again and again (every vote of an item, every item of
# a question), and rendering them cost about 4 ms each, a tenth of the task page
# (docs/BENCHMARKS.md). The result depends on the text alone, so recent ones are kept: at most
# 2,048 strings per process.
@lru_cache(maxsize=2048)
def _render(text: str) -> str:
    html = md.markdown(text, extensions=_EXTENSIONS, output_format="html")
    cleaned = _cleaner.clean(html)
    return bleach.linkify(cleaned, callbacks=[_set_link_rel], skip_tags={"pre", "code"}, parse_email=False)
