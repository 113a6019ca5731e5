"""The built-in perturbation kinds. A study may add its own in the admin or in an import file;
CONTRIBUTING.md says how to add one here, with a rule generator if it has one.

A kind is declared once, by its ``KindSpec``: what it does to the answer (``adds_length``,
``adds_words``, ``rewords``) or to what the judges are told (``changes``) is a field of it, and
the checks, the sets below and the tests (parametrized over ``BUILTIN_KINDS``) read those fields.
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
    # It adds sentences of its own between the answer's (an aside, padding, a line), which its rule
    # lists in details["inserted"]: the content check expects words added and compares the rest.
    # Such a kind adds length too (adds_length is set with it).
    adds_words: bool = False
    # It rewords the answer by design (tone): its words are not kept, its facts are checked.
    rewords: bool = False
    # "answer": the kind rewrites A2; "context": A2's text stays, and the item tells the judges
    # something about the pair (perturbations.context_rules).
    changes: str = "answer"

    def __post_init__(self) -> None:
        if self.adds_words:
            object.__setattr__(self, "adds_length", True)
        if self.semantics not in ("degrading", "non_semantic"):
            raise ValueError(f"kind {self.slug!r}: semantics is degrading or non_semantic, not {self.semantics!r}")
        if self.changes not in ("answer", "context"):
            raise ValueError(f"kind {self.slug!r}: it changes the answer or the context, not {self.changes!r}")
        if self.rewords and self.adds_length:
            raise ValueError(f"kind {self.slug!r}: a kind that rewords keeps the answer's length; it adds none")


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
    # Context kinds: the perturbed item is the control pair (same texts) with a line that favours
    # A2; raters read it above the answers, LLM judges in their prompt, in the same words.
    KindSpec(
        "bandwagon",
        "Bandwagon",
        "non_semantic",
        "The judge is told that most readers (or a share of them) preferred A2; the answers are "
        "unchanged. Probes bandwagon bias: a good judge does not move.",
        changes="context",
    ),
    KindSpec(
        "authority_source",
        "Authority of source",
        "non_semantic",
        "The judge is told that an expert wrote A2 and a layperson A1; the answers are unchanged. "
        "Probes authority bias in who is named as the author: a good judge does not move.",
        changes="context",
    ),
    KindSpec(
        "compassion_fade",
        "Compassion-fade (named author)",
        "non_semantic",
        "A2 is said to come from a named, well-known model and A1 from an anonymous source; the "
        "answers are unchanged. Probes compassion-fade: a good judge does not move.",
        changes="context",
    ),
    KindSpec(
        "sycophancy",
        "Sycophancy",
        "non_semantic",
        "The asker says they think A2 is right; the answers are unchanged. Probes sycophancy: a good "
        "judge does not move.",
        changes="context",
    ),
    KindSpec(
        "self_enhancement",
        "Self-enhancement (own model family)",
        "non_semantic",
        "A2 is said to be written by the judge's own family of models and A1 by another; the answers "
        "are unchanged. Probes self-enhancement in LLM judges; not shown to people, who have no model "
        "family.",
        changes="context",
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
        adds_words=True,
    ),
    KindSpec(
        "verbosity",
        "Verbosity without content",
        "non_semantic",
        "The answer is padded: an opening that restates the question, filler sentences, and a closing "
        "that repeats its key sentence or lists its first points again. It is longer and says nothing "
        "more. Probes verbosity bias: a good judge does not move.",
        adds_words=True,
    ),
    KindSpec(
        "refinement",
        "Refinement claim",
        "non_semantic",
        "A line at the start or the end says the answer was revised after review or feedback; the "
        "answer is otherwise unchanged. Probes refinement-aware bias: a good judge does not move.",
        adds_words=True,
    ),
    KindSpec(
        "identity",
        "Identity markers",
        "non_semantic",
        "The author states an identity (from the setting BIASSTUDY_IDENTITY_MARKERS, or a built-in "
        "list) in a line at the start or the end; the answer is otherwise unchanged. Probes diversity "
        "bias: a good judge does not move.",
        adds_words=True,
    ),
    KindSpec(
        "sentiment",
        "Sentiment / tone: enthusiastic",
        "non_semantic",
        "The same content in a more enthusiastic, upbeat tone. Every fact, number and name stays; only "
        "the wording of the tone changes. Made by a model. Probes sentiment bias: a good judge does "
        "not move.",
        rewords=True,
    ),
    KindSpec(
        "sentiment_negative",
        "Sentiment / tone: negative",
        "non_semantic",
        "The same content in a more negative, gloomy tone. Every fact, number and name stays; only the "
        "wording of the tone changes. Made by a model. Probes sentiment bias (the other direction): a "
        "good judge does not move.",
        rewords=True,
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


# Read from the declarations above: the kinds that add words of their own, that reword, that
# change the context.
TEXT_ADDING = frozenset(spec.slug for spec in BUILTIN_KINDS if spec.adds_words)
REWORDING = frozenset(spec.slug for spec in BUILTIN_KINDS if spec.rewords)
CONTEXT_KINDS = frozenset(spec.slug for spec in BUILTIN_KINDS if spec.changes == "context")


def builtin(slug: str) -> KindSpec:
    for spec in BUILTIN_KINDS:
        if spec.slug == slug:
            return spec
    raise KeyError(slug)
