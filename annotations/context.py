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

A template names answers and families and nothing else (biasstudy.placeholders): `check` refuses
a conversion, format, attribute or index (`{A2!r}`, `{A2:>20}`, `{A2.x}`, `{A2[0]}`), and
`render` only puts the labels in place of the names, never through `str.format`. A template
stored before that rule is rendered all the same: a known name with anything after it gives the
bare label, anything else stays as written (placeholders.substitute).
"""

from __future__ import annotations

from biasstudy import placeholders

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
    """The fields `template` names; raise ContextError for anything but allowed names in braces."""
    try:
        return placeholders.check(template, allowed=FIELDS)
    except placeholders.PlaceholderError as exc:
        raise ContextError(str(exc)) from None


def check(template: str) -> None:
    """Raise ContextError saying what is wrong with a context template ('' is no context)."""
    if not template:
        return
    if len(template) > MAX_CHARS:
        raise ContextError(f"at most {MAX_CHARS} characters, not {len(template)}")
    if "\n" in template or "\r" in template:
        raise ContextError("one line: a context is shown as one line above the answers")
    fields = fields_of(template)
    if "A2" not in fields:
        raise ContextError("name the answer the context is about as {A2} (it follows the answer to every position)")


def names_judge_family(template: str) -> bool:
    """Whether the template speaks of the judge's own model family (people have none): as
    `render` reads it, so a template stored before `check` refused formats counts too."""
    return "judge_family" in placeholders.names(template)


def other_family(judge_family: str | None) -> str:
    own = (judge_family or "").casefold()
    for family in OTHER_FAMILIES:
        name = family.casefold()
        if not own or (name not in own and own not in name):
            return family
    return OTHER_FAMILIES[0]


def render(template: str, *, a1: str, a2: str, judge_family: str | None = None) -> str:
    """The context as one vote shows it: {A1} and {A2} replaced by the labels those answers have
    in that vote, {judge_family} by the judge's family (None: none applies). Never fails, and
    never gives more than the template with one label per field (placeholders.substitute)."""
    if not template:
        return ""
    values = {"A1": a1, "A2": a2, "judge_family": judge_family or NO_FAMILY, "other_family": other_family(judge_family)}
    return placeholders.substitute(template, values)


# The rater page's own names for the two answers, by position (templates/annotations/task.html).
RATER_LABELS = ("Answer 1", "Answer 2")


def rater_labels(shown_first: str) -> tuple[str, str]:
    """(label of A1, label of A2) on the rater page, where `shown_first` ("a1"/"a2") is left."""
    first, second = RATER_LABELS
    return (first, second) if shown_first == "a1" else (second, first)


def for_rater(template: str, shown_first: str) -> str:
    a1, a2 = rater_labels(shown_first)
    return render(template, a1=a1, a2=a2)
