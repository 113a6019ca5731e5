"""Rule-made fake references read like real ones: titles built from the question's topic as noun
phrases, in one citation style (APA 7), deterministic per seed. The questions and answers are our
own writing.
"""

import re

import pytest

from perturbations import rules

# (question, answer, words a title's topic must not be built from: the sentence's verbs)
CASES = [
    (
        "Why did the Soviet Union dissolve in 1991?",
        "The Soviet Union dissolved in 1991 because its economy was failing and its republics wanted "
        "independence. Reforms such as glasnost allowed open criticism. A failed coup in August 1991 weakened "
        "the central government, and the republics declared independence one after another.",
        {"dissolve", "dissolved", "failing", "wanted", "allowed", "weakened", "declared"},
    ),
    (
        "Why does the Moon cause tides on Earth?",
        "The Moon's gravity pulls on the oceans. The water on the side facing the Moon bulges out, and so "
        "does the water on the far side, which gives most coasts two high tides a day.",
        {"cause", "pulls", "bulges", "gives", "does"},
    ),
    (
        "What is the difference between weather and climate?",
        "Weather is what the air is doing today: rain, sun or wind. Climate is the average of the weather "
        "over many years in one place.",
        {"is", "doing"},
    ),
    (
        "How do you add a fraction to another fraction?",
        "Give both fractions the same denominator, then add the numerators and keep the denominator. "
        "Simplify the result if you can.",
        {"add", "give", "keep", "simplify"},
    ),
    (
        "Why is the sky blue?",
        "Sunlight holds every colour. Air scatters blue light much more than red light, so blue reaches our "
        "eyes from every part of the sky.",
        {"is", "holds", "scatters", "reaches"},
    ),
    (
        "Describe the main causes of the French Revolution.",
        "The king spent far more than the state could raise, bread was dear after poor harvests, and new "
        "ideas about rights spread through the towns.",
        {"describe", "spent", "raise", "spread"},
    ),
]
CASES += [
    (
        "Evaluate whether homework should be banned.",
        "Homework helps some pupils practise, but too much of it takes time from sleep and play. A little, "
        "set with care, seems fairer than none.",
        {"evaluate", "banned", "helps", "takes", "seems"},
    ),
    (
        "What are the three states of matter?",
        "Matter can be solid, liquid or gas. Heating a solid can melt it, and heating a liquid can boil it.",
        {"are", "melt", "boil"},
    ),
    (
        "Which is heavier, a kilogram of feathers or a kilogram of iron?",
        "Neither: a kilogram is a kilogram. The feathers take up far more space, which fools people.",
        {"is", "take", "fools"},
    ),
]
STOPWORDS = rules.STOPWORDS | {"the", "a", "an", "of", "and", "to", "from", "in", "about"}


def titles(question, answer, seed=1):
    return rules.fake_reference(answer, seed, rules.RuleContext(question=question))


def fragments(title):
    """The title's parts between the pattern's fixed words: the topic phrases."""
    return [f for f in re.split(r": |\band\b|\bto\b|\babout\b|\bof\b|\bin\b", title) if f.strip()]


@pytest.mark.parametrize(("question", "answer", "verbs"), CASES)
def test_titles_are_built_from_noun_phrases_of_the_topic(question, answer, verbs):
    for seed in range(1, 6):
        result = titles(question, answer, seed)
        topics = result.details["topics"]
        assert topics, question
        for topic in topics:
            words = topic.lower().split()
            assert not set(words) & verbs, (topic, question)  # no verb made a topic
            assert set(words) - STOPWORDS, topic  # not stop words alone
            assert words[-1] not in rules._ADJECTIVES, topic  # not cut after an adjective
            assert all(w.strip("'").lower() in (question + " " + answer).lower() or w.endswith("s") for w in words)
        for reference in result.details["references"]:
            title = reference["title"]
            assert any(topic.lower() in title.lower() for topic in topics), title
            for fragment in fragments(title):
                assert set(fragment.lower().split()) - STOPWORDS, (fragment, title)


@pytest.mark.parametrize(("question", "answer", "verbs"), CASES)
def test_titles_look_like_titles(question, answer, verbs):
    names = {w for w in re.findall(r"[A-Za-z]+", question + " " + answer) if w[0].isupper()}
    for seed in range(1, 6):
        for reference in titles(question, answer, seed).details["references"]:
            title = reference["title"]
            words = title.split()
            assert 3 <= len(words) <= 14, title
            assert title[0].isupper() and title.count(":") <= 1, title
            assert not re.search(r"[.,;]$", title) and "," not in title, title  # no word lists
            assert all(a.lower() != b.lower() for a, b in zip(words, words[1:], strict=False)), (
                title
            )  # no doubled words
            head, _, subtitle = title.partition(": ")
            # Sentence case: capitals only opening the title or the subtitle, or in a name.
            for word in head.split()[1:] + subtitle.split()[1:]:
                assert word[0].islower() or word[0].isdigit() or word.strip(":") in names, (word, title)
            if subtitle:
                assert subtitle[0].isupper(), title
            assert reference["venue"].istitle() or all(
                w[0].isupper() for w in reference["venue"].split() if w not in ("of", "and")
            )


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        ("Why did the Soviet Union dissolve in 1991?", ["the Soviet Union"]),
        ("Describe the main causes of the French Revolution.", ["the causes of the French Revolution"]),
        ("What are the three states of matter?", ["the three states of matter"]),
        ("How do you add a fraction to another fraction?", ["fractions"]),
        (
            "Which is heavier, a kilogram of feathers or a kilogram of iron?",
            ["kilograms of feathers", "kilograms of iron"],
        ),
        ("Summarize the plot of Romeo and Juliet.", ["the plot of Romeo and Juliet"]),
        ("Why is the sky blue?", ["the sky"]),
    ],
)
def test_the_topic_is_the_question_s_noun_phrase(question, topics):
    assert rules.topic_phrases(question, "", count=2) == topics


def test_the_references_are_in_one_style_and_listed_in_the_provenance():
    question, answer, _ = CASES[0]
    result = titles(question, answer, 3)
    assert result.details["style"] == "APA 7 (author-date)"
    body, block = rules.split_reference_block(result.text)
    for reference in result.details["references"]:
        assert reference["citation"] in body
        assert f"({reference['year']}). {reference['title']}. *{reference['venue']}*, *" in block
        assert f"https://doi.org/{reference['doi']}" in block
    assert "[1]" not in result.text  # no numbered markers mixed in


def test_the_references_are_the_same_for_a_seed_and_differ_across_seeds():
    for question, answer, _ in CASES:
        assert titles(question, answer, 4) == titles(question, answer, 4)
        seen = {titles(question, answer, seed).text for seed in range(1, 5)}
        assert len(seen) == 4


def test_without_a_topic_phrase_the_titles_are_general_but_natural():
    for question in ("Why?", "Can you explain it in your own words?", ""):
        result = titles(question, "It is so. That is how it goes.", 2)
        assert result.details["topics"] == []
        for reference in result.details["references"]:
            assert reference["title"] in rules._GENERAL_TITLES


@pytest.mark.parametrize(
    ("question", "topics"),
    [
        ("List three things animals need to survive.", ["animals"]),  # not "three things animals"
        ("Explain what people need to stay healthy.", []),  # not "need"
        ("What are the basic needs of living things?", []),  # not "the basic"
        ("What are needs and wants?", []),  # not "wants"
        ("Design a plan to reduce waste at school.", ["waste", "school"]),  # not "plans"
    ],
)
def test_a_verb_an_adjective_or_a_vague_word_is_never_the_subject_of_a_title(question, topics):
    assert rules.topic_phrases(question, "", count=2) == topics


def test_titles_name_the_subject_not_how_it_is_taught():
    for question, answer, _ in CASES:
        for seed in range(1, 9):
            for reference in titles(question, answer, seed).details["references"]:
                assert not re.search(r"students|classroom|teaching", reference["title"], re.I), reference["title"]


def test_one_answers_references_name_each_surname_once():
    answer = "Plants need light. They also need water. Roots take up minerals. Leaves make sugar."
    for seed in range(1, 200):
        result = titles("What do plants need to grow?", answer, seed)
        surnames = [
            a.split(", ")[0]
            for r in result.details["references"]
            for a in re.findall(r"[A-Z]\w+, [A-Z]\.", r["authors"])
        ]
        assert len(surnames) == len(set(surnames)), result.details["references"]
