"""analysis.vote_pairs: agreement over pairs of votes (Zheng et al. S1 with ties, S2 without), on
hand-computed cases."""

import numpy as np
import pandas as pd
import pytest

from analysis import stats, vote_pairs

# Item 1 (question 1): the judge votes a1 and tie, people a1, a2, tie.
# Item 2 (question 2): the judge votes a2, people a2 twice.
ROWS = [
    ("llm", 1, 1, "a1"),
    ("llm", 1, 1, "tie"),
    ("people", 1, 1, "a1"),
    ("people", 1, 1, "a2"),
    ("people", 1, 1, "tie"),
    ("llm", 2, 2, "a2"),
    ("people", 2, 2, "a2"),
    ("people", 2, 2, "a2"),
]


def run(rows, humans=("people",)):
    votes = pd.DataFrame(rows, columns=["judge", "question_id", "item_id", "choice"])
    votes["cluster_id"] = votes["question_id"]  # each question its own cluster
    index = pd.Index(np.unique(votes["cluster_id"].to_numpy()))
    counts = stats.bootstrap_counts(len(index), reps=200, seed=0)
    return vote_pairs.vote_pair_agreement(votes, list(humans), counts=counts, cluster_index=index)


def test_a_judge_is_compared_with_every_human_vote_on_the_same_item():
    result = run(ROWS)["vs_humans"]["llm"]
    # With ties: item 1 has 2 × 3 pairs, a1/a1 and tie/tie agree; item 2 has 1 × 2, both agree.
    assert (result["with_ties"]["agree"], result["with_ties"]["n"]) == (4, 8)
    assert result["with_ties"]["value"] == 0.5
    # Without ties: item 1 keeps a1 × (a1, a2), item 2 keeps a2 × (a2, a2).
    assert (result["without_ties"]["agree"], result["without_ties"]["n"]) == (3, 4)
    assert result["without_ties"]["value"] == 0.75


def test_people_are_compared_pair_by_pair_among_themselves():
    result = run(ROWS)["among_humans"]
    # Item 1: three pairs, none agree (a1/a2, a1/tie, a2/tie); item 2: one pair that agrees.
    assert (result["with_ties"]["agree"], result["with_ties"]["n"]) == (1, 4)
    # Without ties: item 1 keeps a1/a2 (disagree), item 2 a2/a2.
    assert (result["without_ties"]["agree"], result["without_ties"]["n"]) == (1, 2)
    for figure in result.values():
        lo, hi = figure["ci"]
        assert 0 <= lo <= figure["value"] <= hi <= 1


def test_no_pairs_are_null_with_n_zero():
    result = run([("llm", 1, 1, "a1"), ("people", 2, 2, "tie"), ("llm", 2, 2, None)])
    assert result["vs_humans"]["llm"]["with_ties"] == {"value": None, "ci": [None, None], "agree": 0, "n": 0}
    assert result["vs_humans"]["llm"]["without_ties"]["n"] == 0
    assert result["among_humans"]["with_ties"]["value"] is None
    assert run(ROWS, humans=())["among_humans"] is None
    assert run(ROWS, humans=())["vs_humans"] == {}


@pytest.mark.parametrize("key", ["with_ties", "without_ties"])
def test_both_conventions_are_named(key):
    assert "Zheng" in vote_pairs.CONVENTIONS[key]
