"""import_votes --format csv: the optional columns for data from elsewhere (judge kind, label
scheme, option probabilities, answer lengths), and how bad values in them are refused."""

import csv
import io
import json

import pytest
from django.core.management import CommandError, call_command

from analysis import current_report
from analysis import rows as metric_rows  # beside the CSV rows the tests write
from annotations.models import Answer, Judge, Vote
from tests.factories import make_study

HEADER = [
    "question_id",
    "question",
    "answer_a1",
    "answer_a2",
    "judge",
    "winner",
    "shown_first",
    "judge_kind",
    "label_scheme",
    "prob_first",
    "prob_second",
    "prob_tie",
    "len_a1_words",
    "len_a2_words",
]
ROWS = [
    ["q1", "Why?", "", "", "crowd", "a1", "a1", "human", "", "", "", "", "40", "120"],
    ["q1", "Why?", "", "", "crowd", "a2", "a2", "human", "", "", "", "", "40", "120"],
    ["q1", "Why?", "", "", "model", "a2", "a2", "llm", "ab", "0.7", "0.2", "0.1", "40", "120"],
    ["q2", "How?", "Short.", "A longer answer here.", "model", "tie", "a1", "llm", "ab", "0.3", "0.3", "0.4", "", ""],
]


def write(path, rows, header=HEADER):
    with path.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows([header, *rows])
    return path


def test_judge_kind_label_scheme_probabilities_and_lengths_are_stored_and_analysed(db, tmp_path):
    study = make_study(status="draft", slug="cols")
    call_command(
        "import_votes", str(write(tmp_path / "v.csv", ROWS)), "--format", "csv", "--study", "cols", verbosity=0
    )
    assert Judge.objects.get(study=study, name="crowd").params.get("people") is True
    assert "people" not in Judge.objects.get(study=study, name="model").params
    vote = Vote.objects.get(judge__name="model", item__question__external_id="q1")
    # As displayed: A2 was shown first, so "first" is A2's probability.
    assert (vote.label_scheme, vote.option_probs) == ("ab", {"first": 0.7, "second": 0.2, "tie": 0.1})
    assert vote.choice == "a2" and vote.choice_shown == "first"
    given = Answer.objects.get(question__study=study, external_id="q1-a2")
    assert (given.text, given.len_words) == ("", 120)
    measured = Answer.objects.get(question__study=study, external_id="q2-a2")
    assert measured.len_words == 4
    result = current_report.study_analyze(study=study)
    judges = {j["judge"]: j for j in result["judges"]}
    assert judges["crowd"]["kind"] == "human"
    mean_prob_a2 = metric_rows.one(result["rows"], judge="model", metric="mean_prob_a2")
    assert mean_prob_a2["n"] == 2
    assert mean_prob_a2["estimate"] == pytest.approx((0.7 + 0.3) / 2)
    assert metric_rows.one(result["rows"], judge="model", metric="agreement_vs_human_majority")["n"] == 1


@pytest.mark.parametrize(
    ("row", "column", "value", "message"),
    [
        (0, "judge_kind", "robot", "line 2, field 'judge_kind': 'robot' is not human, llm, simulated or imported"),
        (1, "judge_kind", "llm", "line 3, field 'judge_kind': judge 'crowd' had kind 'human' before"),
        (2, "prob_first", "1.5", "line 4, field 'prob_first': '1.5' is not a probability"),
        (2, "prob_tie", "", "line 4, field 'prob_tie': is needed with the other prob_ columns"),
        (2, "prob_second", "high", "line 4, field 'prob_second': 'high' is not a probability"),
        (2, "prob_first", "0.9", r"line 4, field 'prob_first': the prob_ columns \(0.9, 0.2, 0.1\) do not add up to 1"),
        (0, "len_a1_words", "-3", "line 2, field 'len_a1_words': '-3' is not a whole number"),
        (1, "len_a2_words", "7", "line 3, field 'answer_a2': answer 'q1-a2' differs"),
        (3, "len_a2_words", "9", "line 5, field 'len_a2_words': give either answer_a2 or its length"),
        (2, "label_scheme", "x" * 33, "line 4, field 'label_scheme': is longer than 32 characters"),
    ],
)
def test_bad_optional_values_name_the_line_and_field_and_write_nothing(db, tmp_path, row, column, value, message):
    study = make_study(status="draft", slug="cols-bad")
    rows = [list(r) for r in ROWS]
    rows[row][HEADER.index(column)] = value
    with pytest.raises(CommandError, match=message):
        call_command("import_votes", str(write(tmp_path / "v.csv", rows)), "--format", "csv", "--study", "cols-bad")
    assert not Vote.objects.filter(item__study=study).exists()


def test_probabilities_that_are_not_a_distribution_are_refused_as_a_judge_reply_would_be(db, tmp_path):
    make_study(status="draft", slug="cols-probs")
    rows = [list(r) for r in ROWS]
    rows[2][HEADER.index("prob_first") : HEADER.index("prob_tie") + 1] = ["0.9", "0.9", "0.9"]
    with pytest.raises(CommandError, match=r"line 4, field 'prob_first': the prob_ columns \(0.9, 0.9, 0.9\)"):
        call_command("import_votes", str(write(tmp_path / "v.csv", rows)), "--format", "csv", "--study", "cols-probs")
    assert not Vote.objects.exists()


def test_rounded_probabilities_that_add_up_to_one_are_read(db, tmp_path):
    make_study(status="draft", slug="cols-rounded")
    rows = [list(r) for r in ROWS]
    rows[2][HEADER.index("prob_first") : HEADER.index("prob_tie") + 1] = ["0.333", "0.333", "0.333"]
    call_command("import_votes", str(write(tmp_path / "v.csv", rows)), "--format", "csv", "--study", "cols-rounded")
    assert Vote.objects.get(judge__name="model", item__question__external_id="q1").option_probs["first"] == 0.333


def test_a_quote_left_open_is_a_problem_at_its_line_never_a_merged_vote(db, tmp_path):
    # The open quote would swallow the next rows into one vote's question text (csv's lenient
    # mode): refused, naming the line where the broken record starts.
    make_study(status="draft", slug="cols-quote")
    path = write(tmp_path / "v.csv", ROWS)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace("q1,Why?,", 'q1,"Why?,', 1)  # the second vote, line 3
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 3: not readable as CSV from this line on: .*quoted field left open"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "cols-quote", verbosity=0)
    assert not Vote.objects.exists()


def test_lengths_in_the_blog_posts_measure_are_read_and_analysed_with_it(db, tmp_path):
    """A data set without texts, given its lengths in the verbosity blog post's measure
    (``spaces``): stored as the answers' ``spaces`` lengths and used by the blog's convention,
    by hand: the winner is strictly longer in 3 of the 5 votes (equal lengths count as not)."""
    study = make_study(status="draft", slug="blog")
    header = ["question_id", "question", "judge", "winner", "len_a1_spaces", "len_a2_spaces"]
    rows = [
        ["q1", "One?", "crowd", "a2", "10", "20"],
        ["q2", "Two?", "crowd", "a1", "30", "5"],
        ["q3", "Three?", "crowd", "a1", "10", "20"],
        ["q4", "Four?", "crowd", "a2", "7", "7"],
        ["q5", "Five?", "crowd", "a2", "3", "9"],
    ]
    call_command("import_votes", str(write(tmp_path / "v.csv", rows, header)), "--format", "csv", "--study", "blog")
    answer = Answer.objects.get(question__study=study, external_id="q2-a1")
    assert (answer.text, answer.len_spaces) == ("", 30)
    out = io.StringIO()
    call_command(
        "analyze", "--study", "blog", "--json", "--measure", "spaces", "--verbosity-convention", "blog", stdout=out
    )
    rows = json.loads(out.getvalue())["rows"]
    assert metric_rows.estimate(rows, judge="crowd", metric="longer_wins") == pytest.approx(3 / 5)


def test_a_length_column_of_no_named_measure_is_refused(db, tmp_path):
    make_study(status="draft", slug="blog")
    header = ["question_id", "question", "judge", "winner", "len_a1_lines", "len_a2_lines"]
    path = write(tmp_path / "v.csv", [["q1", "One?", "crowd", "a2", "1", "2"]], header)
    with pytest.raises(CommandError, match="len_a1_lines"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "blog")
    assert not Vote.objects.exists()
