"""analysis.selfpref: a judge's win rate for its own family's answers against the other judges'
view of the same pairs, on hand-computed cases."""

import numpy as np
import pandas as pd
import pytest

from analysis import selfpref, stats

COLUMNS = ["judge", "question_id", "item_id", "choice", "a1_system", "a2_system"]
# Item 1 (question 1): gpt4 (A1) vs bard (A2). Item 2 (question 2): bard (A1) vs gpt4 (A2).
ROWS = [
    ("prd-gpt4", 1, 1, "a1", "gpt4", "bard"),  # own answer wins: 1
    ("prd-gpt4", 1, 1, "tie", "gpt4", "bard"),  # ½
    ("prd-gpt4", 2, 2, "a1", "bard", "gpt4"),  # bard wins: 0
    ("Humans", 1, 1, "a2", "gpt4", "bard"),
    ("Humans", 2, 2, "a2", "bard", "gpt4"),
    ("prd-bard", 1, 1, "a2", "gpt4", "bard"),
]


def frame(rows=ROWS) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.assign(cluster_id=df["question_id"])  # each question its own cluster


def run(df: pd.DataFrame, counts=None) -> dict:
    index = pd.Index(np.unique(df["cluster_id"].to_numpy()))
    if counts is None:
        counts = stats.bootstrap_counts(len(index), reps=200, seed=0)
    return selfpref.self_preference(df, counts=np.asarray(counts, dtype=np.float32), cluster_index=index)


def test_a_judges_own_family_rate_is_compared_with_every_judge_outside_its_family():
    result = run(frame())["prd-gpt4"]
    assert result["family"] == "gpt-4"
    assert result["n_items"] == 2
    assert result["own"]["value"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert result["own"]["n"] == 3
    # Humans: item 1 picks bard (0), item 2 picks gpt4 (1); prd-bard on item 1 picks bard (0).
    assert result["others"]["value"] == pytest.approx(1 / 3)
    assert result["others"]["n"] == 3
    assert result["difference"] == pytest.approx(0.5 - 1 / 3)
    for part in ("own", "others"):
        lo, hi = result[part]["ci"]
        assert 0 <= lo <= result[part]["value"] <= hi <= 1


def test_only_pairs_the_judge_voted_on_count_for_the_others():
    result = run(frame())["prd-bard"]
    assert result["family"] == "bard"
    assert result["n_items"] == 1
    assert result["own"]["value"] == 1.0
    # On item 1: prd-gpt4 picks gpt4 (0) and ties (½), Humans pick bard (1).
    assert result["others"]["value"] == pytest.approx(0.5)
    assert result["difference"] == pytest.approx(0.5)


def test_the_difference_interval_is_taken_over_whole_questions():
    # One resample that is the data itself, then each question alone (drawn twice).
    assert run(frame(), counts=[[1, 1]])["prd-gpt4"]["difference_ci"] == pytest.approx([1 / 6, 1 / 6])
    # Question 1 alone: own (1 + ½) / 2 = ¾, others 0 → ¾. Question 2 alone: own 0, others 1 → −1.
    lo, hi = run(frame(), counts=[[2, 0], [0, 2]])["prd-gpt4"]["difference_ci"]
    assert lo == pytest.approx(-1 + 0.025 * 1.75)
    assert hi == pytest.approx(0.75 - 0.025 * 1.75)


def test_judges_without_a_family_or_without_such_pairs_are_null_with_n_zero():
    rows = [*ROWS, ("prd-claude", 1, 1, "a1", "gpt4", "bard"), ("prd-gpt35", 3, 3, "a1", "gpt35", "claude")]
    result = run(frame(rows))
    assert result["Humans"] == {
        "family": None,
        "n_items": 0,
        "own": selfpref.EMPTY_RATE,
        "others": selfpref.EMPTY_RATE,
        "difference": None,
        "difference_ci": [None, None],
    }
    # Claude's answers are on no item; GPT-3.5's only item has no other judge's vote.
    for name, family in (("prd-claude", "claude"), ("prd-gpt35", "gpt-3.5")):
        assert result[name]["family"] == family
        assert result[name]["n_items"] == 0
        assert result[name]["own"]["n"] == 0
        assert result[name]["difference"] is None


def test_pairs_of_two_answers_of_the_judges_family_and_unparsed_votes_are_left_out():
    rows = [
        ("prd-gpt4", 1, 1, "a1", "gpt4", "gpt-4"),
        ("Humans", 1, 1, "a2", "gpt4", "gpt-4"),
        ("prd-gpt4", 2, 2, None, "gpt4", "bard"),
        ("Humans", 2, 2, "a1", "gpt4", "bard"),
    ]
    assert run(frame(rows))["prd-gpt4"]["n_items"] == 0


def test_no_votes_give_no_judges():
    assert run(frame([])) == {}


def test_a_judge_named_like_a_system_belongs_to_its_family():
    assert selfpref.judge_family("gpt-4") == "gpt-4"
    assert selfpref.judge_family("mtbench-gpt4-pair") == "gpt-4"
    assert selfpref.judge_family("Humans") is None
    assert selfpref.system_family("guanaco-33b") == "guanaco"
    assert selfpref.system_family("my-model") == "my-model"
    assert selfpref.system_family("") == ""
