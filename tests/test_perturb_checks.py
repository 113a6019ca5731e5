"""Checks of a variant against its original: they flag added or dropped text, longer variants and
altered numbers or names from the question; a clean rule-made variant passes.
"""

import json

import pytest

from annotations import lengths
from biasstudy.datasets import dataset_path
from perturbations import checks, rules
from perturbations.services import variant_checks
from tests.factories import make_question, make_study, make_variant

ORIGINAL = (
    "To solve 3*x = 27, divide both sides by 3. This keeps the equation balanced. "
    "The result is x = 9, which you can check by putting 9 back into the equation."
)
QUESTION = "How do you solve the equation 3*x = 27 for x?"


def run(variant, semantics="non_semantic", slug="reference", errors=None, ratio=1.3):
    return checks.run_checks(
        original=ORIGINAL,
        variant=variant,
        semantics=semantics,
        slug=slug,
        max_ratio=ratio,
        question=QUESTION,
        errors=errors,
    )


def test_a_rule_made_reference_keeps_the_content():
    result = run(rules.fake_reference(ORIGINAL, 1).text, ratio=10.0)  # short answer, long references
    assert result["preservation"] == {"similarity": 1.0, "words_added": 0, "words_lost": 0, "added": [], "lost": []}
    assert result["ok"], result["warnings"]


def test_it_flags_a_variant_that_adds_text():
    result = run(
        ORIGINAL + " Many teachers agree this is the best method. [1]\n\nReferences\n[1] A. (2001).", ratio=3.0
    )
    assert result["preservation"]["words_added"] == 8
    assert "teachers" in result["preservation"]["added"]
    assert any("added" in w for w in result["warnings"])


def test_it_flags_a_variant_that_drops_text():
    result = run("### Steps\n\nTo solve 3*x = 27, divide both sides by 3. The result is x = 9 ✅")
    assert result["preservation"]["lost"][:5] == ["This", "keeps", "the", "equation", "balanced."]
    assert any("lost" in w for w in result["warnings"])


def test_it_flags_a_variant_longer_than_the_study_bound_in_each_measure_with_one_warning():
    result = run(rules.fake_reference(ORIGINAL, 1).text, ratio=1.1)
    assert result["length"]["ratios"]["words"] > 1.1
    assert {"words", "chars"} <= set(result["length"]["over"])
    # A reference adds length by design: the length is a note, not a warning.
    assert not [w for w in result["warnings"] if w.startswith("length")]
    (warning,) = [w for w in result["notes"] if w.startswith("length")]
    largest = max(result["length"]["over"], key=lambda m: result["length"]["ratios"][m])
    assert f"{result['length']['ratios'][largest]}× the original in {checks.MEASURE_NAMES[largest]}" in warning


def test_it_flags_a_factual_error_that_changes_a_number_from_the_question():
    variant = ORIGINAL.replace("3*x = 27, divide both sides by 3", "3*x = 24, divide both sides by 3").replace(
        "x = 9, which you can check by putting 9", "x = 8, which you can check by putting 8"
    )
    errors = [{"original": "x = 9", "error": "x = 8", "explanation": "27 / 3 is 9."}]
    result = run(variant, semantics="degrading", slug="factual_error", errors=errors)
    assert result["factual"]["question_terms_altered"] == [{"term": "27", "original": 1, "variant": 0}]
    assert any("'27' from the question was altered" in w for w in result["warnings"])
    # The change of 27 is not one of the declared errors either.
    assert any(c["before"] == "27," for c in result["factual"]["unexplained_changes"])


def test_a_declared_factual_error_that_is_in_the_text_passes():
    variant = ORIGINAL.replace("The result is x = 9", "The result is x = 8")
    errors = [{"original": "x = 9", "error": "x = 8", "explanation": "27 / 3 is 9."}]
    result = run(variant, semantics="degrading", slug="factual_error", errors=errors)
    assert result["factual"]["changes"] == [{"op": "replace", "before": "9,", "after": "8,"}]
    assert result["ok"], result["warnings"]


def test_it_flags_a_declared_error_missing_from_the_variant_and_an_unchanged_variant():
    errors = [{"original": "divide", "error": "multiply", "explanation": "wrong operation"}]
    result = run(ORIGINAL, semantics="degrading", slug="factual_error", errors=errors)
    assert not result["factual"]["differs"]
    assert result["factual"]["errors_missing"] == ["multiply"]
    assert "error: the variant does not differ from the original" in result["warnings"]


def test_question_terms_are_numbers_and_names_not_sentence_openers():
    assert checks.question_terms("How did Marie Curie win 2 Nobel prizes in 1903 and 1911?") == [
        "2",
        "1903",
        "1911",
        "Marie Curie",
        "Nobel",
    ]


def test_the_word_diff_lists_what_changed():
    assert checks.word_diff("a b c", "a x c d") == [
        ("equal", ["a"], ["a"]),
        ("replace", ["b"], ["x"]),
        ("equal", ["c"], ["c"]),
        ("insert", [], ["d"]),
    ]


DATA = dataset_path("humans_llms_judgement_bias")


@pytest.mark.dataset("humans_llms_judgement_bias/reference.json", "humans_llms_judgement_bias/raw.json")
@pytest.mark.skipif(not lengths.bpe_available(), reason="no offline BPE tokenizer")
@pytest.mark.django_db
def test_the_published_reference_variants_are_flagged_as_much_longer():
    """Five rows of the public release, built as answer pairs: the length warning fires on each."""
    study = make_study()
    raw = {}
    with open(DATA / "raw.json", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            raw[row["question_id"]] = row
    rows = []
    with open(DATA / "reference.json", encoding="utf-8") as f:
        for line in f:
            rows.append(json.loads(line))
            if len(rows) == 5:
                break
    char_ratios = []
    for row in rows:
        control = raw[row["question_id"].removesuffix("-reference")]
        slot = next(k for k, a in row["answers"].items() if a.get("perturb") == "reference")
        original = control["answers"][slot]["answer"]
        other = control["answers"]["answer2" if slot == "answer1" else "answer1"]["answer"]
        question = make_question(study, text=row["question"], a1=other, a2=original)
        variant = make_variant(question, kind="reference", text=row["answers"][slot]["answer"], item=False)
        result = variant_checks(answer=variant)
        # Fake references (and their URLs) cost the most BPE tokens: that measure catches every one.
        assert "bpe" in result["length"]["over"], (row["question_id"], result["length"]["ratios"])
        assert any(w.startswith("length: ") for w in result["notes"])  # a note: the added length is the point
        char_ratios.append(result["length"]["ratios"]["chars"])
    assert sum(char_ratios) / len(char_ratios) > study.max_length_ratio


def test_for_a_kind_that_adds_sentences_only_words_beyond_its_declared_insertions_are_flagged():
    result = rules.verbosity(ORIGINAL, 2, rules.RuleContext(question=QUESTION))
    clean = run(result.text, slug="verbosity", ratio=5.0)
    declared = checks.run_checks(
        original=ORIGINAL,
        variant=result.text,
        semantics="non_semantic",
        slug="verbosity",
        max_ratio=5.0,
        question=QUESTION,
        inserted=result.details["inserted"],
    )
    assert declared["ok"], declared["warnings"]
    # Without declarations (a study file's variant) the added words are the kind's: not flagged.
    assert not [w for w in clean["warnings"] if "added" in w]
    edited = result.text.replace("divide both sides by 3.", "divide both sides by 3. Teachers love this.", 1)
    flagged = checks.run_checks(
        original=ORIGINAL,
        variant=edited.replace("This keeps the equation balanced.", ""),
        semantics="non_semantic",
        slug="verbosity",
        max_ratio=5.0,
        question=QUESTION,
        inserted=result.details["inserted"],
    )
    assert "content: 3 word(s) added beyond the declared insertions" in flagged["warnings"]
    assert "content: 5 word(s) of the original lost" in flagged["warnings"]


def test_a_tone_rewrite_is_checked_for_its_numbers_and_names_not_its_words():
    upbeat = (
        "Great news: to solve 3*x = 27, just divide both sides by 3! That keeps everything nicely balanced. "
        "And the result is x = 9, which you can happily check by putting 9 back into the equation."
    )
    result = run(upbeat, slug="sentiment")
    assert result["facts"] == {"dropped": []}
    assert result["ok"], result["warnings"]
    changed = run(upbeat.replace("x = 9, which you can happily check by putting 9", "x = 8"), slug="sentiment")
    assert "content: '9' of the original is missing or less often in the variant" in changed["warnings"]
