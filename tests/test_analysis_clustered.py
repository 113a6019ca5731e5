"""Intervals and tests that respect the design: votes cluster by question (and by rater)."""

import math

import numpy as np
import pytest
from scipy import stats as sps

from analysis import metrics, stats
from analysis.compute import analyze
from analysis.rows import as_rate, one
from tests.analysis_frames import frame, item, votes


def deterministic_judge(copies: int) -> list[dict]:
    """Twelve questions; the judge picks the first-shown answer on eight, the second on four,
    and always the longer answer but on three; ``copies`` identical votes on each item."""
    rows = []
    for q in range(12):
        it = item(q, q, "control", 2 * q, 2 * q + 1, len_a1=10, len_a2=30)
        longer = "a2" if q >= 3 else "a1"
        # Shown A2 first on every vote, so "a2" is a first-position vote.
        rows += votes(it, " ".join([longer] * copies), shown_first="a2" if q < 8 else "a1")
    return rows


def test_six_identical_votes_per_item_give_the_interval_of_one_vote_per_item():
    one, six = frame(deterministic_judge(1)), frame(deterministic_judge(6))
    pos_one, pos_six = metrics.position(one), metrics.position(six)
    assert pos_six["n"] == 6 * pos_one["n"]
    for share in ("first", "tie", "second", "diff"):
        assert pos_six["ci"][share] == pytest.approx(pos_one["ci"][share])
    assert pos_six["p_value"] == pytest.approx(pos_one["p_value"])
    verb_one, verb_six = metrics.verbosity(one), metrics.verbosity(six)
    assert verb_six["longer_wins_ci"] == pytest.approx(verb_one["longer_wins_ci"])
    # As if the 72 votes were independent, the interval would be about sqrt(6) times narrower.
    lo, hi = pos_six["ci"]["first"]
    naive_lo, naive_hi = stats.wilson(pos_six["first"] * 72, 72)
    assert hi - lo > 2 * (naive_hi - naive_lo)


def test_six_identical_votes_per_item_give_the_asr_interval_of_one_vote_per_item():
    def study(copies: int) -> dict:
        rows = []
        for q in range(10):
            rows += votes(item(10 * q, q, "control", 2 * q, 2 * q + 1), " ".join(["a1"] * copies))
            choices = " ".join(["a2" if q < 4 else "a1"] * copies)
            rows += votes(item(10 * q + 1, q, "reference", 2 * q, 2 * q + 1), choices)
        table = analyze(frame(rows), study="s")["rows"]
        return as_rate(one(table, judge="J", metric="asr", group="reference", bloom=""))

    once, six = study(1), study(6)
    assert (six["value"], six["n"]) == (once["value"], once["n"]) == (0.4, 10)
    assert six["ci"] == pytest.approx(once["ci"])


def test_a_judge_at_100_percent_asr_gets_an_interval_with_a_lower_bound_below_it():
    rows = []
    for q in range(8):
        rows += votes(item(10 * q, q, "control", 2 * q, 2 * q + 1), "a1 a1")
        rows += votes(item(10 * q + 1, q, "reference", 2 * q, 2 * q + 1), "a2 a2")
    table = analyze(frame(rows), study="s")["rows"]
    rate = as_rate(one(table, judge="J", metric="asr", group="reference", bloom=""))
    assert rate["value"] == 1.0 and rate["n"] == 8
    # Wilson on 8 questions: [0.6756, 1].
    assert rate["ci"] == [pytest.approx(0.6756, abs=1e-4), 1.0]


def test_a_vote_level_rate_at_0_or_1_falls_back_to_wilson_on_the_questions():
    rows = []
    for q in range(5):
        rows += votes(item(q, q, "control", 2 * q, 2 * q + 1), "a1 a1 a1 a1", shown_first="a1")
    pos = metrics.position(frame(rows))
    assert pos["first"] == 1.0 and pos["clusters"] == 5
    assert pos["ci"]["first"] == [pytest.approx(stats.wilson(5, 5)[0]), 1.0]
    assert pos["ci"]["tie"] == [0.0, pytest.approx(stats.wilson(0, 5)[1])]


def test_raters_who_each_favour_one_side_widen_the_interval_two_way():
    rng = np.random.default_rng(1)
    question = np.repeat(np.arange(40), 10)
    rater = np.tile(np.arange(10), 40)
    # Each rater has a habit: raters 0-4 click first 80% of the time, raters 5-9 20%.
    first = (rng.random(400) < np.where(rater < 5, 0.8, 0.2)).astype(float)[:, None]
    ones = np.ones_like(first)
    one_way = stats.clustered_rates(first, ones, stats.Clusters(question))[0]
    two_way = stats.clustered_rates(first, ones, stats.Clusters(question, rater))[0]
    assert two_way["value"] == one_way["value"]
    width = two_way["ci"][1] - two_way["ci"][0]
    assert width > 1.5 * (one_way["ci"][1] - one_way["ci"][0])
    d = 2 * first[:, 0] - 1
    assert stats.clustered_sign_test(d, stats.Clusters(question, rater)) > stats.clustered_sign_test(
        d, stats.Clusters(question)
    )


def test_the_clustered_sign_test_with_one_vote_per_question_is_the_normal_binomial_test():
    diff = np.array([1.0] * 14 + [-1.0] * 6 + [0.0] * 3)  # 14 first, 6 second, 3 ties
    p = stats.clustered_sign_test(diff, stats.Clusters(np.arange(len(diff))))
    assert p == pytest.approx(2 * sps.norm.sf(8 / math.sqrt(20)))
    assert stats.clustered_sign_test(np.zeros(4), stats.Clusters(np.arange(4))) is None
    # Two questions, each with one first and one second vote: no evidence, p = 1.
    pairs = stats.Clusters(np.array([1, 1, 2, 2]))
    assert stats.clustered_sign_test(np.array([1.0, -1.0, 1.0, -1.0]), pairs) == 1.0


def test_holm_adjusts_a_family_step_down_and_leaves_non_tests_alone():
    got = stats.holm([0.01, None, 0.04, 0.03, 0.5])
    # Sorted 0.01, 0.03, 0.04, 0.5 times 4, 3, 2, 1, kept monotone: 0.04, 0.09, 0.09, 0.5.
    assert got == [pytest.approx(0.04), None, pytest.approx(0.09), pytest.approx(0.09), pytest.approx(0.5)]
    assert stats.holm([0.6, 0.7]) == [1.0, 1.0]


def test_p_values_print_as_less_than_0_001_never_0_000():
    assert stats.format_p(0.0) == "< 0.001"
    assert stats.format_p(0.0004) == "< 0.001"
    assert stats.format_p(0.001) == "0.001"
    assert stats.format_p(0.31731) == "0.317"
    assert stats.format_p(None) == ""


def test_agreement_from_per_question_sums_matches_the_direct_coefficients():
    rng = np.random.default_rng(0)
    table = rng.multinomial(5, [0.5, 0.2, 0.3], size=30).astype(float)
    question = np.arange(30) // 3
    fleiss_parts, alpha_parts = stats.agreement_parts(table, question, 10)
    assert stats.fleiss_from_sums(fleiss_parts.sum(axis=0, keepdims=True))[0][0] == pytest.approx(
        stats.fleiss_kappa(table)
    )
    assert stats.alpha_from_sums(alpha_parts.sum(axis=0, keepdims=True))[0][0] == pytest.approx(
        stats.krippendorff_alpha_nominal(table)
    )
    a, b = rng.integers(-1, 2, 30), rng.integers(-1, 2, 30)
    conf = stats.confusion_parts(a, b, question, 10)
    assert stats.cohen_from_sums(conf.sum(axis=0, keepdims=True))[0][0] == pytest.approx(stats.cohen_kappa(a, b))
    counts = stats.bootstrap_counts(10, reps=200, seed=0)
    lo, hi = stats.bootstrap_stat_ci(counts, fleiss_parts, stats.fleiss_from_sums)
    assert lo < stats.fleiss_kappa(table) < hi


def test_perfect_agreement_gets_an_interval_below_1_not_the_point_1():
    a = np.array([1, -1, 0, 1, -1, 1])
    conf = stats.confusion_parts(a, a, np.arange(6), 6)
    counts = stats.bootstrap_counts(6, reps=200, seed=0)
    lo, hi = stats.bootstrap_stat_ci(counts, conf, stats.cohen_from_sums)
    assert lo < 1.0 and hi == pytest.approx(1.0)


def test_positions_by_bloom_level_are_the_positions_of_each_levels_votes():
    rng = np.random.default_rng(2)
    rows = []
    for q in range(30):
        bloom = ("remembering", "creating", "applying")[q % 3]
        it = item(q, q, "control", 2 * q, 2 * q + 1, bloom=bloom)
        choices = " ".join(rng.choice(["a1", "a2", "tie"], size=4, p=[0.6, 0.3, 0.1]))
        rows += votes(it, choices, judge="H", kind="human", rater=f"r{q % 4}")
    votes_frame = frame(rows)
    overall, parts = metrics.positions(votes_frame, by="bloom")
    assert overall == metrics.position(votes_frame)
    for bloom, got in parts.items():
        expected = metrics.position(votes_frame[(votes_frame["bloom"] == bloom).to_numpy()])
        assert got["n"] == expected["n"] and got["p_value"] == pytest.approx(expected["p_value"])
        for share in ("first", "tie", "second", "diff"):
            assert got[share] == pytest.approx(expected[share])
            assert got["ci"][share] == pytest.approx(expected["ci"][share])


def test_the_two_way_clusters_are_the_question_rater_pairs_numbered_in_order_of_first_vote():
    # Votes: (q 7, r 0), (q 5, r 0), (q 7, r 0), (q 7, no rater), (q 5, r 1): the vote without a
    # rater is its own rater cluster, so its pair with question 7 is new.
    clusters = stats.Clusters(np.array([7, 5, 7, 7, 5]), np.array([0, 0, 0, -1, 1]))
    assert clusters.question.tolist() == [0, 1, 0, 0, 1]
    assert clusters.rater.tolist() == [0, 0, 0, 1, 2]
    assert clusters.both.tolist() == [0, 1, 0, 2, 3]
    assert clusters.both.tolist() == stats.cluster_codes(clusters.question, clusters.rater).tolist()
