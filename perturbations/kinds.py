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
    # "answer": the kind rewrites A2; "context": A2's text stays, and the item tells the judges
    # something about the pair (perturbations.context_rules).
    changes: str = "answer"


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
    ),
    KindSpec(
        "rich_content",
        "Rich content",
        "non_semantic",
        "Markdown structure (heading, bold, lists) and emoji are added; the content is unchanged. "
        "Probes beauty bias: a good judge does not move.",
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
    ),
)


CONTEXT_KINDS = frozenset(spec.slug for spec in BUILTIN_KINDS if spec.changes == "context")


def builtin(slug: str) -> KindSpec:
    for spec in BUILTIN_KINDS:
        if spec.slug == slug:
            return spec
    raise KeyError(slug)
