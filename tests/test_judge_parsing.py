import pytest

from judges.parsing import parse_vote
from judges.prompts import label_scheme

ANSWER12 = label_scheme("answer12")
AB = label_scheme("ab")
SYMBOLS = label_scheme("symbols")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer1", "first"),
        ("answer2", "second"),
        ("**Answer2**", "second"),
        ("  Answer 1.  ", "first"),
        ("[[Answer1]]", "first"),
        ("Tie", "tie"),
        ("TIE!", "tie"),
        ("Verdict: Answer2", "second"),
        ("**Final verdict:** Answer1", "first"),
    ],
)
def test_it_reads_a_vote_only_line_leniently_about_form(text, expected):
    assert parse_vote(text, style="vote_only", scheme=ANSWER12).choice == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Answer3",
        "Answer1 or Answer2",
        "I prefer the first one",
        "Answer1\nbecause it is right",
        "It's a tie, mostly",
    ],
)
def test_it_never_guesses_a_vote_only_output(text):
    result = parse_vote(text, style="vote_only", scheme=ANSWER12)
    assert result.choice is None
    assert result.reason


def test_it_reads_the_last_line_when_explaining_first():
    text = "Answer1 has a factual error about the moon.\nAnswer2 is correct.\n\n**Answer2**\n"
    assert parse_vote(text, style="explain_then_vote", scheme=ANSWER12).choice == "second"


def test_it_reads_the_first_line_when_voting_first():
    text = "Answer1\nAnswer2 invents a reference, Answer1 does not."
    assert parse_vote(text, style="vote_then_explain", scheme=ANSWER12).choice == "first"


def test_it_rejects_an_explanation_whose_last_line_is_not_a_label():
    text = "Answer1\nBoth are fine but I lean towards the first."
    assert parse_vote(text, style="explain_then_vote", scheme=ANSWER12).choice is None


def test_it_reads_the_labels_of_the_scheme_in_use():
    assert parse_vote("B", style="vote_only", scheme=AB).choice == "second"
    assert parse_vote("Answer A", style="vote_only", scheme=AB).choice == "first"
    assert parse_vote("square", style="vote_only", scheme=SYMBOLS).choice == "second"
    assert parse_vote("Answer1", style="vote_only", scheme=AB).choice is None
    assert parse_vote("B", style="vote_only", scheme=ANSWER12).choice is None


def test_it_points_at_where_the_label_starts():
    text = "Reasoning here.\n**Verdict:** Answer2"
    result = parse_vote(text, style="explain_then_vote", scheme=ANSWER12)
    assert text[result.label_offset :].startswith("Answer2")


def test_with_the_labels_swapped_a_label_is_read_back_to_the_position_it_was_shown_in():
    swapped = AB.in_order("ba")  # the answer shown first was [B]
    assert parse_vote("B", style="vote_only", scheme=swapped).choice == "first"
    assert parse_vote("Answer A", style="vote_only", scheme=swapped).choice == "second"
    assert parse_vote("tie", style="vote_only", scheme=swapped).choice == "tie"
