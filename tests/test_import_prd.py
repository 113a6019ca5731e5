"""import_votes --format prd: PRD's Vicuna-80 questions, answers with their systems, human and
LLM votes in both orders, on a subset of the dataset's files."""

import json
import shutil
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from analysis import current_report
from analysis import rows as metric_rows  # the report's metric table; rows() reads a file
from annotations.models import Answer, Judge, Question, Vote
from biasstudy.datasets import dataset_path
from tests.factories import make_study

PRD = dataset_path("prd_vicuna80_lfqa")
pytestmark = pytest.mark.dataset("prd_vicuna80_lfqa")
V = "vicuna80"
G7, G13 = "7b-guanaco-vicuna-generations-topp0.9-temp0.7", "13b-guanaco-vicuna-generations-topp0.9-temp0.7"
FILES = [
    f"{V}/prompts/vicuna_questions.jsonl",
    *(f"{V}/generations/answer_{s}.jsonl" for s in ("bard", "claude", "gpt35", "gpt4", "vicuna-13b")),
    f"qlora_vicuna/generations/{G7}.jsonl",
    f"qlora_vicuna/generations/{G13}.jsonl",
    f"{V}/ratings-human/answer_gpt4-vs-answer_vicuna-13b-human-reviewer_threeclass.jsonl",
    f"{V}/ratings-human/answer_vicuna-13b-vs-answer_gpt4-human-reviewer_threeclass.jsonl",
    f"{V}/ratings-gpt4/answer_gpt4-vs-answer_vicuna-13b-gpt4-reviewer-threeclass.jsonl",
    f"{V}/ratings-gpt4/answer_vicuna-13b-vs-answer_gpt4-gpt4-reviewer-threeclass.jsonl",
    f"{V}/ratings-gpt35/answer_gpt35-vs-answer_gpt4-gpt35-reviewer_threeclass.jsonl",
    f"{V}/ratings-gpt35/answer-gpt35-vs-answer-gpt4-gpt35-reviewer-threeclass.jsonl",
    f"qlora_vicuna/ratings-gpt4-pairwise/{G13}-vs-{G7}-gpt-4-reviewer-threeclass.jsonl",
    "qlora_vicuna/ratings-gpt4-pairwise/answer-gpt4-vs-answer-vicuna-13b-gpt-4-reviewer-threeclass.jsonl",
]
SELF_PREFERENCE = ("self_preference_own", "self_preference_others", "self_preference_difference")


def rows(rel: str) -> list[dict]:
    return [json.loads(line) for line in (PRD / rel).read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.fixture
def prd_subset(tmp_path):
    for rel in FILES:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(PRD / rel, tmp_path / rel)
    return tmp_path


def test_prd_votes_become_one_question_per_pair_with_each_answers_system(db, prd_subset):
    study = make_study(status="draft", slug="prd")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd", verbosity=0)
    human = sum(len(rows(f)) for f in FILES if "ratings-human" in f)
    # 2 GPT-4 files of 80, 2 GPT-3.5 files of 80, 1 QLoRA Guanaco file of 80 (the QLoRA copy of
    # gpt4 vs vicuna-13b is PRD's own file again and is not read).
    assert Vote.objects.filter(item__study=study).count() == human + 5 * 80
    assert set(Judge.objects.filter(study=study).values_list("name", flat=True)) == {
        "prd-human",
        "prd-gpt4",
        "prd-gpt35",
    }
    assert Judge.objects.get(study=study, name="prd-human").params["people"] is True
    # Pairs: gpt4/vicuna-13b, gpt35/gpt4, guanaco-13b/guanaco-7b, on all 80 questions each.
    assert Question.objects.filter(study=study).count() == 3 * 80
    q = Question.objects.get(study=study, external_id="prd-5-gpt4-vs-vicuna-13b")
    assert q.text == rows(FILES[0])[4]["text"]
    systems = dict(Answer.objects.filter(question=q).values_list("system", "text"))
    assert systems == {
        "gpt4": rows(f"{V}/generations/answer_gpt4.jsonl")[4]["text"],
        "vicuna-13b": rows(f"{V}/generations/answer_vicuna-13b.jsonl")[4]["text"],
    }
    guanaco = Answer.objects.get(question__study=study, external_id="prd-1-guanaco-13b-vs-guanaco-7b-guanaco-7b")
    assert guanaco.system == "guanaco-7b"
    assert guanaco.text == rows(f"qlora_vicuna/generations/{G7}.jsonl")[0]["generation_truncated"]


def test_the_file_orientation_is_the_order_shown_and_score_1_picks_the_first(db, prd_subset):
    study = make_study(status="draft", slug="prd-o")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-o", verbosity=0)
    # A1 = gpt4, A2 = vicuna-13b (alphabetical). In answer_vicuna-13b-vs-answer_gpt4 vicuna-13b
    # was shown first; its first row's score picks (1) vicuna-13b, (2) gpt4, (3) neither.
    first = rows(FILES[11])[0]
    vote = Vote.objects.filter(
        item__study=study, judge__name="prd-gpt4", meta__source=Path(FILES[11]).name, meta__line=1
    ).get()
    assert vote.item.question.external_id == f"prd-{first['question_id']}-gpt4-vs-vicuna-13b"
    assert vote.shown_first == "a2"
    assert (vote.choice_shown, vote.choice) == {1: ("first", "a2"), 2: ("second", "a1"), 3: ("tie", "tie")}[
        first["score"]
    ]
    human = Vote.objects.filter(item__study=study, judge__name="prd-human")
    shown = dict.fromkeys(("a1", "a2"), 0)
    for s in human.values_list("shown_first", flat=True):
        shown[s] += 1
    assert shown == {"a1": len(rows(FILES[8])), "a2": len(rows(FILES[9]))}
    # The README's check: gpt4-vs-vicuna-13b, score 1/2/3 = 94/26/9 (file order: gpt4 first).
    gpt4_first = human.filter(shown_first="a1")
    assert [gpt4_first.filter(choice=c).count() for c in ("a1", "a2", "tie")] == [94, 26, 9]


def test_a_judges_second_file_for_the_same_ordered_pair_is_its_round_1(db, prd_subset):
    study = make_study(status="draft", slug="prd-r")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-r", verbosity=0)
    gpt35 = Vote.objects.filter(item__study=study, judge__name="prd-gpt35")
    assert set(gpt35.filter(round=0).values_list("meta__source", flat=True)) == {Path(FILES[12]).name}
    assert set(gpt35.filter(round=1).values_list("meta__source", flat=True)) == {Path(FILES[13]).name}
    assert gpt35.filter(round=0).count() == gpt35.filter(round=1).count() == 80


def test_a_qlora_review_without_a_verdict_is_kept_as_a_vote_without_a_choice(db, prd_subset):
    study = make_study(status="draft", slug="prd-n")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-n", verbosity=0)
    unread = [n for n, r in enumerate(rows(FILES[14]), start=1) if r["score"] == -1]
    assert unread  # line 70 of this file
    votes = Vote.objects.filter(item__study=study, meta__source=Path(FILES[14]).name, choice__isnull=True)
    assert sorted(votes.values_list("meta__line", flat=True)) == unread
    assert set(votes.values_list("parse_status", flat=True)) == {"invalid"}
    result = current_report.study_analyze(study=study)
    assert result["filters"]["excluded"]["no_choice"] == len(unread)


def test_the_analysis_treats_the_mturk_votes_as_human_votes(db, prd_subset):
    study = make_study(status="draft", slug="prd-a")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-a", verbosity=0)
    result = current_report.study_analyze(study=study)
    kinds = {j["judge"]: j["kind"] for j in result["judges"]}
    assert kinds == {"prd-human": "human", "prd-gpt4": "imported", "prd-gpt35": "imported"}
    agreement = metric_rows.one(result["rows"], judge="prd-gpt4", metric="agreement_vs_human_majority")
    assert agreement["n"] == 80  # gpt4 vs vicuna-13b
    first_judge = result["judges"][0]["judge"]
    assert metric_rows.one(result["rows"], judge=first_judge, metric="position_first", bloom="")["n"] > 0


# Each change is made from the file's first row (read when the test runs, not at collection,
# so that a missing data set skips the test instead of breaking the collection).
@pytest.mark.parametrize(
    ("rel", "line", "change", "message"),
    [
        (FILES[10], 3, lambda first: {"score": 7}, "line 3, field 'score': 7 is not 1, 2 or 3"),
        (FILES[8], 2, lambda first: {"question_id": 99}, "line 2, field 'question_id': 99 is not in vicuna_questions"),
        (
            FILES[10],
            4,
            lambda first: {"answer2_id": first["answer1_id"]},  # the other system's answer
            "line 4, field 'answer2_id'.*is not 'vicuna-13b'",
        ),
    ],
)
def test_bad_prd_input_names_the_file_line_and_field_and_writes_nothing(db, prd_subset, rel, line, change, message):
    study = make_study(status="draft", slug="prd-bad")
    lines = (prd_subset / rel).read_text(encoding="utf-8").splitlines()
    lines[line - 1] = json.dumps({**json.loads(lines[line - 1]), **change(json.loads(lines[0]))})
    (prd_subset / rel).write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(CommandError, match=message) as raised:
        call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-bad", verbosity=0)
    assert Path(rel).name in str(raised.value)
    assert not Vote.objects.filter(item__study=study).exists()
    assert not Question.objects.filter(study=study).exists()


def test_a_folder_that_is_not_prd_is_refused(db, tmp_path):
    make_study(status="draft", slug="prd-x")
    with pytest.raises(CommandError, match="expected the PRD dataset folder"):
        call_command("import_votes", str(tmp_path), "--format", "prd", "--study", "prd-x")


def test_self_preference_and_vote_pair_agreement_reach_the_dashboard_and_the_api(db, prd_subset, staff_client):
    study = make_study(status="draft", slug="prd-d")
    call_command("import_votes", str(prd_subset), "--format", "prd", "--study", "prd-d", verbosity=0)
    table = current_report.study_analyze(study=study)["rows"]
    gpt4 = metric_rows.select(table, judge="prd-gpt4", metric=SELF_PREFERENCE)
    own, others, difference = (metric_rows.one(gpt4, metric=metric) for metric in SELF_PREFERENCE)
    # prd-gpt4 judged gpt4 vs vicuna-13b (80 items, both orders), which the people judged too.
    assert {r["group"] for r in gpt4} == {"gpt-4"}
    assert difference["n"] == 80
    assert own["n"] == 2 * 80
    assert others["n"] == len(rows(FILES[8])) + len(rows(FILES[9]))
    assert metric_rows.select(table, judge="prd-human", metric=SELF_PREFERENCE) == []  # people have no family
    assert metric_rows.one(table, judge="prd-gpt4", metric="vote_pairs_with_ties", group="humans")["n"] > 0
    page = staff_client.get(reverse("analysis:study", args=["prd-d"])).content.decode()
    assert 'id="self-preference"' in page
    assert 'id="vote-pairs"' in page
    api = staff_client.get(reverse("api:study-metrics", args=["prd-d"])).json()
    assert metric_rows.select(api["rows"], judge="prd-gpt4", metric=SELF_PREFERENCE) == json.loads(json.dumps(gpt4))
