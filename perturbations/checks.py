"""Checks of a perturbed answer against its original. Pure functions; the result is a JSON-able
dict stored in `Answer.checks` and shown at review. Checks warn; people decide.

- length: ratio variant/original in each length measure; one warning over the study's bound,
  naming the measure it read (the largest ratio), and for kinds whose added length is the
  perturbation itself, saying so instead of asking for a shorter variant;
- preservation (non-semantic kinds): strip markdown, emoji, citation markers and the reference
  block from both texts, then compare the words (similarity, words added and lost). Kinds that
  add sentences of their own (an aside, padding, a line) declare what they inserted; those
  passages are taken out first, so the rest must be the original's words. Tone kinds reword by
  design: their check is that the original's numbers and names are all still there;
- factual (degrading kinds): the variant differs, each declared error is found in it, the rest is
  unchanged (word diff of what changed), and numbers and names from the question are not altered.
"""

from __future__ import annotations

import re
import unicodedata
from difflib import SequenceMatcher

from annotations import context as context_text
from annotations import lengths
from perturbations import kinds
from perturbations.rules import AUTHOR_YEAR_CITATION, split_reference_block

CHECKS_VERSION = (
    3  # 2: one length warning; declared insertions; the facts of tone rewrites. 3: expected length is a note
)
MIN_SIMILARITY = 0.98  # below this, a non-semantic variant has changed the answer's words
MAX_LISTED_WORDS = 40

_CITATION_MARKER = re.compile(r"[ \t]?\[\d+(?:\s*[,–-]\s*\d+)*\]")
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
    body = AUTHOR_YEAR_CITATION.sub("", body)
    body = _HEADING_LINE.sub("", body)
    body = _RULE_LINE.sub("", body)
    body = _LIST_MARKER.sub("", body)
    body = _QUOTE_MARKER.sub("", body)
    body = body.replace("**", "").replace("__", "").replace("*", "").replace("`", "")
    return "".join(" " if _is_emoji(c) else c for c in body)


def plain_words(text: str) -> list[str]:
    return strip_added_formatting(text).split()


def remove_insertions(words: list[str], inserted: list[str]) -> tuple[list[str], list[str]]:
    """(`words` with each inserted passage's words taken out, the passages not found). Passages are
    looked for in order, each after the previous one, as whole runs of words: formatting added on
    top (a compound's later step) is stripped from both sides first by the caller. The rules record
    the passages they insert (`details["inserted"]`); this takes them away again."""
    remaining, missing, cursor = list(words), [], 0
    for passage in inserted:
        run = plain_words(passage)
        if not run:
            continue
        for i in range(cursor, len(remaining) - len(run) + 1):
            if remaining[i : i + len(run)] == run:
                del remaining[i : i + len(run)]
                cursor = i
                break
        else:
            missing.append(passage)
    return remaining, missing


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


MEASURE_NAMES = {"words": "words", "chars": "characters", "bpe": "BPE tokens"}


def length_warning(length: dict, *, lengthens: bool) -> str | None:
    """One warning when the variant is over the bound in any measure, naming the measure with the
    largest ratio (the review page's table shows all of them). `lengthens`: the kind's added
    length is the perturbation itself, so the advice is not to shorten it."""
    over = [m for m in length["over"] if length["ratios"].get(m) is not None]
    if not length["over"]:
        return None
    if not over:
        return "length: the original is empty, so the variant's length cannot be compared"
    measure = max(over, key=lambda m: length["ratios"][m])
    said = (
        f"length: the variant is {length['ratios'][measure]}× the original in {MEASURE_NAMES.get(measure, measure)} "
        f"(the study's bound is {length['bound']}×): "
    )
    if lengthens:
        return said + (
            "the added length is what this kind does, so keep it; the length-controlled (LC) estimate controls for it"
        )
    return said + "shorten it, or accept it and rely on the length-controlled estimate"


def preservation_check(original: str, variant: str, *, inserted: list[str] | None = None) -> dict:
    """`inserted`: passages the kind declares it added (rules' `details["inserted"]`), taken out of
    the variant's words before the comparison."""
    before, after = plain_words(original), plain_words(variant)
    declared: dict = {}
    if inserted:
        after, missing = remove_insertions(after, inserted)
        declared = {"inserted": len(inserted), "inserted_missing": missing[:MAX_LISTED_WORDS]}
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
        **declared,
    }


def facts_check(original: str, variant: str) -> dict:
    """For rewordings (tone): the numbers and names of the original that the variant has fewer
    times than the original (a name is a capitalised word that does not just open a sentence)."""
    dropped = []
    for term in question_terms(strip_added_formatting(original)):
        in_original, in_variant = _count_term(term, original), _count_term(term, variant)
        if in_variant < in_original:
            dropped.append({"term": term, "original": in_original, "variant": in_variant})
    return {"dropped": dropped[:MAX_LISTED_WORDS]}


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
    steps: list[str] | None = None,
    inserted: list[str] | None = None,
) -> dict:
    """All checks that apply to a variant of this kind, with a list of human-readable warnings.
    `steps`: the kind's steps (a study's copy of a built-in kind has another slug; default
    [slug]); `inserted`: the passages its rules declare they added."""
    steps = list(steps or [slug])
    warnings: list[str] = []
    # What the researcher should know but need not act on: the added length of a kind whose
    # length is the perturbation. Not a warning, so "with warnings only" does not list it.
    notes: list[str] = []
    result: dict = {"version": CHECKS_VERSION, "kind": slug, "semantics": semantics}
    length = length_check(original, variant, max_ratio=max_ratio, measured=measured)
    result["length"] = length
    lengthens = kinds.adds_length(steps)
    if said := length_warning(length, lengthens=lengthens):
        (notes if lengthens else warnings).append(said)

    if semantics == "non_semantic" and kinds.rewords(steps):
        facts = facts_check(original, variant)
        result["facts"] = facts
        result["preservation"] = preservation_check(original, variant)  # shown, not warned: tone rewords
        for dropped in facts["dropped"]:
            warnings.append(f"content: {dropped['term']!r} of the original is missing or less often in the variant")
    elif semantics == "non_semantic":
        adds_words = kinds.adds_text(steps)
        kept = preservation_check(original, variant, inserted=inserted if adds_words else None)
        result["preservation"] = kept
        if kept["words_added"] and not (adds_words and not inserted):
            beyond = "the declared insertions" if adds_words else "formatting and references"
            warnings.append(f"content: {kept['words_added']} word(s) added beyond {beyond}")
        if kept.get("inserted_missing"):
            warnings.append(f"content: {len(kept['inserted_missing'])} declared insertion(s) not found in the variant")
        if kept["words_lost"]:
            warnings.append(f"content: {kept['words_lost']} word(s) of the original lost")
        if kept["similarity"] < MIN_SIMILARITY and not (kept["words_added"] or kept["words_lost"]) and not adds_words:
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
    result["notes"] = notes
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
