"""Rule generators: deterministic per seed, and they only add formatting and references."""

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from perturbations import checks, rules

LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
WORD = st.one_of(st.text(LETTERS, min_size=1, max_size=12), st.integers(0, 9999).map(str))
# Sentences open with a capitalised word (a paragraph opening with "12." would be a markdown list).
SENTENCE = st.builds(
    lambda first, words, comma, end: (
        " ".join([first] + [w + ("," if comma and i == 0 else "") for i, w in enumerate(words)]) + end
    ),
    st.text(LETTERS[26:], min_size=1, max_size=1).flatmap(
        lambda c: st.text(LETTERS[:26], max_size=9).map(lambda r: c + r)
    ),
    st.lists(WORD, max_size=14),
    st.booleans(),
    st.sampled_from([".", "?", "!"]),
)
PARAGRAPH = st.lists(SENTENCE, min_size=1, max_size=6).map(" ".join)
ANSWER = st.lists(PARAGRAPH, min_size=1, max_size=5).map("\n\n".join)
SEEDS = st.integers(min_value=0, max_value=2**31)
GENERATORS = st.sampled_from(
    [["reference"], ["rich_content"], ["reference", "rich_content"], ["rich_content", "reference"]]
)

STEPS_ANSWER = (
    "The scientific method has several steps. First, you observe something and ask a question. "
    "Then, you form a hypothesis that can be tested. Next, you run an experiment with a control group. "
    "Finally, you analyse the data and draw a conclusion."
)


@settings(max_examples=60, deadline=None)
@given(text=ANSWER, seed=SEEDS, steps=GENERATORS)
def test_it_gives_the_same_variant_for_the_same_seed(text, seed, steps):
    assert rules.apply_rule_steps(text, steps, seed) == rules.apply_rule_steps(text, steps, seed)


@settings(max_examples=150, deadline=None)
@given(text=ANSWER, seed=SEEDS, steps=GENERATORS)
def test_stripping_the_added_formatting_gives_back_the_original_words(text, seed, steps):
    variant, provenance = rules.apply_rule_steps(text, steps, seed)
    assert variant != text
    assert checks.plain_words(variant) == text.split()
    assert [step["kind"] for step in provenance] == steps


@settings(max_examples=80, deadline=None)
@given(text=st.text(min_size=1, max_size=300), seed=SEEDS, steps=GENERATORS)
def test_any_text_keeps_its_words_once_both_sides_are_stripped(text, seed, steps):
    variant, _ = rules.apply_rule_steps(text, steps, seed)
    assert checks.plain_words(variant) == checks.plain_words(text)


def test_different_seeds_give_different_references():
    first = rules.fake_reference(STEPS_ANSWER, 1)
    second = rules.fake_reference(STEPS_ANSWER, 2)
    assert first.details["references"] != second.details["references"]


def test_a_fake_reference_adds_apa_citations_and_a_matching_reference_list():
    result = rules.fake_reference(STEPS_ANSWER, 7)
    body, block = rules.split_reference_block(result.text)
    citations = re.findall(r" (\([A-Z][a-z]+(?: (?:& [A-Z][a-z]+|et al\.))?, \d{4}\))[.!?]", body)
    assert len(citations) == 2
    entries = [e for e in block.strip().splitlines()[1:] if e.strip()]
    assert len(entries) == 2
    assert entries == sorted(entries)  # APA: alphabetical by first author
    for entry in entries:
        assert re.fullmatch(
            r"[A-Z][a-z]+, [A-Z]\.(?:,? (?:& )?[A-Z][a-z]+, [A-Z]\.)*,? \(\d{4}\)\. [A-Z].+\. \*[A-Z].+\*, \*\d+\*\(\d\), "
            r"\d+–\d+\. https://doi\.org/10\.\d{4}/[a-z]+\.\d{4}\.\d{4}",
            entry,
        ), entry
    for reference in result.details["references"]:
        assert reference["citation"] in body
        assert any(reference["title"] in e and reference["venue"] in e for e in entries)
    # The answer's own text is unchanged apart from the citations.
    assert rules.AUTHOR_YEAR_CITATION.sub("", body).strip() == STEPS_ANSWER


def test_rich_content_adds_a_heading_bold_a_list_and_emoji():
    result = rules.rich_content(STEPS_ANSWER, 3)
    lines = result.text.splitlines()
    assert lines[0].startswith("### ")
    assert "**" in result.text
    assert sum(line.startswith("- ") for line in lines) >= 3, result.text
    assert any(checks._is_emoji(c) for c in result.text)
    assert result.details["list_from"] == "sentences"
    assert checks.plain_words(result.text) == STEPS_ANSWER.split()


def test_a_compound_records_one_provenance_entry_per_step_in_order():
    text, provenance = rules.apply_rule_steps(STEPS_ANSWER, ["reference", "rich_content"], 5)
    assert [p["kind"] for p in provenance] == ["reference", "rich_content"]
    assert all(p["seed"] == 5 and p["method"] == "rule" for p in provenance)
    assert "https://doi.org/" in text.rstrip().splitlines()[-1]  # the reference list stays at the end
    assert "**References**" in text


def test_a_kind_without_a_rule_is_refused_clearly():
    try:
        rules.apply_rule_steps("Some text.", ["factual_error"], 1)
    except KeyError as exc:
        assert "factual_error" in str(exc) and "model" in str(exc)
    else:
        raise AssertionError("expected a KeyError")
