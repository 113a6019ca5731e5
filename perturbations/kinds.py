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
    KindSpec(
        "reference_rich_content",
        "Fake reference + rich content",
        "non_semantic",
        "Fake references, then rich formatting, applied in that order.",
        steps=("reference", "rich_content"),
    ),
)


def builtin(slug: str) -> KindSpec:
    for spec in BUILTIN_KINDS:
        if spec.slug == slug:
            return spec
    raise KeyError(slug)
