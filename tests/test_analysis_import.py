"""import_votes: MT-bench (a subset) and the generic CSV, and how bad input is refused."""

import csv
import shutil
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from analysis import current_report
from analysis import rows as metric_rows  # beside the CSV rows the tests write
from annotations.models import Answer, ComparisonItem, Judge, Question, Rater, Vote
from biasstudy.datasets import dataset_path
from tests.factories import make_study
from vote_imports import vote_import

MTBENCH = dataset_path("mtbench_human_judgments")
needs_mtbench = pytest.mark.dataset("mtbench_human_judgments")


@pytest.fixture
def mtbench_subset(tmp_path):
    """The first 300 human votes and the first 150 GPT-4 votes, with the full question and
    answer files."""
    for name, rows in (("human.csv", 300), ("gpt4_pair.csv", 150)):
        lines = (MTBENCH / name).read_text(encoding="utf-8").splitlines(keepends=True)
        (tmp_path / name).write_text("".join(lines[: rows + 1]), encoding="utf-8")
    for name in ("question.jsonl", "model_answers.jsonl"):
        shutil.copy(MTBENCH / name, tmp_path / name)
    return tmp_path


@needs_mtbench
def test_mtbench_votes_become_questions_items_judges_raters_and_votes(db, mtbench_subset):
    study = make_study(status="draft", slug="mt")
    out = StringIO()
    call_command("import_votes", str(mtbench_subset), "--format", "mtbench", "--study", "mt", stdout=out)
    assert Vote.objects.filter(item__study=study).count() == 450
    assert set(Judge.objects.filter(study=study).values_list("name", "kind")) == {
        ("mtbench-human", "imported"),
        ("mtbench-gpt4-pair", "imported"),
    }
    assert Question.objects.filter(study=study).count() == ComparisonItem.objects.filter(study=study).count()
    assert Answer.objects.filter(question__study=study).count() == 2 * Question.objects.filter(study=study).count()
    assert Rater.objects.filter(study=study).count() == len(
        {r["judge"] for r in csv.DictReader((mtbench_subset / "human.csv").open())}
    )
    assert not Vote.objects.filter(item__study=study, meta__order_known=True).exists()
    assert "450 votes" in out.getvalue()


@needs_mtbench
def test_an_mtbench_turn_two_vote_is_measured_on_the_second_answer(db, mtbench_subset):
    study = make_study(status="draft", slug="mt2")
    call_command("import_votes", str(mtbench_subset), "--format", "mtbench", "--study", "mt2", verbosity=0)
    q = Question.objects.get(study=study, external_id="mtbench-81-t2-alpaca-13b-vs-gpt-3.5-turbo")
    a1 = q.answers.get(external_id__endswith="alpaca-13b")
    import json

    answers = {
        (r["question_id"], r["model"]): r for r in map(json.loads, (mtbench_subset / "model_answers.jsonl").open())
    }
    assert a1.text == answers[(81, "alpaca-13b")]["turns"][1]
    assert a1.len_words == len(a1.text.split())
    assert "(Follow-up)" in q.text


@needs_mtbench
def test_the_analysis_runs_on_imported_mtbench_votes(db, mtbench_subset):
    study = make_study(status="draft", slug="mt3")
    call_command("import_votes", str(mtbench_subset), "--format", "mtbench", "--study", "mt3", verbosity=0)
    result = current_report.study_analyze(study=study)
    table = result["rows"]
    position = metric_rows.one(table, judge="mtbench-human", metric="position_first", bloom="")
    assert position["n"] == 0  # order unknown, so no positional figure
    assert 0 < metric_rows.estimate(table, judge="mtbench-human", metric="longer_wins") < 1
    fleiss = metric_rows.one(table, judge="humans", metric="fleiss_kappa")
    assert int(fleiss["note"].removesuffix(" votes")) > 0  # "<k> votes": the people's votes it counts
    assert metric_rows.one(table, judge="mtbench-gpt4-pair", metric="agreement_vs_human_majority")


@needs_mtbench
def test_importing_the_same_votes_twice_recognises_them_and_adds_nothing(db, mtbench_subset):
    make_study(status="draft", slug="mt4")
    path = str(mtbench_subset / "gpt4_pair.csv")
    call_command("import_votes", path, "--format", "mtbench", "--study", "mt4", verbosity=0)
    before = Vote.objects.count()
    out = StringIO()
    call_command("import_votes", path, "--format", "mtbench", "--study", "mt4", stdout=out)
    assert Vote.objects.count() == before
    assert f"0 votes, 0 repeats unlinked, {before} votes recognised" in out.getvalue()


def write_csv(path, rows, header=None):
    header = header or [
        "question_id",
        "question",
        "answer_a1",
        "answer_a2",
        "judge",
        "winner",
        "rater",
        "group",
        "a2_original_id",
        "shown_first",
        "not_familiar",
        "response_ms",
        "bloom",
    ]
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


GOOD_ROWS = [
    [
        "q1",
        "Why is the sky blue?",
        "Rayleigh scattering.",
        "Because of the sea.",
        "crowd",
        "a1",
        "p1",
        "",
        "",
        "a1",
        "0",
        "5200",
        "understanding",
    ],
    [
        "q1",
        "Why is the sky blue?",
        "Rayleigh scattering.",
        "Because of the sea.",
        "crowd",
        "a2",
        "p2",
        "",
        "",
        "a2",
        "no",
        "4100",
        "understanding",
    ],
    [
        "q1",
        "Why is the sky blue?",
        "Rayleigh scattering.",
        "Because of the sea [1].",
        "crowd",
        "a2",
        "p1",
        "reference",
        "q1-a2",
        "a2",
        "0",
        "3000",
        "understanding",
    ],
    [
        "q1",
        "Why is the sky blue?",
        "Rayleigh scattering.",
        "Because of the sea.",
        "gpt-x",
        "tie",
        "",
        "",
        "",
        "",
        "",
        "",
        "understanding",
    ],
]


def test_a_generic_csv_is_imported_with_its_perturbation_rows(db, tmp_path):
    study = make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "gen", verbosity=0)
    assert Vote.objects.filter(item__study=study).count() == 4
    variant = Answer.objects.get(question__study=study, external_id="q1-reference")
    assert variant.derived_from.external_id == "q1-a2" and variant.kind.slug == "reference"
    gpt = Vote.objects.get(judge__name="gpt-x")
    assert gpt.meta["order_known"] is False and gpt.choice == "tie"
    vote = Vote.objects.get(rater__participant_id="p2")
    assert (vote.shown_first, vote.choice_shown, vote.choice, vote.client_ms) == ("a2", "first", "a2", 4100)


def test_at_verbosity_two_the_command_names_each_step_as_it_begins(db, tmp_path):
    make_study(status="draft", slug="gen")
    out = StringIO()
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "gen", verbosity=2, stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[:3] == [f"{step} …" for step in vote_import.VOTES_IMPORT_STEPS]
    assert lines[3].startswith("imported into gen: 1 questions, 3 answers, 2 items,") and len(lines) == 4


@pytest.mark.parametrize(
    ("line", "column", "value", "message"),
    [
        (3, 5, "maybe", "line 3, field 'winner'"),
        (2, 12, "dreaming", "line 2, field 'bloom'"),
        (4, 7, "gender-swap", "line 4, field 'group'"),
        (2, 9, "left", "line 2, field 'shown_first'"),
        (5, 10, "perhaps", "line 5, field 'not_familiar'"),
    ],
)
def test_bad_csv_input_names_the_file_line_and_field_and_writes_nothing(db, tmp_path, line, column, value, message):
    make_study(status="draft", slug="bad")
    rows = [list(r) for r in GOOD_ROWS]
    rows[line - 2][column] = value
    path = write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(CommandError) as err:
        call_command("import_votes", str(path), "--format", "csv", "--study", "bad")
    assert str(path) in str(err.value) and message in str(err.value)
    assert Vote.objects.count() == 0 and Question.objects.count() == 0 and Answer.objects.count() == 0


def test_a_csv_without_required_columns_is_refused(db, tmp_path):
    make_study(status="draft", slug="bad2")
    path = write_csv(tmp_path / "x.csv", [["q1", "text"]], header=["question_id", "question"])
    with pytest.raises(CommandError, match="missing column"):
        call_command("import_votes", str(path), "--format", "csv", "--study", "bad2")


def test_a_missing_file_is_refused(db, tmp_path):
    make_study(status="draft", slug="bad3")
    with pytest.raises(CommandError, match="no such file"):
        call_command("import_votes", str(tmp_path / "nope.csv"), "--format", "csv", "--study", "bad3")
