"""What a judge is told about a pair besides the two answers: the context of a context kind's
item (bandwagon, authority of source, compassion-fade, sycophancy, self-enhancement). Pure: no
Django, no I/O.

A context is stored as a template that names the answers by what they are, {A1} and {A2}, never
by where they are shown: the display order and the label order change from vote to vote, so each
vote renders the template with the label its A1 and A2 answers have in that vote ("Answer 2" on
the rater page, "Answer1" or "B" in a judge's prompt). Raters and LLM judges thus read the same
words, and the words follow the answer, not the position.

{judge_family} names the judge's own family of models and {other_family} another one
(self-enhancement). People have no model family: items whose context names {judge_family} are
not handed to raters (annotations.models.Slot gives them no slots) and have no human figure.
"""

from __future__ import annotations

import string

FIELDS = ("A1", "A2", "judge_family", "other_family")
MAX_CHARS = 500

# Families {other_family} is chosen from: the first that is not the judge's own.
OTHER_FAMILIES = ("GPT-4", "Claude", "Gemini", "Llama", "Mistral")

# What {judge_family} reads as where no judge family applies (a page shown to a person, which
# the hand-out avoids); never shown to raters in a study.
NO_FAMILY = "an AI model"


class ContextError(ValueError):
    pass


def fields_of(template: str) -> set[str]:
    try:
        return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as exc:
        raise ContextError(f"{exc} (write a literal brace as {{{{ or }}}})") from None


def check(template: str) -> None:
    """Raise ContextError saying what is wrong with a context template ('' is no context)."""
    if not template:
        return
    if len(template) > MAX_CHARS:
        raise ContextError(f"at most {MAX_CHARS} characters, not {len(template)}")
    if "\n" in template or "\r" in template:
        raise ContextError("one line: a context is shown as one line above the answers")
    fields = fields_of(template)
    unknown = fields - set(FIELDS)
    if unknown:
        raise ContextError(
            f"unknown field(s) {', '.join(sorted('{' + f + '}' for f in unknown))}; "
            f"allowed: {', '.join('{' + f + '}' for f in FIELDS)}"
        )
    if "A2" not in fields:
        raise ContextError("name the answer the context is about as {A2} (it follows the answer to every position)")


def names_judge_family(template: str) -> bool:
    """Whether the template speaks of the judge's own model family (people have none)."""
    try:
        return "judge_family" in fields_of(template)
    except ContextError:
        return False


def other_family(judge_family: str | None) -> str:
    own = (judge_family or "").casefold()
    for family in OTHER_FAMILIES:
        name = family.casefold()
        if not own or (name not in own and own not in name):
            return family
    return OTHER_FAMILIES[0]


def render(template: str, *, a1: str, a2: str, judge_family: str | None = None) -> str:
    """The context as one vote shows it: {A1} and {A2} replaced by the labels those answers have
    in that vote, {judge_family} by the judge's family (None: none applies)."""
    if not template:
        return ""
    return template.format(
        A1=a1, A2=a2, judge_family=judge_family or NO_FAMILY, other_family=other_family(judge_family)
    )


# The rater page's own names for the two answers, by position (templates/annotations/task.html).
RATER_LABELS = ("Answer 1", "Answer 2")


def rater_labels(shown_first: str) -> tuple[str, str]:
    """(label of A1, label of A2) on the rater page, where `shown_first` ("a1"/"a2") is left."""
    first, second = RATER_LABELS
    return (first, second) if shown_first == "a1" else (second, first)


def for_rater(template: str, shown_first: str) -> str:
    a1, a2 = rater_labels(shown_first)
    return render(template, a1=a1, a2=a2)
