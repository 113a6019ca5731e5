"""import_votes --format llmbar (vote_imports.import_llmbar) on a small hand-made copy of the
LLMBar layout, and the gold label and subset columns of the generic CSV."""

import csv
import gzip
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from analysis import current_report, rows
from annotations.models import ComparisonItem, Judge, Question, Study, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv

HEADER = [
    "subset",
    "evaluator",
    "strategy",
    "instance",
    "label",
    "stage",
    "final",
    "winner_swap_false",
    "winner_swap_true",
    "score_1",
    "score_2",
]
NATURAL = [
    {"input": "Say hi.", "output_1": "Hi!", "output_2": "Bye.", "label": 1},
    {"input": "Add 2 and 2.", "output_1": "5", "output_2": "4", "label": 2},
]
LLMEVAL = [{"input": "Name a colour.", "output_1": "Blue.", "output_2": "Seven.", "label": 1}]
# (subset, evaluator, strategy, instance, label, stage, final, winner unswapped, winner swapped)
ROWS = [
    ("LLMBar/Natural", "GPT-4", "Vanilla", 0, 1, 0, 1, "1", "1"),
    ("LLMBar/Natural", "GPT-4", "Vanilla", 1, 2, 0, 1, "1", "2"),
    ("Processed/LLMEval^2", "GPT-4", "Vanilla", 0, 1, 0, 1, "", "1"),
    # Swap: instance 0 agrees at once; instance 1 disagrees, and the synthesis stage decides.
    ("LLMBar/Natural", "GPT-4", "Swap", 0, 1, 0, 1, "1", "1"),
    ("LLMBar/Natural", "GPT-4", "Swap", 1, 2, 0, 0, "1", "2"),
    ("LLMBar/Natural", "GPT-4", "Swap", 1, 2, 1, 1, "2", "2"),
]


def write_llmbar(folder: Path, rows=ROWS) -> Path:
    (folder / "datasets").mkdir(parents=True, exist_ok=True)
    (folder / "datasets" / "LLMBar__Natural.json").write_text(json.dumps(NATURAL), encoding="utf-8")
    (folder / "datasets" / "Processed__LLMEval2.json").write_text(json.dumps(LLMEVAL), encoding="utf-8")
    with gzip.open(folder / "evaluator_votes.csv.gz", "wt", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(HEADER)
        for row in rows:
            writer.writerow([*row, "", ""])
    return folder


def test_llmbar_items_keep_their_subset_and_gold_label_and_each_evaluator_and_strategy_is_a_judge(db, tmp_path):
    study = make_study(status="draft", slug="llmbar")
    call_command("import_votes", str(write_llmbar(tmp_path)), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    items = {i.question.external_id: i for i in ComparisonItem.objects.filter(study=study).select_related("question")}
    assert {k: (i.question.subset, i.gold_label) for k, i in items.items()} == {
        "LLMBar/Natural#0": ("LLMBar/Natural", "a1"),
        "LLMBar/Natural#1": ("LLMBar/Natural", "a2"),
        "Processed/LLMEval^2#0": ("Processed/LLMEval^2", "a1"),
    }
    assert items["LLMBar/Natural#1"].answer_a1.text == "5"
    assert Question.objects.get(study=study, external_id="LLMBar/Natural#1").text == "Add 2 and 2."
    assert set(Judge.objects.filter(study=study).values_list("name", flat=True)) == {
        "GPT-4 / Vanilla",
        "GPT-4 / Swap",
        "GPT-4 / Swap (first stage)",
    }
    # Every row is two votes, one in each order; the Swap judge has the final rows, its first
    # stage every stage-0 row.
    assert Vote.objects.filter(judge__name="GPT-4 / Vanilla").count() == 6
    final = Vote.objects.filter(judge__name="GPT-4 / Swap", item=items["LLMBar/Natural#1"])
    assert sorted(final.values_list("shown_first", "choice")) == [("a1", "a2"), ("a2", "a2")]
    first = Vote.objects.filter(judge__name="GPT-4 / Swap (first stage)", item=items["LLMBar/Natural#1"])
    assert sorted(first.values_list("shown_first", "choice", "choice_shown")) == [
        ("a1", "a1", "first"),
        ("a2", "a2", "first"),
    ]


def test_an_llmbar_verdict_that_could_not_be_read_is_a_vote_without_a_choice(db, tmp_path):
    study = make_study(status="draft", slug="llmbar")
    call_command("import_votes", str(write_llmbar(tmp_path)), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    vote = Vote.objects.get(item__question__external_id="Processed/LLMEval^2#0", shown_first="a1")
    assert (vote.choice, vote.choice_shown, vote.parse_status) == (None, None, "invalid")
    report = current_report.study_analyze(study=study)
    vanilla = rows.select(report["rows"], judge="GPT-4 / Vanilla")
    # Shown A1 first: right, wrong, unread; shown A2 first: right, right, right.
    a1_first = rows.one(vanilla, metric="gold_accuracy_a1_first", subset="")
    assert a1_first["estimate"] == pytest.approx(1 / 3)
    assert a1_first["n"] == 3  # the unread verdict is in the base, as not correct
    assert report["filters"]["excluded"]["no_choice"] == 1  # the one unread verdict, out of the other figures
    assert rows.estimate(vanilla, metric="gold_accuracy_a2_first", subset="") == 1
    assert rows.estimate(vanilla, metric="gold_accuracy_both", subset="") == pytest.approx(1 / 3)
    assert rows.estimate(vanilla, metric="gold_accuracy_average", subset="LLMBar/Natural") == pytest.approx(3 / 4)
    assert rows.estimate(vanilla, metric="position_consistency", subset="") == pytest.approx(1 / 3)
    assert rows.estimate(vanilla, metric="primacy", subset="LLMBar/Natural") == pytest.approx(1 / 2)


@pytest.mark.parametrize(
    ("index", "field", "value", "message"),
    [
        (1, 4, 1, "field 'label'"),
        (0, 3, 7, "field 'instance'"),
        (2, 7, "first", "field 'winner_swap_false'"),
        (3, 6, 2, "field 'final'"),
    ],
)
def test_bad_llmbar_input_names_the_file_line_and_field_and_writes_nothing(db, tmp_path, index, field, value, message):
    make_study(status="draft", slug="llmbar")
    rows = [list(r) for r in ROWS]
    rows[index][field] = value
    write_llmbar(tmp_path, rows)
    with pytest.raises(CommandError) as err:
        call_command("import_votes", str(tmp_path), "--format", "llmbar", "--study", "llmbar")
    assert f"evaluator_votes.csv.gz, line {index + 2}, {message}" in str(err.value)
    assert Vote.objects.count() == 0 and Question.objects.count() == 0


def test_an_llmbar_folder_without_the_votes_file_is_refused(db, tmp_path):
    make_study(status="draft", slug="llmbar")
    with pytest.raises(CommandError, match="evaluator_votes.csv.gz: cannot read"):
        call_command("import_votes", str(tmp_path), "--format", "llmbar", "--study", "llmbar")


GOLD_HEADER = [
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
    "gold_label",
    "subset",
]


def gold_rows(gold="a2", other_gold="a2"):
    rows = [list(r) + [gold, "part-1"] for r in GOOD_ROWS]
    rows[-1][-2] = other_gold
    return rows


def test_a_generic_csv_carries_the_gold_label_and_the_subset(db, tmp_path):
    study = make_study(status="draft", slug="gen")
    rows = [r for r in gold_rows() if r[7] in ("", "control")]
    path = write_csv(tmp_path / "votes.csv", rows, header=GOLD_HEADER)
    call_command("import_votes", str(path), "--format", "csv", "--study", "gen", verbosity=0)
    control = ComparisonItem.objects.get(study=study, kind__isnull=True)
    assert (control.gold_label, control.question.subset) == ("a2", "part-1")


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (gold_rows(gold="left"), "field 'gold_label': 'left' is not a1 or a2"),
        (gold_rows(other_gold="a1"), "field 'gold_label': question 'q1': its control item has another gold label"),
    ],
)
def test_a_bad_or_contradictory_gold_label_is_refused(db, tmp_path, rows, message):
    make_study(status="draft", slug="gen")
    rows = [r for r in rows if r[7] in ("", "control")]
    path = write_csv(tmp_path / "votes.csv", rows, header=GOLD_HEADER)
    with pytest.raises(CommandError, match=message):
        call_command("import_votes", str(path), "--format", "csv", "--study", "gen")
    assert Vote.objects.count() == 0


def test_the_dashboard_and_the_api_show_consistency_and_gold_accuracy(db, tmp_path, staff_client, token_client):
    make_study(status="draft", slug="llmbar")
    call_command("import_votes", str(write_llmbar(tmp_path)), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    page = staff_client.get(reverse("analysis:study", args=["llmbar"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "Position consistency and accuracy against gold labels" in html
    assert "Processed/LLMEval^2" in html  # the by-subset rows
    body = token_client.get(reverse("api:study-metrics", args=["llmbar"]), {"bootstrap": 20}).json()
    vanilla = rows.select(body["rows"], judge="GPT-4 / Vanilla")
    assert rows.estimate(vanilla, metric="gold_accuracy_a2_first", subset="") == 1
    assert rows.one(vanilla, metric="position_consistency", subset="LLMBar/Natural")["n"] == 2


def test_a_study_without_gold_labels_or_swapped_pairs_shows_no_such_table(db, tmp_path, staff_client):
    make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    call_command("import_votes", str(path), "--format", "csv", "--study", "gen", verbosity=0)
    page = staff_client.get(reverse("analysis:study", args=["gen"]))
    assert page.status_code == 200
    assert "Position consistency and accuracy against gold labels" not in page.content.decode()


def test_a_study_file_keeps_the_gold_labels_and_subsets(db, tmp_path):
    from annotations.study_files import StudyFileError, study_export, study_import

    make_study(status="draft", slug="llmbar")
    call_command("import_votes", str(write_llmbar(tmp_path)), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    document = study_export(study=Study.objects.get(slug="llmbar"))
    path = tmp_path / "study.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    copy = study_import(path=path, fmt="biasstudy", slug="llmbar-copy")
    got = {(i.question.external_id, i.question.subset, i.gold_label) for i in copy.items.select_related("question")}
    assert got == {
        ("LLMBar/Natural#0", "LLMBar/Natural", "a1"),
        ("LLMBar/Natural#1", "LLMBar/Natural", "a2"),
        ("Processed/LLMEval^2#0", "Processed/LLMEval^2", "a1"),
    }
    document["questions"][0]["items"][0]["gold_label"] = "left"
    path.write_text(json.dumps(document), encoding="utf-8")
    with pytest.raises(StudyFileError, match="gold_label: must be a1, a2 or empty"):
        study_import(path=path, fmt="biasstudy", slug="llmbar-bad")
