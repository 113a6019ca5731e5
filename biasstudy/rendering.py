"""Markdown to safe HTML, the one way user and model text reaches a page.

Answers are shown "exactly as a reader would see them": markdown rendered, then sanitised with
an allowlist that keeps headings, lists, emphasis, links (http, https, mailto only), code,
tables and emoji; scripts, styles, event handlers and iframes never survive.
"""

from __future__ import annotations

import hashlib
import html as html_lib
import logging
import re
import threading
from functools import partial
from urllib.parse import urlsplit

import bleach
import markdown as md
from bleach.linkifier import LinkifyFilter
from django.core.exceptions import ValidationError
from django.utils.safestring import SafeString, mark_safe

logger = logging.getLogger(__name__)

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


def _drop_new_links_of_other_protocols(attrs: dict, new: bool = False) -> dict | None:
    """Linkify finds bare URLs of any protocol html5lib knows (ftp://, ssh://, data://...) and
    links them after the sanitiser has checked the protocols of the links in the markdown: a new
    link whose protocol is not allowed stays text (None drops it). A URL without a protocol
    gets "http://" from linkify."""
    if new and urlsplit(attrs.get((None, "href"), "")).scheme.lower() not in ALLOWED_PROTOCOLS:
        return None
    return attrs


def _set_link_rel(attrs: dict, new: bool = False) -> dict:
    href_key = (None, "href")
    if href_key in attrs:
        attrs[(None, "rel")] = "nofollow noopener noreferrer"
        attrs[(None, "target")] = "_blank"
    return attrs


# What the stored renders (annotations.models.RenderedText) depend on besides the text: when any
# of it changes, every stored render stops matching and the text is rendered anew (on each view
# until a migration such as 0016_refresh_stored_renders stores the new render: a change here
# comes with such a migration, as 0017 did). The last entries name how the pipeline runs: since
# links are found in the cleaning parse, an entity in inline code is no longer escaped twice and
# a bare URL no longer swallows the entity after it; bare ftp://, ssh://... URLs stay text.
RENDERING_FINGERPRINT = repr(
    (
        sorted(ALLOWED_TAGS),
        sorted(ALLOWED_ATTRIBUTES.items()),
        sorted(ALLOWED_PROTOCOLS),
        _EXTENSIONS,
        md.__version__,
        bleach.__version__,
        "links: nofollow noopener noreferrer, _blank",
        "links found in the cleaning parse (LinkifyFilter)",
        "bare URLs linked only with the allowed protocols",
    )
)


def render_key(text: str) -> str:
    """Identifies `text` as rendered by this code: stored HTML is used only when it matches."""
    return hashlib.sha256(f"{RENDERING_FINGERPRINT}\0{text}".encode()).hexdigest()[:40]


# Bounds on rendering. Python-Markdown, bleach's html5lib parser and linkify are fast on ordinary
# text but slow or superlinear on some inputs: each "[" (link, image, footnote) and each "<"
# (inline HTML) scans forward for its closer, to the end of the paragraph when there is none,
# and "](" does the same for a link's ")", so "[" × 20,000, or 50 "[" before 100 KB of text,
# take tens of seconds; linkify is quadratic in "(" × 20,000; and every tag markup makes costs
# a fraction of a millisecond in each of the three stages. A length cap alone bounds none of
# that (16 KB of "[a](" took 14 s). So render_markdown first measures the text in linear
# passes: its length, how many markup characters it holds, how many "[" (each footnote or
# abbreviation definition costs a pass of its own), and how far the bracket scans would go
# (`markup_scan_cost`). Text over any bound is shown as escaped plain text, paragraphs and line
# breaks kept, instead of markdown. Ordinary answers stay well below every bound (the longest in
# the chen2024 and MT-bench data has 5,554 characters). Study files refuse text over
# MAX_MARKDOWN_CHARS.
MAX_MARKDOWN_CHARS = 20_000
# What any way in stores (forms, the API, study and vote files): one bound for all, so that what
# one accepts the others take back. Longer than MAX_MARKDOWN_CHARS is shown as plain text; real
# answers run longer than that (an AlpacaEval model's answer has 24,456 characters).
MAX_TEXT_CHARS = 50_000
MAX_MARKUP = 1_000  # characters that make markup or tags (MARKUP_CHARACTERS)
MAX_BRACKETS = 100  # "["
MAX_SCAN_COST = 100_000  # characters the bracket scans may cover, summed over the text
MARKUP_CHARACTERS = "[]()<>*_`~!#|&\n"
# Python-Markdown parses a nested list or block quote by recursion, a few Python frames a level:
# "+ " × 600 (1.2 KB, none of it markup above) raised RecursionError and failed every page that
# showed it. Each line's nesting (its indentation in steps of four, then every list marker or
# ">" that opens it) is bounded instead; real answers nest three or four levels. The bound is
# not in RENDERING_FINGERPRINT: a text stored rendered before it existed rendered without error.
MAX_NESTING = 20
_OPENERS = {"[": "]", "<": ">", "](": ")"}
_TOKENS = re.compile(r"\]\(|[\[\]<>)]|\n[ \t]*\n")
_MARKUP = re.compile("[" + re.escape(MARKUP_CHARACTERS) + "]")


def markup_scan_cost(text: str) -> int:
    """How many characters Python-Markdown's forward scans for closing brackets cover: for each
    "[", "<" or "](", the distance to its matching closer, or when it has none to the end of its
    paragraph ("[", "](") or of the text ("<"). Linear in the length of the text."""
    cost = 0
    open_at: dict[str, list[int]] = {opener: [] for opener in _OPENERS}
    closer_of = {closer: opener for opener, closer in _OPENERS.items()}

    def close_paragraph(end: int) -> int:
        # An unclosed "<" may open an HTML block, which is looked for to the end of the text.
        spent = sum(len(text) - start for start in open_at["<"])
        spent += sum(end - start for opener in ("[", "](") for start in open_at[opener])
        for starts in open_at.values():
            starts.clear()
        return spent

    for match in _TOKENS.finditer(text):
        mark, position = match.group(), match.start()
        if mark == "](" and open_at["["]:  # closes a "[" and opens a "("
            cost += position - open_at["["].pop()
        if mark in _OPENERS:
            open_at[mark].append(position)
        elif mark in closer_of:
            starts = open_at[closer_of[mark]]
            if starts:
                cost += position - starts.pop()
        else:
            cost += close_paragraph(position)
    return cost + close_paragraph(len(text))


_CONTAINER_MARKER = re.compile(r">[ \t]?|(?:[*+-]|\d{1,9}[.)])(?:[ \t]+|$)")


def nesting_depth(text: str) -> int:
    """How deep the deepest line nests lists and block quotes: its indentation in steps of four
    plus the list markers and ">" that open it. Linear in the length of the text."""
    deepest = 0
    for line in text.expandtabs(4).split("\n"):
        body = line.lstrip(" ")
        depth, position = (len(line) - len(body)) // 4, 0
        while match := _CONTAINER_MARKER.match(body, position):
            depth, position = depth + 1, match.end()
        deepest = max(deepest, depth)
    return deepest


def text_problem(text: str) -> str | None:
    """Why `text` may not be stored as markdown (too long, nested too deep), or None: the one
    rule of every way in (forms, the API, study and vote files)."""
    if len(text) > MAX_TEXT_CHARS:
        return f"at most {MAX_TEXT_CHARS:,} characters, got {len(text):,}"
    if (depth := nesting_depth(text)) > MAX_NESTING:
        return f"lists or block quotes nested {depth} levels deep; at most {MAX_NESTING}"
    return None


def validate_markdown(text: str) -> None:
    """A model and form field validator: refuses what text_problem refuses, and text that the
    renderer fails on (shown as plain text if it were stored anyway)."""
    if problem := text_problem(text):
        raise ValidationError(f"This markdown cannot be shown: {problem}.", code="markdown")
    if renders_as_markdown(text) and _convert(text) is None:
        raise ValidationError("This markdown cannot be shown: the renderer failed on it.", code="markdown")


def renders_as_markdown(text: str) -> bool:
    """False for text shown as plain text instead, being over one of the bounds above."""
    return (
        len(text) <= MAX_MARKDOWN_CHARS
        and nesting_depth(text) <= MAX_NESTING
        and len(_MARKUP.findall(text)) <= MAX_MARKUP
        and text.count("[") <= MAX_BRACKETS
        and markup_scan_cost(text) <= MAX_SCAN_COST
    )


def render_markdown(text: str) -> SafeString:
    """Render markdown and sanitise the result; safe to put into any page. Text that markdown
    could not render in bounded time is shown escaped, as plain text."""
    return mark_safe(_render(text or ""))  # noqa: S308 - sanitised by the allowlist in _render, or escaped


# Texts shown again and again keep their render in the database beside them (questions and
# answers: RenderedText; a study's instructions), so a page does not render them per request.
def _render(text: str) -> str:
    html = _convert(text) if renders_as_markdown(text) else None
    return _plain(text) if html is None else html


def _convert(text: str) -> str | None:
    """The sanitised render, or None when the renderer fails: a page shows such text as plain
    text rather than failing for everyone who opens it."""
    converter, cleaner = _pipeline()
    try:
        converter.reset()  # a converter keeps its last text's footnotes, abbreviations and HTML stash
        return cleaner.clean(converter.convert(text))
    except Exception:  # noqa: BLE001 - any failure of the two libraries on one text
        logger.exception("markdown could not be rendered (%d characters); shown as plain text", len(text))
        return None


# Building a Markdown converter (its extensions) and an html5lib parser costs more than
# rendering a short answer, so each thread keeps one of each: neither is thread-safe (bleach:
# "create a separate cleaner per thread"), and gunicorn's gthread workers render in several
# threads. Links are found in the cleaner's own parse: bleach runs LinkifyFilter on the tokens
# its sanitiser let through, one html5lib parse instead of clean() and then linkify(), which
# parsed the cleaned HTML again. The filter makes links only of the URLs it finds in text
# (never inside pre, code or an existing link), keeps as text those of other protocols than
# ALLOWED_PROTOCOLS, and passes every link, old or new, to _set_link_rel.
_pipelines = threading.local()


def _pipeline() -> tuple[md.Markdown, bleach.Cleaner]:
    if not hasattr(_pipelines, "converter"):
        _pipelines.converter = md.Markdown(extensions=_EXTENSIONS, output_format="html")
        _pipelines.cleaner = bleach.Cleaner(
            tags=ALLOWED_TAGS,
            attributes={**ALLOWED_ATTRIBUTES, "a": ["href", "title", "rel", "target"]},
            protocols=ALLOWED_PROTOCOLS,
            strip=True,
            strip_comments=True,
            filters=[
                partial(
                    LinkifyFilter,
                    callbacks=[_drop_new_links_of_other_protocols, _set_link_rel],
                    skip_tags={"pre", "code"},
                    parse_email=False,
                )
            ],
        )
    return _pipelines.converter, _pipelines.cleaner


def _plain(text: str) -> str:
    """Escaped text in paragraphs, line breaks kept: what a reader sees of text too costly to render."""
    paragraphs = (part.strip("\n") for part in re.split(r"\n[ \t]*\n", text))
    return "\n".join(
        f"<p>{html_lib.escape(part).replace(chr(10), '<br>' + chr(10))}</p>" for part in paragraphs if part
    )
