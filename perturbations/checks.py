"""Checks of a perturbed answer against its original. Pure functions; the result is a JSON-able
dict stored in `Answer.checks` and shown at review. Checks warn; people decide.

- length: ratio variant/original in each length measure, warning over the study's bound;
- preservation (non-semantic kinds): strip markdown, emoji, citation markers and the reference
  block from both texts, then compare the words (similarity, words added and lost);
- factual (degrading kinds): the variant differs, each declared error is found in it, the rest is
  unchanged (word diff of what changed), and numbers and names from the question are not altered.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

from annotations import context as context_text
from annotations import lengths
from perturbations.rules import split_reference_block

CHECKS_VERSION = 1
MIN_SIMILARITY = 0.98  # below this, a non-semantic variant has changed the answer's words
MAX_LISTED_WORDS = 40

_CITATION_MARKER = re.compile(r"[ \t]?\[\d+(?:\s*[,–-]\s*\d+)*\]")
# "(Khan Academy, n.d.)", "(Smith & Lee, 2019)": author-year citations as model rewrites add them.
_AUTHOR_YEAR = re.compile(r"[ \t]?\((?:[A-Z][^()]{0,80}?),\s*(?:\d{4}[a-z]?|n\.d\.)\)")
_HEADING_LINE = re.compile(r"^[ \t]*#{1,6}[ \t].*$", re.MULTILINE)
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*+]|\d+[.)])[ \t]+", re.MULTILINE)
_QUOTE_MARKER = re.compile(r"^[ \t]*>[ \t]?", re.MULTILINE)
_RULE_LINE = re.compile(r"^[ \t]*(?:-{3,}|\*{3,}|_{3,})[ \t]*$", re.MULTILINE)
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][a-zA-Z]+(?:\s+[A-Z][a-zA-Z]+)*")


def _is_emoji(char: str) -> bool:
    code = ord(char)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2600 <= code <= 0x27BF
        or 0x2B00 <= code <= 0x2BFF
        or 0x2300 <= code <= 0x23FF
        or code in (0xFE0F, 0x200D, 0x20E3)
        or unicodedata.category(char) == "So"
    )


def strip_added_formatting(text: str) -> str:
    """The text with what the non-semantic perturbations add taken away: the reference block,
    citation markers, heading lines, list and quote markers, emphasis marks and emoji.
    """
    body, _ = split_reference_block(text)
    body = _CITATION_MARKER.sub("", body)
    body = _AUTHOR_YEAR.sub("", body)
    body = _HEADING_LINE.sub("", body)
    body = _RULE_LINE.sub("", body)
    body = _LIST_MARKER.sub("", body)
    body = _QUOTE_MARKER.sub("", body)
    body = body.replace("**", "").replace("__", "").replace("*", "").replace("`", "")
    return "".join(" " if _is_emoji(c) else c for c in body)


def plain_words(text: str) -> list[str]:
    return strip_added_formatting(text).split()


def word_diff(before: str, after: str) -> list[tuple[str, list[str], list[str]]]:
    """Word-level diff as (op, before words, after words) with op in equal/replace/delete/insert."""
    a, b = before.split(), after.split()
    matcher = SequenceMatcher(a=a, b=b, autojunk=False)
    return [(op, a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes()]


def _changes(before: str, after: str) -> list[dict]:
    return [
        {"op": op, "before": " ".join(old), "after": " ".join(new)}
        for op, old, new in word_diff(before, after)
        if op != "equal"
    ]


def length_check(original: str, variant: str, *, max_ratio: float, measured: tuple[dict, dict] | None = None) -> dict:
    """`measured`: both texts' lengths (lengths.measure_all) when the caller has them already."""
    measured_original, measured_variant = measured or (lengths.measure_all(original), lengths.measure_all(variant))
    ratios, over = {}, []
    for measure in lengths.MEASURES:
        before, after = measured_original.get(measure), measured_variant.get(measure)
        if before is None or after is None:
            continue
        ratio = round(after / before, 3) if before else None
        ratios[measure] = ratio
        if ratio is None or ratio > max_ratio:
            over.append(measure)
    return {
        "bound": max_ratio,
        "original": measured_original,
        "variant": measured_variant,
        "ratios": ratios,
        "over": over,
    }


def preservation_check(original: str, variant: str) -> dict:
    before, after = plain_words(original), plain_words(variant)
    matcher = SequenceMatcher(a=before, b=after, autojunk=False)
    added, lost = [], []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op in ("replace", "delete"):
            lost += before[i1:i2]
        if op in ("replace", "insert"):
            added += after[j1:j2]
    return {
        "similarity": round(matcher.ratio(), 4),
        "words_added": len(added),
        "words_lost": len(lost),
        "added": added[:MAX_LISTED_WORDS],
        "lost": lost[:MAX_LISTED_WORDS],
    }


def _normalise(text: str) -> str:
    return " ".join(text.split()).lower()


def _bare(text: str) -> str:
    """Lower-cased words without surrounding punctuation, for matching a change to a declared error."""
    return " ".join(word.strip(".,;:!?\"'()[]") for word in text.lower().split())


def question_terms(question: str) -> list[str]:
    """Numbers and names from the question (capitalised words that do not just open a sentence)."""
    terms = _NUMBER.findall(question)
    for match in _CAPITALISED.finditer(question):
        before = question[: match.start()].rstrip()
        opens_sentence = not before or before[-1] in ".!?:"
        phrase = match.group()
        if opens_sentence:
            phrase = phrase.split(None, 1)[1] if " " in phrase else ""
        if phrase:
            terms.append(phrase)
    return list(dict.fromkeys(terms))


def _count_term(term: str, text: str) -> int:
    if term[0].isdigit():
        return len(re.findall(rf"(?<![\d.,]){re.escape(term)}(?![\d]|[.,]\d)", text))
    return len(re.findall(rf"\b{re.escape(term)}\b", text))


def factual_check(original: str, variant: str, *, errors: list[dict], question: str) -> dict:
    changes = _changes(original, variant)
    variant_norm = _normalise(variant)
    missing = [e.get("error", "") for e in errors if _normalise(e.get("error", "")) not in variant_norm]

    def explained(change: dict) -> bool:
        after, before = _bare(change["after"]), _bare(change["before"])
        for e in errors:
            err, orig = _bare(e.get("error", "")), _bare(e.get("original", ""))
            if (after and (after in err or err in after)) or (before and orig and (before in orig or orig in before)):
                return True
        return False

    unexplained = [c for c in changes if not explained(c)]
    changed_words = sum(len(c["before"].split()) for c in changes)
    altered = []
    for term in question_terms(question):
        in_original, in_variant = _count_term(term, original), _count_term(term, variant)
        if in_original and in_variant < in_original:
            altered.append({"term": term, "original": in_original, "variant": in_variant})
    return {
        "differs": _normalise(original) != variant_norm,
        "declared": len(errors),
        "errors_missing": missing,
        "changes": changes[:MAX_LISTED_WORDS],
        "unexplained_changes": unexplained[:MAX_LISTED_WORDS],
        "changed_share": round(changed_words / max(1, len(original.split())), 3),
        "question_terms_altered": altered,
    }


def run_checks(
    *,
    original: str,
    variant: str,
    semantics: str,
    slug: str,
    max_ratio: float,
    question: str = "",
    errors: list[dict] | None = None,
    measured: tuple[dict, dict] | None = None,
) -> dict:
    """All checks that apply to a variant of this kind, with a list of human-readable warnings."""
    warnings: list[str] = []
    result: dict = {"version": CHECKS_VERSION, "kind": slug, "semantics": semantics}
    length = length_check(original, variant, max_ratio=max_ratio, measured=measured)
    result["length"] = length
    for measure in length["over"]:
        warnings.append(
            f"{measure}: variant is {length['ratios'][measure]}× the original (bound {max_ratio}×): "
            "shorten it, or accept it and rely on the length-controlled estimate"
        )

    if semantics == "non_semantic":
        kept = preservation_check(original, variant)
        result["preservation"] = kept
        if kept["words_added"]:
            warnings.append(f"content: {kept['words_added']} word(s) added beyond formatting and references")
        if kept["words_lost"]:
            warnings.append(f"content: {kept['words_lost']} word(s) of the original lost")
        if kept["similarity"] < MIN_SIMILARITY and not (kept["words_added"] or kept["words_lost"]):
            warnings.append(f"content: similarity {kept['similarity']} below {MIN_SIMILARITY}")
    else:
        factual = factual_check(original, variant, errors=errors or [], question=question)
        result["factual"] = factual
        if not factual["differs"]:
            warnings.append("error: the variant does not differ from the original")
        if slug == "factual_error" and not errors:
            warnings.append("error: no inserted errors are declared")
        for missing in factual["errors_missing"]:
            warnings.append(f"error: declared error not found in the variant: {missing!r}")
        if errors and factual["unexplained_changes"]:
            warnings.append(f"error: {len(factual['unexplained_changes'])} change(s) not explained by a declared error")
        for altered in factual["question_terms_altered"]:
            warnings.append(f"question: {altered['term']!r} from the question was altered")
    result["warnings"] = warnings
    result["ok"] = not warnings
    return result


def context_checks(*, original: str, variant: str, context: str, slug: str, semantics: str) -> dict:
    """The checks of a context kind's variant: the answer is the original's, word for word, and
    the context is a template the judges can be shown that names A2 (annotations.context)."""
    warnings: list[str] = []
    if variant != original:
        warnings.append("text: a context kind keeps the original's text; this variant's text differs")
    if not context:
        warnings.append("context: empty, so the item would be the control pair again")
    else:
        try:
            context_text.check(context)
        except context_text.ContextError as exc:
            warnings.append(f"context: {exc}")
    return {
        "version": CHECKS_VERSION,
        "kind": slug,
        "semantics": semantics,
        "context": {"same_text": variant == original, "chars": len(context)},
        "warnings": warnings,
        "ok": not warnings,
    }
