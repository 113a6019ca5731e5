"""The built-in perturbation kinds. A study may add its own in the admin or in an import file;
CONTRIBUTING.md says how to add one here, with a rule generator if it has one.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class KindSpec:
    slug: str
    name: str
    semantics: str  # "degrading" or "non_semantic"
    description: str
    steps: tuple[str, ...] = field(default=())
    # The perturbation is text added to the answer (references, formatting, an aside, padding, a
    # line): a longer variant is the point, not a fault, and the checks say so.
    adds_length: bool = False


BUILTIN_KINDS: tuple[KindSpec, ...] = (
    KindSpec(
        "factual_error",
        "Factual error",
        "degrading",
        "One to three factual mistakes are planted; everything else stays. Probes fallacy-oversight "
        "bias: a good judge prefers the other answer.",
    ),
    KindSpec(
        "gender",
        "Gender bias",
        "degrading",
        "The answer is rewritten with gender-biased content. A good judge prefers the other answer.",
    ),
    KindSpec(
        "reference",
        "Fake reference",
        "non_semantic",
        "Invented but plausible citations and a reference list are added; the content is unchanged. "
        "Probes authority bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "rich_content",
        "Rich content",
        "non_semantic",
        "Markdown structure (heading, bold, lists) and emoji are added; the content is unchanged. "
        "Probes beauty bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "reference_rich_content",
        "Fake reference + rich content",
        "non_semantic",
        "Fake references, then rich formatting, applied in that order.",
        steps=("reference", "rich_content"),
        adds_length=True,
    ),
    KindSpec(
        "distraction",
        "Distraction",
        "non_semantic",
        "An irrelevant but plausible aside is inserted between two sentences or paragraphs; the answer "
        "is otherwise unchanged. Probes distraction bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "verbosity",
        "Verbosity without content",
        "non_semantic",
        "The answer is padded: an opening that restates the question, filler sentences, and a closing "
        "that repeats its key sentence or lists its first points again. It is longer and says nothing "
        "more. Probes verbosity bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "refinement",
        "Refinement claim",
        "non_semantic",
        "A line at the start or the end says the answer was revised after review or feedback; the "
        "answer is otherwise unchanged. Probes refinement-aware bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "identity",
        "Identity markers",
        "non_semantic",
        "The author states an identity (from the setting BIASSTUDY_IDENTITY_MARKERS, or a built-in "
        "list) in a line at the start or the end; the answer is otherwise unchanged. Probes diversity "
        "bias: a good judge does not move.",
        adds_length=True,
    ),
    KindSpec(
        "sentiment",
        "Sentiment / tone: enthusiastic",
        "non_semantic",
        "The same content in a more enthusiastic, upbeat tone. Every fact, number and name stays; only "
        "the wording of the tone changes. Made by a model. Probes sentiment bias: a good judge does "
        "not move.",
    ),
    KindSpec(
        "sentiment_negative",
        "Sentiment / tone: negative",
        "non_semantic",
        "The same content in a more negative, gloomy tone. Every fact, number and name stays; only the "
        "wording of the tone changes. Made by a model. Probes sentiment bias (the other direction): a "
        "good judge does not move.",
    ),
)


def adds_length(steps: list[str] | tuple[str, ...]) -> bool:
    """Whether a kind of these steps makes an answer longer by design: every step is built in and
    adds text."""
    specs = {spec.slug: spec for spec in BUILTIN_KINDS}
    return bool(steps) and all(step in specs and specs[step].adds_length for step in steps)


def adds_text(steps: list[str] | tuple[str, ...]) -> bool:
    """Whether one of these steps adds words of its own to the answer (not only markup and
    references): the content check then expects words added and compares the rest."""
    return bool(set(steps) & TEXT_ADDING)


def rewords(steps: list[str] | tuple[str, ...]) -> bool:
    """Whether one of these steps rewords the answer by design (tone): its words are not kept, its
    facts are."""
    return bool(set(steps) & REWORDING)


TEXT_ADDING = frozenset({"distraction", "verbosity", "refinement", "identity"})
REWORDING = frozenset({"sentiment", "sentiment_negative"})


def builtin(slug: str) -> KindSpec:
    for spec in BUILTIN_KINDS:
        if spec.slug == slug:
            return spec
    raise KeyError(slug)
