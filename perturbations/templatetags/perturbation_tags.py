"""Template helpers for the review page. Every piece of answer text is escaped before it is
wrapped in markup: the diff is built from escaped words only.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

from annotations import context as context_text
from perturbations.checks import word_diff

register = template.Library()

_TAGS = {"equal": None, "delete": "del", "insert": "ins"}


@register.simple_tag
def word_diff_html(before: str, after: str) -> SafeString:
    """The word diff of two markdown sources: removed words in <del>, added words in <ins>."""
    pieces: list[tuple[str, str]] = []
    for op, old, new in word_diff(before or "", after or ""):
        if op == "equal":
            pieces.append(("{}", " ".join(new)))
            continue
        if old:
            pieces.append(('<del class="pt-del">{}</del>', " ".join(old)))
        if new:
            pieces.append(('<ins class="pt-ins">{}</ins>', " ".join(new)))
    return format_html_join(" ", "{}", ((format_html(fmt, words),) for fmt, words in pieces))


@register.filter
def over_bound(ratio, bound) -> bool:
    try:
        return ratio is None or float(ratio) > float(bound)
    except (TypeError, ValueError):
        return False


@register.filter
def context_as_raters_see_it(template: str) -> str:
    """A context as the rater page shows it with A1 on the left (plain text: escaped where shown).
    {judge_family} stays a placeholder: each LLM judge reads its own family there. (Rendering
    never fails, whatever was stored: annotations.context.render.)"""
    a1, a2 = context_text.rater_labels("a1")
    return context_text.render(template, a1=a1, a2=a2, judge_family="[the judge's own model family]")
