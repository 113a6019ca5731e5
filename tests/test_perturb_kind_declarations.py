"""Every built-in kind, read from its one declaration (perturbations.kinds.KindSpec): it is in
the database after migrate as declared, in the bias catalogue, made by a rule, a model prompt or
context wordings, and its rule keeps the promise its declaration makes (adds length, adds words
of its own). A new kind is tested here by being declared."""

import re

import pytest
from django.conf import settings

from annotations.models import PerturbationKind
from perturbations import context_rules, kinds, modelgen, rules

ANSWER = (
    "Plants need light, water and nutrients. The roots take up water from the soil.\n\n"
    "Without light, photosynthesis stops and the plant cannot make sugar."
)
BY_SLUG = pytest.mark.parametrize("spec", kinds.BUILTIN_KINDS, ids=lambda spec: spec.slug)


@BY_SLUG
def test_it_is_in_the_database_as_declared(spec, db):
    kind = PerturbationKind.objects.get(slug=spec.slug, study=None)
    assert (kind.name, kind.semantics, list(kind.steps), kind.builtin) == (
        spec.name,
        spec.semantics,
        list(spec.steps),
        True,
    )


@BY_SLUG
def test_it_is_in_the_bias_catalogue(spec):
    catalogue = (settings.BASE_DIR / "docs" / "BIAS_CATALOGUE.md").read_text(encoding="utf-8")
    assert re.search(rf"`{spec.slug}`", catalogue), f"add a row for {spec.slug} to docs/BIAS_CATALOGUE.md"


@BY_SLUG
def test_it_can_be_made(spec):
    steps = spec.steps or (spec.slug,)
    if spec.changes == "context":
        assert context_rules.has_context_rule(spec.slug), spec.slug
    else:
        by_rule = all(rules.has_rule(step) for step in steps)
        assert by_rule or spec.slug in modelgen.DEFAULT_PROMPTS, f"{spec.slug}: no rule and no model prompt"


@BY_SLUG
def test_its_rule_keeps_what_its_declaration_says(spec):
    steps = list(spec.steps or (spec.slug,))
    if spec.changes == "context" or not all(rules.has_rule(step) for step in steps):
        pytest.skip("made by a model or by context wordings: tests/test_perturb_model.py, test_perturb_context.py")
    text, provenance = rules.apply_rule_steps(ANSWER, steps, 7)
    assert kinds.adds_length(steps) == spec.adds_length
    if spec.adds_length:
        assert len(text) > len(ANSWER)
    if spec.adds_words:
        assert kinds.adds_text(steps) and provenance[-1]["details"]["inserted"]
    assert not kinds.rewords(steps)


def test_a_declaration_is_checked_when_made():
    with pytest.raises(ValueError, match="semantics is degrading or non_semantic"):
        kinds.KindSpec("x", "X", "neutral", "")
    with pytest.raises(ValueError, match="rewords keeps the answer's length"):
        kinds.KindSpec("x", "X", "non_semantic", "", adds_length=True, rewords=True)
    assert kinds.KindSpec("x", "X", "non_semantic", "", adds_words=True).adds_length
