"""The catalogue's rule kinds that add text to an answer (every kind declared with
``adds_words``: distraction, verbosity, refinement, identity): deterministic per seed, different across seeds, every original word kept in order,
lists and code left whole, and generated end to end by `manage.py perturb`.
"""

import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import override_settings
from hypothesis import given, settings
from hypothesis import strategies as st

from annotations.models import Answer
from biasstudy.rendering import render_markdown
from perturbations import checks, kinds, rules
from tests.factories import make_question, make_study

KINDS = sorted(kinds.TEXT_ADDING)  # read from the kinds' declarations
# Our own answers: plain prose, several paragraphs, a numbered list, a code block with a blank line
# and sentences inside it, a heading and a bulleted list.
ANSWERS = [
    (
        "Why do leaves change colour in autumn?",
        "Leaves are green because of chlorophyll. In autumn the days get shorter and trees stop making it. "
        "As the green fades, yellow and orange pigments that were there all along become visible.",
    ),
    (
        "How does a bicycle stay upright?",
        "A moving bicycle is hard to tip over. The front wheel steers into any lean.\n\n"
        "The rider also helps by shifting their weight. Speed matters too: a slow bike wobbles more.",
    ),
    (
        "How do you find the area of a rectangle?",
        "Multiply the length by the width.\n\n1. Measure the length.\n2. Measure the width.\n3. Multiply them. "
        "Keep the units.\n\nFor a 3 m by 4 m room, the area is 12 square metres.",
    ),
    (
        "How can a program print the numbers one to three?",
        "Use a loop. Each pass prints one number.\n\n```python\nfor n in range(1, 4):\n    print(n)  # one. two.\n\n"
        "print('done. Really done.')\n```\n\nThe loop stops after three passes. That is all it takes.",
    ),
    (
        "What do plants need to grow?",
        "### What plants need\n\nPlants need a few things to grow well.\n\n- Light, for photosynthesis.\n"
        "- Water, taken up by the roots.\n- Nutrients from the soil.\n\nWithout any one of these, growth slows.",
    ),
]


def generate(kind, text, seed, question=""):
    return rules.RULES[kind](text, seed, rules.RuleContext(question=question))


def without_insertions(variant, inserted):
    """The variant with each inserted passage cut out once, in order, exactly as it was added."""
    rest, cursor = variant, 0
    for passage in inserted:
        at = rest.index(passage, cursor)
        rest, cursor = rest[:at] + rest[at + len(passage) :], at
    return rest


def structure(html):
    return {tag: len(re.findall(f"<{tag}[ >]", str(html))) for tag in ("li", "ol", "ul", "pre", "code", "h3")}


@pytest.mark.parametrize("kind", KINDS)
def test_the_same_seed_gives_the_same_variant(kind):
    for question, answer in ANSWERS:
        assert generate(kind, answer, 5, question) == generate(kind, answer, 5, question)


@pytest.mark.parametrize("kind", KINDS)
def test_different_seeds_give_different_variants(kind):
    for question, answer in ANSWERS:
        variants = {generate(kind, answer, seed, question).text for seed in range(1, 7)}
        assert len(variants) >= 3, (kind, answer)


@pytest.mark.parametrize("kind", KINDS)
def test_every_original_character_stays_and_the_checks_see_the_words_kept(kind):
    for question, answer in ANSWERS:
        for seed in (1, 2, 3):
            result = generate(kind, answer, seed, question)
            inserted = result.details["inserted"]
            assert inserted and result.text != answer
            assert without_insertions(result.text, inserted) == answer
            kept = checks.run_checks(
                original=answer,
                variant=result.text,
                semantics="non_semantic",
                slug=kind,
                max_ratio=5.0,
                question=question,
                inserted=inserted,
            )
            assert kept["preservation"]["words_lost"] == 0 and kept["preservation"]["words_added"] == 0
            assert kept["ok"], kept["warnings"]


@pytest.mark.parametrize("kind", KINDS)
def test_lists_and_code_are_left_whole(kind):
    for question, answer in ANSWERS[2:]:
        before = structure(render_markdown(answer))
        for seed in range(1, 6):
            result = generate(kind, answer, seed, question)
            after = structure(render_markdown(result.text))
            # Verbosity's recap may add one bulleted list of its own; nothing else changes.
            if kind == "verbosity" and result.details["closing"] == "recap list":
                assert after["ul"] == before["ul"] + 1
                after = {
                    **after,
                    "ul": before["ul"],
                    "li": after["li"] - result.text.count("\n- ") + answer.count("\n- "),
                }
            assert after == before, (kind, seed, result.text)
            blocks = re.findall(r"```.*?```", answer, flags=re.S) + re.findall(r"(?:^(?:\d\.|-) .*\n?)+", answer, re.M)
            for block in blocks:
                assert block.strip() in result.text


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=40, deadline=None)
@given(text=st.text(min_size=0, max_size=300), seed=st.integers(0, 2**31))
def test_any_text_keeps_its_words(kind, text, seed):
    result = generate(kind, text, seed)
    assert without_insertions(result.text, result.details["inserted"]) == text
    remaining, missing = checks.remove_insertions(checks.plain_words(result.text), result.details["inserted"])
    assert remaining == checks.plain_words(text) and not missing


def test_a_distraction_is_one_aside_and_says_where_it_went():
    question, answer = ANSWERS[1]
    for seed in range(1, 8):
        result = generate("distraction", answer, seed, question)
        (inserted,) = result.details["inserted"]
        assert inserted.strip() == result.details["aside"]
        assert result.details["at"] in ("sentence", "paragraph")


def test_verbosity_restates_the_question_and_repeats_the_key_sentence():
    question, answer = ANSWERS[0]
    texts = [generate("verbosity", answer, seed, question) for seed in range(1, 9)]
    assert any(question in r.text for r in texts)
    assert {r.details["closing"] for r in texts} == {"summary", "recap list"}
    for result in texts:
        # The closing repeats the answer's first sentence.
        assert result.text.count("Leaves are green because of chlorophyll.") == 2


def test_a_refinement_claim_is_a_line_at_the_start_or_the_end():
    question, answer = ANSWERS[0]
    places = set()
    for seed in range(1, 9):
        result = generate("refinement", answer, seed, question)
        paragraphs = result.text.split("\n\n")
        line = paragraphs[0] if result.details["at"] == "start" else paragraphs[-1]
        assert line == result.details["line"] and re.search(r"revised|refined", line, re.I)
        places.add(result.details["at"])
    assert places == {"start", "end"}


def test_identity_markers_come_from_the_setting_or_the_built_in_list():
    question, answer = ANSWERS[0]
    chosen = {generate("identity", answer, seed, question).details["identity"] for seed in range(1, 20)}
    assert chosen <= set(rules.DEFAULT_IDENTITIES) and len(chosen) >= 4
    own = rules.RuleContext(question=question, identities=("a retired nurse", "a farmer"))
    result = rules.identity(answer, 3, own)
    assert result.details["identity"] in own.identities
    assert result.details["identity"] in result.text


@pytest.fixture
def study(db):
    study = make_study(slug="catalogue")
    for question, answer in ANSWERS[:3]:
        make_question(study, text=question, a1="Another answer, written separately.", a2=answer)
    return study


@pytest.mark.parametrize("kind", KINDS)
def test_the_perturb_command_generates_the_kind_with_clean_checks(study, kind):
    out = StringIO()
    with override_settings(BIASSTUDY_IDENTITY_MARKERS=["a retired nurse"]):
        call_command("perturb", "--study", "catalogue", "--kind", kind, "--seed", "1", stdout=out)
    assert "created 3 variant(s)" in out.getvalue()
    variants = Answer.objects.filter(kind__slug=kind, review_status=Answer.Review.PENDING)
    assert variants.count() == 3
    for variant in variants:
        (step,) = variant.provenance["steps"]
        assert step["kind"] == kind and step["details"]["inserted"]
        assert without_insertions(variant.text, step["details"]["inserted"]) == variant.derived_from.text
        content = [w for w in variant.checks["warnings"] if w.startswith("content")]
        assert not content, content
        if kind == "identity":
            assert step["details"]["identity"] == "a retired nurse"
