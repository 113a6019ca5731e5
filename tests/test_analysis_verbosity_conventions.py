""" "Longer answer wins" under its two conventions, counted by hand: ours (a tie counts half,
pairs of equal length left out) and the verbosity blog post's (Dsouza 2023: a tie's winner
drawn at random, a win only when strictly longer, pairs of equal length counted)."""

import numpy as np
import pytest

from analysis import metrics, rows
from analysis.compute import Options, analyze
from analysis.text import report_lines
from tests.analysis_frames import frame, item, votes

LONGER_A2 = item(1, 1, "control", 1, 2, len_a1=10, len_a2=15)
LONGER_A1 = item(2, 2, "control", 3, 4, len_a1=30, len_a2=15)
EQUAL = item(3, 3, "control", 5, 6, len_a1=20, len_a2=20)


def hand_frame():
    return frame(votes(LONGER_A2, "a2 tie a1") + votes(LONGER_A1, "a1 a2") + votes(EQUAL, "a1 tie"))


def test_by_default_a_tie_counts_half_and_pairs_of_equal_length_are_left_out():
    v = metrics.verbosity(hand_frame(), convention="tie_half")
    # Unequal pairs: a2 (longer) 1, tie 1/2, a1 0; a1 (longer) 1, a2 0 → 2.5 of 5.
    assert (v["n"], v["longer_wins"], v["convention"]) == (5, pytest.approx(2.5 / 5), "tie_half")


def test_the_blog_counts_every_pair_and_scores_a_tie_by_its_drawn_winner():
    values = [metrics.verbosity(hand_frame(), convention="blog", seed=s)["longer_wins"] for s in range(400)]
    # Decisive votes: a2 on LONGER_A2 and a1 on LONGER_A1 win (2); the a1 votes on LONGER_A2 and
    # EQUAL and the a2 vote on LONGER_A1 do not. The tie on EQUAL never wins (neither is longer);
    # the tie on LONGER_A2 wins when its drawn winner is A2. So 2/7 or 3/7, each half the time.
    assert set(np.round(values, 12)) == {round(2 / 7, 12), round(3 / 7, 12)}
    assert np.mean(values) == pytest.approx(2.5 / 7, abs=0.01)  # sd of the mean: 0.0036
    assert metrics.verbosity(hand_frame(), convention="blog", seed=0)["n"] == 7


def test_the_blogs_draw_is_fixed_by_the_seed():
    first = metrics.verbosity(hand_frame(), convention="blog", seed=11)
    assert metrics.verbosity(hand_frame(), convention="blog", seed=11) == first


def test_a_judge_who_always_ties_sits_at_one_half_under_both_conventions_when_lengths_differ():
    # Truth by construction: a coin decides every vote, so the longer answer wins half of them.
    items = [item(i, i, "control", 2 * i, 2 * i + 1, len_a1=10, len_a2=10 + i) for i in range(1, 401)]
    ties = frame([v for it in items for v in votes(it, "tie tie tie")])
    assert metrics.verbosity(ties)["longer_wins"] == 0.5
    blog = metrics.verbosity(ties, convention="blog", seed=3)
    assert blog["longer_wins"] == pytest.approx(0.5, abs=3 * 0.5 / np.sqrt(1200))
    lo, hi = blog["longer_wins_ci"]
    assert lo < 0.5 < hi


def test_an_unknown_convention_is_refused():
    with pytest.raises(ValueError, match="unknown verbosity convention"):
        metrics.verbosity(hand_frame(), convention="coin")


def test_the_report_scores_with_the_chosen_convention_and_seed_and_names_them():
    result = analyze(hand_frame(), study="s", options=Options(verbosity_convention="blog", seed=5, bootstrap=10))
    found = metrics.verbosity(hand_frame(), convention="blog", seed=5)
    longer = rows.one(result["rows"], judge=result["judges"][0]["judge"], metric="longer_wins")
    assert (longer["estimate"], longer["n"], longer["convention"]) == (found["longer_wins"], found["n"], "blog; words")
    assert [longer["ci_lo"], longer["ci_hi"]] == list(found["longer_wins_ci"])
    bins = rows.select(result["rows"], metric="verbosity_bin")
    assert [(b["estimate"], b["n"]) for b in bins] == [(b["value"], b["n"]) for b in found["bins"]]
    conventions = result["conventions"]
    assert conventions["longer_wins"] == "blog"
    assert "drawn at random" in conventions["longer_wins_ties"] and "seed 5" in conventions["longer_wins_ties"]
    assert conventions["longer_wins_equal_length"] == "pairs of equal length counted, never a win"
    # The rest of what the estimator gives: the clusters, each bin's range and interval, the bin width.
    assert longer["clusters"] == found["clusters"]
    assert [(b["group"], [b["ci_lo"], b["ci_hi"]]) for b in bins] == [
        (f"{b['lo']}-{'' if b['hi'] is None else b['hi']}", list(b["ci"])) for b in found["bins"]
    ]
    assert conventions["verbosity_bin_width"] == found["bin_width"]
    assert any("longer answer wins (words, a tie's winner drawn at random" in line for line in report_lines(result))
    default = analyze(hand_frame(), study="s", options=Options(bootstrap=10))["conventions"]
    assert (default["longer_wins"], default["longer_wins_ties"]) == ("tie_half", "a tie counts half a win")
