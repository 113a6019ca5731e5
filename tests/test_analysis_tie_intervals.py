"""Intervals of figures where a tie counts half know what ties take away: a vote scored ½ varies
less than one scored 0 or 1, so at 60% ties the interval of n independent votes is narrower than
Wilson's on n votes (by √(p(1 − p) / (p(1 − p) − t/4)), 1.58 at p = ½). Checked against a known
truth: hand-computed variances, and simulated studies whose truth is known by construction
(bias and coverage of the 95% interval over many draws) at 0, 30 and 60% ties, for the position
difference, "longer answer wins", the verbosity bins and the LC fit's raw win rate."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from analysis import lc, metrics, stats
from analysis.frame import by_judge
from analysis.simulate import votes_frame

DRAWS = 400
QUESTIONS = 100
VOTES = 4  # per question, orders alternating
SPREAD = 0.5  # sd of the question effect on the log-odds: votes on one question lean together
TIES = (0.0, 0.3, 0.6)


def mean_expit(mu: float, sd: float) -> float:
    """E[logistic(mu + sd·Z)], Z standard normal, by Gauss–Hermite quadrature."""
    x, w = np.polynomial.hermite.hermgauss(60)
    return float((w * expit(mu + sd * np.sqrt(2) * x)).sum() / np.sqrt(np.pi))


def simulated(tie: float, mu: float, *, seed: int, lengths: bool) -> pd.DataFrame:
    """DRAWS studies in one frame, one judge per study: QUESTIONS questions with one item and
    VOTES votes each, orders alternating. A vote is a tie with probability ``tie``; otherwise
    it takes the answer shown first (``lengths`` False) or the longer one (``lengths`` True)
    with probability logistic(mu + SPREAD·z_q), z_q drawn per question."""
    rng = np.random.default_rng(seed)
    n_q = DRAWS * QUESTIONS
    q = np.repeat(np.arange(n_q), VOTES)
    lean = expit(mu + SPREAD * rng.standard_normal(n_q))[q]
    is_tie = rng.random(len(q)) < tie
    took = rng.random(len(q)) < lean  # the first shown, or the longer answer
    a2_first = np.tile(np.arange(VOTES) % 2 == 1, n_q)
    # |Δ length| 1-59 words (bins 0-10 … 50-60), A2 the longer answer on half the questions.
    delta = rng.integers(1, 60, n_q)
    a2_longer = rng.random(n_q) < 0.5
    pick_a2 = took == (a2_longer[q] if lengths else a2_first)
    choice = np.where(is_tie, "tie", np.where(pick_a2, "a2", "a1"))
    first = np.where(a2_first, pick_a2, ~pick_a2)
    items = pd.DataFrame(
        {
            "item_id": np.arange(n_q),
            "question_id": np.arange(n_q),
            "group": "control",
            "semantics": "control",
            "a1_root": 2 * np.arange(n_q),
            "a2_root": 2 * np.arange(n_q) + 1,
            "len_a1_words": np.where(a2_longer, 50, 50 + delta),
            "len_a2_words": np.where(a2_longer, 50 + delta, 50),
            "bloom": "remembering",
        }
    )
    votes = pd.DataFrame(
        {
            "item_id": q,
            "shown_first": np.where(a2_first, "a2", "a1"),
            "choice_shown": np.where(is_tie, "tie", np.where(first, "first", "second")),
            "choice": choice,
            "client_ms": np.nan,
        }
    )
    frame = votes_frame(items, votes)
    # One judge per simulated study: the report's own split by judge gives each its votes.
    frame["judge"] = pd.Categorical(np.repeat(np.arange(DRAWS), QUESTIONS * VOTES).astype(str))
    return frame


def coverage(estimates: np.ndarray, intervals: np.ndarray, truth: float) -> tuple[float, float]:
    """(mean estimate − truth, share of the intervals that hold the truth)."""
    covered = (intervals[:, 0] <= truth) & (truth <= intervals[:, 1])
    return float(estimates.mean() - truth), float(covered.mean())


@pytest.mark.parametrize("tie", TIES)
def test_the_position_difference_interval_covers_its_truth_at_every_tie_share(tie):
    # Non-tie votes take the first answer with probability logistic(0.4 + 0.5 z) on average.
    truth = (1 - tie) * (2 * mean_expit(0.4, SPREAD) - 1)
    studies = by_judge(simulated(tie, 0.4, seed=int(tie * 10), lengths=False))
    found = [metrics.position(votes) for votes in studies.values()]
    estimates = np.array([f["diff"] for f in found])
    intervals = np.array([f["ci"]["diff"] for f in found])
    bias, covered = coverage(estimates, intervals, truth)
    assert abs(bias) < 0.01
    assert 0.93 <= covered <= 0.97, f"{tie:.0%} ties: the 95% interval covered the truth {covered:.1%} of the time"


@pytest.mark.parametrize("tie", TIES)
def test_longer_wins_and_each_verbosity_bin_cover_their_truth_at_every_tie_share(tie):
    # Non-tie votes take the longer answer with probability logistic(0.6 + 0.5 z) on average,
    # whatever the difference in length: every bin has the same truth as the whole.
    truth = (1 - tie) * mean_expit(0.6, SPREAD) + tie / 2
    studies = by_judge(simulated(tie, 0.6, seed=100 + int(tie * 10), lengths=True))
    found = [metrics.verbosity(votes) for votes in studies.values()]
    estimates = np.array([f["longer_wins"] for f in found])
    intervals = np.array([f["longer_wins_ci"] for f in found])
    bias, covered = coverage(estimates, intervals, truth)
    assert abs(bias) < 0.01
    assert 0.93 <= covered <= 0.97, f"{tie:.0%} ties: longer wins covered {covered:.1%}"
    # The six bins of 10 words, each over about a sixth of the votes: pooled over the bins,
    # 2,400 intervals.
    bins = [b for f in found for b in f["bins"]]
    assert {len(f["bins"]) for f in found} == {6}
    bias, covered = coverage(np.array([b["value"] for b in bins]), np.array([b["ci"] for b in bins]), truth)
    assert abs(bias) < 0.01
    assert 0.93 <= covered <= 0.97, f"{tie:.0%} ties: the verbosity bins covered {covered:.1%}"


def test_a_tie_counts_as_the_variance_of_its_half_point_by_hand():
    # Ten questions, one vote each: six ties (½), three wins (1), one loss (0). Mean 0.6; the
    # votes' variance Σ(x − p)² / n = (6 × 0.01 + 3 × 0.16 + 0.36) / 10 = 0.09, so the rate's
    # variance is 0.009 (every question its own cluster: CR1 adds G/(G − 1) = 10/9, 0.01).
    # The effective number of votes is p(1 − p) / V = 0.24 / 0.01 = 24, not capped at the 10
    # votes: Wilson's interval on 24 trials, narrower than Wilson's on 10.
    x = np.array([0.5] * 6 + [1.0] * 3 + [0.0])
    found = stats.clustered_rates(x[:, None], np.ones((10, 1)), stats.Clusters(np.arange(10)))[0]
    assert found["value"] == pytest.approx(0.6)
    assert found["n_eff"] == pytest.approx(24.0)
    assert found["ci"] == pytest.approx(list(stats.wilson(0.6 * 24, 24)))
    # The same ten votes scored 0 or 1 (a tie drawn as a win or a loss) have p(1 − p) / n as
    # their floor and CR1 above it: n_eff = 0.24 / (10/9 × 0.024) = 9, below the 10 votes.
    binary = np.array([1.0] * 3 + [0.0] * 3 + [1.0] * 3 + [0.0])
    assert stats.clustered_rates(binary[:, None], np.ones((10, 1)), stats.Clusters(np.arange(10)))[0][
        "n_eff"
    ] == pytest.approx(9.0)


def test_all_ties_fall_back_to_wilson_on_the_clusters_not_a_point():
    # Every vote a tie: the rate is ½ with no spread at all; the interval is still Wilson's on
    # the five questions, not the point ½.
    x = np.full(10, 0.5)
    found = stats.clustered_rates(x[:, None], np.ones((10, 1)), stats.Clusters(np.repeat(np.arange(5), 2)))[0]
    assert found["value"] == 0.5 and found["n_eff"] == 5
    assert found["ci"] == pytest.approx(list(stats.wilson(2.5, 5)))
    grouped = stats.clustered_rates(x, None, stats.Clusters(np.repeat(np.arange(5), 2)), group=np.zeros(10, int))[0]
    assert grouped["ci"] == pytest.approx(list(stats.wilson(2.5, 5)))


def test_the_group_variance_knows_the_ties_as_the_pooled_one_does():
    # The verbosity bins' path (a group per vote) gives the pooled path's interval for each group.
    rng = np.random.default_rng(3)
    x = rng.choice([0.0, 0.5, 1.0], size=300, p=[0.2, 0.6, 0.2])
    question = np.repeat(np.arange(100), 3)
    group = rng.integers(0, 3, 300)
    clusters = stats.Clusters(question)
    grouped = stats.clustered_rates(x, None, clusters, group=group, n_groups=3)
    for g in range(3):
        pooled = stats.clustered_rates(x[:, None], (group == g).astype(float)[:, None], clusters)[0]
        assert grouped[g]["ci"] == pytest.approx(pooled["ci"])
        assert grouped[g]["n_eff"] > grouped[g]["n"]  # six ties in ten: more than the votes


@pytest.mark.parametrize("tie", TIES)
def test_the_raw_win_rate_of_the_lc_fit_covers_its_truth_at_every_tie_share(tie):
    # The LC fit's raw rate (a tie counts half in each item's y) has the sandwich variance of
    # those scored items: no cap to lift, and its interval covers the truth with ties too.
    rng = np.random.default_rng(7 + int(tie * 10))
    truth = (1 - tie) * mean_expit(0.4, SPREAD) + tie / 2
    lean = expit(0.4 + SPREAD * rng.standard_normal((DRAWS, QUESTIONS)))[:, :, None]
    draw = rng.random((DRAWS, QUESTIONS, VOTES))
    is_tie = draw < tie
    a2 = ~is_tie & (rng.random((DRAWS, QUESTIONS, VOTES)) < lean)
    y = (a2.sum(axis=2) + is_tie.sum(axis=2) / 2) / VOTES
    groups, questions = np.full(QUESTIONS, "control"), np.arange(QUESTIONS)
    delta, votes = rng.normal(0, 30, QUESTIONS), np.full(QUESTIONS, float(VOTES))
    fits = [lc.fit(groups, questions, delta, y[d], votes, lambdas=(1.0,)) for d in range(DRAWS)]
    estimates = np.array([f.raw_winrate["control"] for f in fits])
    bias, covered = coverage(estimates, np.array([f.raw_ci["control"] for f in fits]), truth)
    assert abs(bias) < 0.01
    assert 0.93 <= covered <= 0.97, f"{tie:.0%} ties: the raw win rate covered {covered:.1%}"
