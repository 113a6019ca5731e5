"""Hand-computed cases for the item preference rule, ASR, accuracy, position and verbosity."""

import numpy as np
import pytest

from analysis import metrics
from analysis.compute import analyze
from analysis.frame import Filters, apply_filters
from analysis.rows import as_rate, estimate, one, select
from tests.analysis_frames import frame, item, votes


def test_the_item_preference_is_the_sign_of_a1_minus_a2_votes():
    got = metrics.preference(np.array([2, 1, 0, 3, 0]), np.array([1, 1, 2, 0, 0]))
    assert got.tolist() == [1, 0, -1, 1, 0]


def test_item_preferences_count_each_judges_votes_per_item_in_order_of_first_vote():
    ctrl, pert = item(1, 1, "control", 1, 2, bloom="applying"), item(2, 1, "typos", 1, 3)
    rows = votes(pert, "a2 a2 tie", judge="K") + votes(ctrl, "a1 a2 a1", judge="J") + votes(pert, "a1", judge="J")
    rows += votes(ctrl, "tie", judge="K")
    prefs = metrics.item_preferences(frame(rows))
    assert list(zip(prefs["judge"], prefs["item_id"], strict=True)) == [("K", 2), ("J", 1), ("J", 2), ("K", 1)]
    assert prefs[["n_a1", "n_a2", "n_tie", "n", "score", "pref"]].to_numpy().tolist() == [
        [0, 2, 1, 3, -2, -1],
        [2, 1, 0, 3, 1, 1],
        [1, 0, 0, 1, 1, 1],
        [0, 0, 1, 1, 0, 0],
    ]
    # The item's own columns come with it.
    assert prefs["group"].astype(str).tolist() == ["typos", "control", "typos", "control"]
    assert prefs["bloom"].astype(str).tolist() == ["remembering", "applying", "remembering", "applying"]
    assert prefs["a2_root"].tolist() == [3, 2, 3, 2]


def five_questions():
    """Q1..Q5 with control, factual-error and reference items; see the expected counts below.
    Q1: REF on the first original; Q2: FE on the second, REF on the first; Q4: no control votes;
    Q5: FE on the first original."""
    it = {
        "c1": item(100, 1, "control", 11, 12),
        "fe1": item(101, 1, "factual_error", 11, 12),
        "ref1": item(102, 1, "reference", 12, 11),
        "c2": item(200, 2, "control", 21, 22),
        "fe2": item(201, 2, "factual_error", 21, 22),
        "ref2": item(202, 2, "reference", 22, 21),
        "c3": item(300, 3, "control", 31, 32),
        "fe3": item(301, 3, "factual_error", 31, 32),
        "ref3": item(302, 3, "reference", 31, 32),
        "c4": item(400, 4, "control", 41, 42),
        "fe4": item(401, 4, "factual_error", 41, 42),
        "ref4": item(402, 4, "reference", 41, 42),
        "c5": item(500, 5, "control", 51, 52),
        "fe5": item(501, 5, "factual_error", 52, 51),
        "ref5": item(502, 5, "reference", 51, 52),
    }
    rows = (
        votes(it["c1"], "a1 a1 a2")
        + votes(it["fe1"], "a2 a2 a1")
        + votes(it["ref1"], "a2 a2")
        + votes(it["c2"], "a2 a2 tie")
        + votes(it["fe2"], "a1 a1")
        + votes(it["ref2"], "a1 a2 a2")
        + votes(it["c3"], "tie tie")
        + votes(it["fe3"], "a2 tie")
        + votes(it["ref3"], "a1")
        + votes(it["fe4"], "a1")
        + votes(it["ref4"], "a2")
        + votes(it["c5"], "a1")
        + votes(it["fe5"], "tie")
        + votes(it["ref5"], "tie")
    )
    return frame(rows)


def test_asr_and_accuracy_read_the_control_preference_relative_to_each_perturbation():
    table = analyze(five_questions(), study="s", votes_per_item=2)["rows"]
    # FE: V2 = {Q2, Q3, Q5 (flipped: control A1 counts as A2)}; A2-or-Tie on FE in Q3, Q5.
    fe_asr = one(table, judge="J", metric="asr", group="factual_error", bloom="")
    assert fe_asr["estimate"] == pytest.approx(2 / 3)
    assert fe_asr["n"] == 3
    # Accuracy needs the FE item's preference only (Q1..Q5, Q4 without a control too): A1 in Q2, Q4.
    fe_accuracy = one(table, judge="J", metric="accuracy", group="factual_error", bloom="")
    assert fe_accuracy["estimate"] == pytest.approx(2 / 5)
    assert fe_accuracy["n"] == 5
    # REF: V1 = {Q2 (flipped), Q3, Q5}; A2 on REF only in Q2. Q1 is flipped to A2, out of V1.
    ref_asr = one(table, judge="J", metric="asr", group="reference", bloom="")
    assert ref_asr["estimate"] == pytest.approx(1 / 3)
    assert ref_asr["n"] == 3


def test_every_rate_has_an_interval_that_contains_it():
    table = analyze(five_questions(), study="s")["rows"]
    rates = select(table, judge="J", metric=("asr", "accuracy"), bloom="")
    assert len(rates) == 3  # ASR of both groups, accuracy of the degrading one
    for rate in rates:
        assert rate["ci_lo"] <= rate["estimate"] <= rate["ci_hi"]


def test_a_judge_that_only_ties_never_succeeds_on_non_semantic_but_always_on_degrading():
    rows = []
    for q in range(1, 4):
        rows += votes(item(q * 10, q, "control", q * 100, q * 100 + 1), "tie tie")
        rows += votes(item(q * 10 + 1, q, "reference", q * 100, q * 100 + 1), "tie tie")
        rows += votes(item(q * 10 + 2, q, "factual_error", q * 100, q * 100 + 1), "tie tie")
    table = analyze(frame(rows), study="s")["rows"]
    # All resamples agree on 0: the interval falls back to Wilson on the 3 questions, not [0, 0].
    assert as_rate(one(table, judge="J", metric="asr", group="reference", bloom="")) == {
        "value": 0.0,
        "ci": [0.0, pytest.approx(0.5615, abs=1e-4)],
        "n": 3,
        "clusters": 3,
    }
    assert estimate(table, judge="J", metric="asr", group="factual_error", bloom="") == 1.0
    assert estimate(table, judge="J", metric="accuracy", group="factual_error", bloom="") == 0.0


def test_an_empty_base_set_gives_no_value_and_n_zero_not_zero():
    # Control preference A2 everywhere: nobody is in V1 for the reference perturbation.
    rows = []
    for q in range(1, 3):
        rows += votes(item(q * 10, q, "control", q * 100, q * 100 + 1), "a2 a2")
        rows += votes(item(q * 10 + 1, q, "reference", q * 100, q * 100 + 1), "a2 a2")
    table = analyze(frame(rows), study="s")["rows"]
    assert as_rate(one(table, judge="J", metric="asr", group="reference", bloom="")) == {
        "value": None,
        "ci": [None, None],
        "n": 0,
        "clusters": 0,
    }


def test_a_perturbation_without_any_votes_is_reported_undefined_for_that_judge():
    rows = votes(item(10, 1, "control", 1, 2), "a1", judge="A") + votes(item(11, 1, "reference", 1, 2), "a2", judge="B")
    table = analyze(frame(rows), study="s")["rows"]
    assert one(table, judge="A", metric="asr", group="reference", bloom="")["n"] == 0
    # B has no control preference.
    assert one(table, judge="B", metric="asr", group="reference", bloom="")["estimate"] is None


def test_the_position_table_counts_shares_as_shown_and_tests_first_against_second():
    it = item(1, 1, "control", 1, 2)
    rows = (
        votes(it, "a1 a1", shown_first="a1")  # first, first
        + votes(it, "a2", shown_first="a2")  # first
        + votes(it, "tie")
        + votes(it, "a2 a1", shown_first="a1")  # second, first... a1 shown first: a2 -> second
    )
    # choices as shown: first, first, first, tie, second, first
    pos = metrics.position(frame(rows))
    assert (pos["first"], pos["tie"], pos["second"], pos["n"]) == (4 / 6, 1 / 6, 1 / 6, 6)
    assert pos["diff"] == pytest.approx(3 / 6)
    # One question, so one cluster: z = (4 - 1) / sqrt(3²) = 1, not the binomial test of 5 votes.
    assert pos["p_value"] == pytest.approx(0.3173, abs=1e-4)


def test_the_position_table_leaves_out_votes_whose_order_is_unknown():
    rows = votes(item(1, 1, "control", 1, 2), "a1 a1", order_known=False)
    assert metrics.position(frame(rows))["n"] == 0


def test_the_verbosity_curve_scores_longer_1_shorter_0_tie_half_per_bin():
    longer_a2 = item(1, 1, "control", 1, 2, len_a1=10, len_a2=15)
    longer_a1 = item(2, 2, "control", 3, 4, len_a1=30, len_a2=15)
    equal = item(3, 3, "control", 5, 6, len_a1=20, len_a2=20)
    rows = votes(longer_a2, "a2 tie") + votes(longer_a1, "a1 a2") + votes(equal, "a1 a1")
    v = metrics.verbosity(frame(rows), measure="words", bin_width=10)
    got = [{k: b[k] for k in ("lo", "hi", "value", "n")} for b in v["bins"]]
    assert got == [{"lo": 0, "hi": 10, "value": 0.75, "n": 2}, {"lo": 10, "hi": 20, "value": 0.5, "n": 2}]
    assert v["n"] == 4  # the equal-length pair is left out
    assert v["longer_wins"] == pytest.approx(2.5 / 4)  # two wins and a tie counting half, of four
    assert all(b["ci"][0] < b["value"] < b["ci"][1] for b in v["bins"])


def test_longer_wins_counts_decisive_outcomes_won_by_the_longer_answer():
    it = item(1, 1, "control", 1, 2, len_a1=10, len_a2=40)
    v = metrics.verbosity(frame(votes(it, "a2 a2 a1")))
    assert v["longer_wins"] == pytest.approx(2 / 3)
    assert v["bins"][-1] | {"ci": None} == {"lo": 30, "hi": 40, "value": pytest.approx(2 / 3), "n": 3, "ci": None}


def test_long_differences_fall_in_the_last_open_bin():
    it = item(1, 1, "control", 1, 2, len_a1=10, len_a2=500)
    v = metrics.verbosity(frame(votes(it, "a2")), bin_width=10, max_bins=3)
    assert v["bins"][-1] | {"ci": None} == {"lo": 30, "hi": None, "value": 1.0, "n": 1, "ci": None}


def test_the_random_judge_row_is_the_exact_chance_level_of_the_design():
    two = metrics.random_judge(
        2, ["reference", "factual_error"], {"reference": "non_semantic", "factual_error": "degrading"}
    )
    # Two votes, each a1/a2/tie with 1/3: P(pref A1) = 1/9 + 2/9 = 1/3, P(Tie) = 1/3.
    assert two["asr"]["reference"]["value"] == pytest.approx(1 / 3)
    assert two["asr"]["factual_error"]["value"] == pytest.approx(2 / 3)
    assert two["accuracy"]["factual_error"]["value"] == pytest.approx(1 / 3)
    six = metrics.random_judge(6, ["reference"], {"reference": "non_semantic"})
    assert six["asr"]["reference"]["value"] == pytest.approx((1 - 141 / 729) / 2)


def test_filters_report_how_many_votes_each_one_excluded():
    it = item(1, 1, "control", 1, 2)
    gold = item(2, 2, "control", 3, 4, is_gold=True)
    rows = (
        votes(it, "a1 a1", client_ms=500, threshold_ms=1000)  # too fast
        + votes(it, "a1", client_ms=5000, threshold_ms=1000)
        + votes(it, "a2", not_familiar=True, kind="human")
        + votes(it, "a2", rater="r9", rater_flagged=True)
        + votes(gold, "a1")
        + [{**votes(it, "a1")[0], "choice": None, "choice_shown": None}]
    )
    counted, excluded, nf = apply_filters(frame(rows), Filters())
    assert len(counted) == 1
    assert excluded == {
        "other_run": 0,
        "gold": 1,
        "time_range": 0,
        "bloom": 0,
        "group": 0,
        "subset": 0,
        "flagged_rater": 1,
        "too_fast": 2,
        "not_familiar": 1,
        "no_choice": 1,
    }
    assert len(nf) == 1
    _, excluded, _ = apply_filters(frame(rows), Filters(min_ms=0, include_flagged=True, include_not_familiar=True))
    assert excluded["too_fast"] == 0 and excluded["flagged_rater"] == 0 and excluded["not_familiar"] == 0


def test_the_threshold_can_be_given_per_word_of_both_answers():
    it = item(1, 1, "control", 1, 2)
    rows = votes(it, "a1", client_ms=900, words=100) + votes(it, "a1", client_ms=1200, words=100)
    _, excluded, _ = apply_filters(frame(rows), Filters(min_ms=0, ms_per_word=10))
    assert excluded["too_fast"] == 1


def test_the_bloom_breakdown_splits_asr_by_level():
    rows = []
    for q, bloom in ((1, "remembering"), (2, "creating")):
        rows += votes(item(q * 10, q, "control", q, q + 100, bloom=bloom), "a1")
        rows += votes(item(q * 10 + 1, q, "reference", q, q + 100, bloom=bloom), "a2" if q == 1 else "a1")
    table = analyze(frame(rows), study="s")["rows"]
    assert estimate(table, judge="J", metric="asr", group="reference", bloom="remembering") == 1.0
    assert estimate(table, judge="J", metric="asr", group="reference", bloom="creating") == 0.0


def test_option_probabilities_are_averaged_and_mapped_to_a1_and_a2():
    it = item(1, 1, "control", 1, 2)
    rows = votes(it, "a1", shown_first="a1", option_probs={"first": 0.8, "second": 0.1, "tie": 0.1}) + votes(
        it, "a1", shown_first="a2", option_probs={"first": 0.4, "second": 0.6, "tie": 0.0}
    )
    probs = metrics.option_probs(frame(rows))
    assert probs["a1"] == pytest.approx(0.7) and probs["first"] == pytest.approx(0.6)
    assert probs["confidence"] == pytest.approx(0.7)


def test_first_and_second_probabilities_leave_out_votes_whose_order_is_unknown():
    """Imported votes with no recorded order (AlpacaEval) are stored A1 first: their A1 and A2
    probabilities count, but they say nothing about the position shown first."""
    it = item(1, 1, "control", 1, 2)
    rows = (
        votes(it, "a1", shown_first="a1", option_probs={"first": 0.6, "second": 0.3, "tie": 0.1})
        + votes(it, "a1", shown_first="a2", option_probs={"first": 0.2, "second": 0.7, "tie": 0.1})
        # Order unknown, stored A1 first: P(A1) 0.9 and 1.0, which would read as P(first).
        + votes(it, "a1", shown_first="a1", order_known=False, option_probs={"first": 0.9, "second": 0.1, "tie": 0.0})
        + votes(it, "a1", shown_first="a1", order_known=False, option_probs={"first": 1.0, "second": 0.0, "tie": 0.0})
    )
    probs = metrics.option_probs(frame(rows))
    assert probs["n"] == 4 and probs["n_order_known"] == 2
    # Over the two votes of known order: first (0.6 + 0.2) / 2, second (0.3 + 0.7) / 2.
    assert probs["first"] == pytest.approx(0.4) and probs["second"] == pytest.approx(0.5)
    # Over all four: A1 (0.6 + 0.7 + 0.9 + 1.0) / 4, A2 (0.3 + 0.2 + 0.1 + 0.0) / 4, tie 0.2 / 4.
    assert probs["a1"] == pytest.approx(0.8) and probs["a2"] == pytest.approx(0.15)
    assert probs["tie"] == pytest.approx(0.05)
    assert probs["confidence"] == pytest.approx((0.6 + 0.7 + 0.9 + 1.0) / 4)


def test_with_no_vote_of_known_order_first_and_second_are_null_not_a_position_bias():
    it = item(1, 1, "control", 1, 2)
    rows = votes(it, "a1", shown_first="a1", order_known=False, option_probs={"first": 0.9, "second": 0.1, "tie": 0.0})
    probs = metrics.option_probs(frame(rows))
    assert probs["first"] is None and probs["second"] is None and probs["n_order_known"] == 0
    assert probs["a1"] == pytest.approx(0.9) and probs["a2"] == pytest.approx(0.1) and probs["n"] == 1
