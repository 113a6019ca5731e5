"""Hand-computed cases for position consistency, preference fairness, repetition stability and
accuracy against gold labels (analysis.consistency), and their place in the report."""

import pytest

from analysis import consistency
from analysis.compute import analyze
from analysis.rows import as_rate, estimate, one
from tests.analysis_frames import frame, item, votes


def one_pair(item_id: int, first_pick: str | None, second_pick: str | None, **kw) -> list[dict]:
    """One vote shown A1 first and one shown A2 first on item `item_id` (question = item)."""
    it = item(item_id, item_id, "control", 10 * item_id + 1, 10 * item_id + 2, **kw)
    rows = []
    for shown_first, pick in (("a1", first_pick), ("a2", second_pick)):
        shown = None if pick is None else "tie" if pick == "tie" else "first" if pick == shown_first else "second"
        rows.append(
            {
                **it,
                "vote_id": len(rows),
                "judge": "J",
                "judge_kind": "llm",
                "choice": pick,
                "shown_first": shown_first,
                "choice_shown": shown,
            }
        )
    return rows


def three_items() -> list[dict]:
    # Item 1 keeps A1 in both orders (consistent); item 2 takes the answer shown first both
    # times (primacy); item 3 the answer shown second both times (recency).
    return (
        one_pair(1, "a1", "a1", gold_label="a1", subset="S")
        + one_pair(2, "a1", "a2", gold_label="a2", subset="S")
        + one_pair(3, "a2", "a1", gold_label="a1", subset="T")
    )


def test_position_consistency_is_the_share_of_swapped_pairs_with_the_same_verdict():
    got = consistency.position_consistency(frame(three_items()))
    assert got["consistency"]["value"] == pytest.approx(1 / 3)
    assert got["consistency"]["n"] == 3
    assert got["consistency"]["ci"][0] < 1 / 3 < got["consistency"]["ci"][1]


def test_preference_fairness_says_which_position_the_inconsistent_verdicts_took():
    got = consistency.position_consistency(frame(three_items()))
    assert got["primacy"]["value"] == pytest.approx(1 / 3)
    assert got["recency"]["value"] == pytest.approx(1 / 3)
    assert got["first_share"]["value"] == pytest.approx(1 / 2)
    assert got["first_share"]["n"] == 2
    assert got["fairness"] == pytest.approx(0)
    primacy_only = consistency.position_consistency(frame(one_pair(1, "a1", "a2") + one_pair(2, "a1", "a1")))
    assert primacy_only["first_share"]["value"] == 1
    assert primacy_only["fairness"] == pytest.approx(-1 / 2)


def test_consistency_is_cut_by_subset():
    got = consistency.position_consistency(frame(three_items()))["by_subset"]
    assert sorted(got) == ["S", "T"]
    assert got["S"]["consistency"]["value"] == pytest.approx(1 / 2)
    assert got["S"]["consistency"]["n"] == 2
    assert got["T"]["consistency"]["value"] == 0
    assert got["T"]["recency"]["value"] == 1


def test_several_votes_per_order_make_every_cross_order_pair():
    it = item(1, 1, "control", 11, 12)
    rows = votes(it, "a1 a1 a1 a2")  # A1 first: a1, a1; A2 first: a1, a2
    got = consistency.position_consistency(frame(rows))
    assert got["consistency"]["n"] == 4
    assert got["consistency"]["value"] == pytest.approx(2 / 4)
    assert got["primacy"]["value"] == pytest.approx(2 / 4)


def test_an_unread_verdict_does_not_survive_the_swap_and_is_counted_apart_when_both_are_unread():
    got = consistency.position_consistency(
        frame(one_pair(1, None, None) + one_pair(2, "a1", None) + one_pair(3, "a2", "a2"))
    )
    assert got["consistency"]["value"] == pytest.approx(1 / 3)
    assert got["both_unread"] == 1


def test_votes_of_people_and_votes_in_one_order_make_no_pairs():
    rows = [{**r, "rater": f"r{i}"} for i, r in enumerate(three_items())]
    rows += votes(item(9, 9, "control", 91, 92), "a1", shown_first="a1")
    got = consistency.position_consistency(frame(rows))
    assert got["consistency"] == {"value": None, "ci": [None, None], "n": 0, "clusters": 0, "n_eff": None}
    assert got["fairness"] is None
    assert got["by_subset"] == {}


def test_accuracy_against_gold_labels_in_each_order_averaged_and_in_both_orders():
    # A1 first: item 1 right, items 2 and 3 wrong; A2 first: all three right.
    got = consistency.gold_accuracy(frame(three_items()))
    assert got["a1_first"]["value"] == pytest.approx(1 / 3)
    assert got["a2_first"]["value"] == 1
    assert got["a2_first"]["ci"][0] < 1  # never a point at 100%
    assert got["average"]["value"] == pytest.approx(2 / 3)
    assert got["average"]["n"] == 6
    assert got["average"]["ci"][0] < 2 / 3 < got["average"]["ci"][1]
    assert got["both"]["value"] == pytest.approx(1 / 3)
    assert got["by_subset"]["S"]["a1_first"]["value"] == pytest.approx(1 / 2)
    assert got["by_subset"]["T"]["both"]["value"] == 0


def test_the_average_is_the_mean_of_the_two_orders_when_they_have_different_numbers_of_votes():
    rows = one_pair(1, "a1", "a1", gold_label="a1")
    rows += votes(item(2, 2, "control", 21, 22, gold_label="a1"), "a2", shown_first="a1")
    got = consistency.gold_accuracy(frame(rows))
    assert got["a1_first"]["value"] == pytest.approx(1 / 2)
    assert got["a2_first"]["value"] == 1
    assert got["average"]["value"] == pytest.approx(3 / 4)


def test_an_unread_verdict_is_not_correct():
    got = consistency.gold_accuracy(frame(one_pair(1, None, "a1", gold_label="a1")))
    assert got["a1_first"]["value"] == 0
    assert got["a1_first"]["n"] == 1
    assert got["unread"] == 1
    assert got["both"]["value"] == 0


def test_without_gold_labels_accuracy_is_null_with_n_0():
    got = consistency.gold_accuracy(frame(one_pair(1, "a1", "a1")))
    for key in ("a1_first", "a2_first", "average", "both"):
        assert got[key]["value"] is None
        assert got[key]["n"] == 0
    assert got["by_subset"] == {}
    empty = consistency.gold_accuracy(frame([]))
    assert empty["average"]["n"] == 0


def test_repetition_stability_is_the_mean_share_of_the_most_frequent_verdict_per_repeated_request():
    it = item(1, 1, "control", 11, 12)
    rows = votes(it, "a1 a1 a2", shown_first="a1") + votes(it, "a2 a2", shown_first="a2")
    rows += votes(item(2, 2, "control", 21, 22), "a1", shown_first="a1")  # asked once: not in the base
    got = consistency.repetition_stability(frame(rows))
    assert got["value"] == pytest.approx((2 / 3 + 1) / 2)
    assert got["n"] == 2


def test_requests_in_another_label_order_are_not_repeats():
    it = item(1, 1, "control", 11, 12)
    rows = votes(it, "a1", shown_first="a1") + votes(it, "a2", shown_first="a1", labels_swapped=True)
    assert consistency.repetition_stability(frame(rows))["n"] == 0


def test_the_report_gives_every_judge_the_new_measures_and_null_where_the_data_does_not_allow():
    rows = three_items() + [
        {**r, "judge": "People", "judge_kind": "human", "rater": f"r{i}"} for i, r in enumerate(three_items())
    ]
    result = analyze(frame(rows), study="s")
    table = result["rows"]
    assert estimate(table, judge="J", metric="position_consistency", subset="") == pytest.approx(1 / 3)
    assert estimate(table, judge="J", metric="gold_accuracy_both", subset="") == pytest.approx(1 / 3)
    # A figure without a base has no row: read as a table cell, its n is 0.
    assert as_rate(one(table, judge="J", metric="repetition_stability"))["n"] == 0
    assert as_rate(one(table, judge="People", metric="position_consistency", subset=""))["n"] == 0
    assert estimate(table, judge="People", metric="gold_accuracy_a1_first", subset="") == pytest.approx(1 / 3)
    assert "position_consistency" in result["conventions"]


def test_the_report_counts_an_unread_verdict_as_wrong_but_leaves_a_failed_request_out():
    rows = one_pair(1, "a1", "a1", gold_label="a1")
    rows += [{**r, "parse_status": "invalid"} for r in one_pair(2, None, "a1", gold_label="a1")]
    rows += [{**r, "parse_status": "failed"} for r in one_pair(3, None, None, gold_label="a1")]
    result = analyze(frame(rows), study="s")
    table = result["rows"]
    # Item 1 right, item 2's unread verdict wrong; item 3's failed request is not in the base.
    a1_first = one(table, judge="J", metric="gold_accuracy_a1_first", subset="")
    assert a1_first["estimate"] == pytest.approx(1 / 2)
    assert a1_first["n"] == 2
    assert estimate(table, judge="J", metric="position_consistency", subset="") == pytest.approx(1 / 2)
    assert result["filters"]["excluded"]["no_choice"] == 3
