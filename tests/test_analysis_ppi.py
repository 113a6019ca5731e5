"""Prediction-powered inference of people's rates (analysis.ppi): equal to the published mean
estimator's formula by hand, coverage near 95% by simulation with a good and a useless judge,
narrower than people alone when the judge agrees with them, and the report's rows the same
quantity as people's own ASR and position rows."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from analysis import ppi, rows, text
from analysis.compute import Options, analyze
from analysis.simulate import JudgeParams, simulate_votes, synthetic_items, votes_frame


def hand_ppi_mean(y, f_lab, f_unl, lam):
    """Angelopoulos et al.'s PPI++ mean estimate and standard error, as ppi-python's
    ppi_mean_ci computes them (numpy std, ddof 0)."""
    n, big_n = len(y), len(f_unl)
    theta = lam * f_unl.mean() + (y - lam * f_lab).mean()
    se = np.sqrt(np.var(lam * f_unl) / big_n + np.var(y - lam * f_lab) / n)
    return theta, se


def hand_ppi_mean_ddof1(y, f_lab, f_unl, lam):
    """The same with sample variances (ddof 1), as ppi-python's M-estimators take them
    (np.cov): the small-sample factor analysis.ppi applies per sample."""
    n, big_n = len(y), len(f_unl)
    theta = lam * f_unl.mean() + (y - lam * f_lab).mean()
    se = np.sqrt(np.var(lam * f_unl, ddof=1) / big_n + np.var(y - lam * f_lab, ddof=1) / n)
    return theta, se


def mean_case(lam, seed=0, n=40, big_n=200):
    rng = np.random.default_rng(seed)
    y = rng.normal(0.4, 1.0, n)
    f_lab = 0.8 * y + rng.normal(0, 0.5, n)
    f_unl = rng.normal(0.3, 0.9, big_n)
    found = ppi.ppi_ratio(
        y_num=np.concatenate([y, np.zeros(big_n)]),
        y_den=np.ones(n + big_n),
        f_num=np.concatenate([f_lab, f_unl]),
        f_den=np.ones(n + big_n),
        labelled=np.arange(n + big_n) < n,
        cluster=np.arange(n + big_n),
        lam=lam,
        bounds=(-np.inf, np.inf),
    )
    return found, y, f_lab, f_unl


@pytest.mark.parametrize("lam", [0.0, 0.5, 1.0])
def test_with_one_unit_per_cluster_it_is_the_published_mean_estimator(lam):
    found, y, f_lab, f_unl = mean_case(lam)
    theta, se = hand_ppi_mean_ddof1(y, f_lab, f_unl, lam)
    # ppi-python's ppi_mean_ci itself divides by n: the same up to that factor.
    assert se / hand_ppi_mean(y, f_lab, f_unl, lam)[1] == pytest.approx(np.sqrt(40 / 39), rel=0.02)
    assert found.value == pytest.approx(theta, abs=1e-12)
    assert found.ci[0] == pytest.approx(theta - 1.959963984540054 * se, abs=1e-12)
    assert found.ci[1] == pytest.approx(theta + 1.959963984540054 * se, abs=1e-12)
    assert found.lam == lam


def test_the_tuned_lambda_minimises_the_variance_it_reports():
    found, y, f_lab, f_unl = mean_case(None, seed=3)
    n, big_n = len(y), len(f_unl)
    cov = np.cov(y, f_lab)[0, 1]
    by_hand = (cov / n) / (np.var(f_lab, ddof=1) / n + np.var(f_unl, ddof=1) / big_n)
    assert 0 < by_hand < 1
    assert found.lam == pytest.approx(by_hand, abs=1e-12)
    widths = [hand_ppi_mean_ddof1(y, f_lab, f_unl, lam)[1] for lam in np.linspace(0, 1, 101)]
    _, se = hand_ppi_mean_ddof1(y, f_lab, f_unl, found.lam)
    assert se <= min(widths) + 1e-12
    # People alone: the mean of y with its own standard error.
    assert found.classical == pytest.approx(y.mean())
    assert found.variance_ratio == pytest.approx(np.var(y, ddof=1) / n / se**2)


def test_it_refuses_arrays_of_different_lengths_and_a_lambda_outside_0_1():
    with pytest.raises(ValueError, match="one value per unit"):
        ppi.ppi_ratio(y_num=[1, 0], y_den=[1, 1], f_num=[1], f_den=[1, 1], labelled=[1, 1], cluster=[1, 2])
    with pytest.raises(ValueError, match="lam must be in"):
        ppi.ppi_ratio(y_num=[1, 0], y_den=[1, 1], f_num=[1, 0], f_den=[1, 1], labelled=[1, 1], cluster=[1, 2], lam=2)


def test_with_people_on_fewer_than_two_clusters_there_is_no_estimate():
    found = ppi.ppi_ratio(
        y_num=[1, 0, 0], y_den=[1, 1, 1], f_num=[1, 0, 1], f_den=[1, 1, 1], labelled=[1, 1, 0], cluster=[7, 7, 8]
    )
    assert found.value is None and "1 cluster" in found.reason


# A clustered ASR-like design with a known truth: K prompts of M questions; a question is in
# the base set with probability 0.7 and, in it, a hit with probability expit(logit 0.3 + u),
# u ~ N(0, 1) shared by the prompt's questions. People label each question with probability
# 0.3 (about 180 questions, 130 in the base set); the judge labels all. At 60 prompts (about 50
# questions in the base set) the coverage is 93-94%: a normal approximation's small-sample
# shortfall, which people alone's interval shares (docs/STATISTICS.md).
K, M, P_LABEL = 150, 4, 0.3


def truth() -> float:
    u = np.random.default_rng(12345).normal(0, 1, 2_000_000)
    return float(expit(np.log(0.3 / 0.7) + u).mean())


def draw(rng, judge: str):
    u = np.repeat(rng.normal(0, 1, K), M)
    base = rng.random(K * M) < 0.7
    hit = base & (rng.random(K * M) < expit(np.log(0.3 / 0.7) + u))
    if judge == "good":  # agrees with people on 90% of questions
        keep = rng.random(K * M) < 0.9
        f_base = np.where(keep, base, rng.random(K * M) < 0.7)
        f_hit = f_base & np.where(keep, hit, rng.random(K * M) < 0.3)
    else:  # useless: its own coin, whatever people do
        f_base = rng.random(K * M) < 0.5
        f_hit = f_base & (rng.random(K * M) < 0.5)
    labelled = rng.random(K * M) < P_LABEL
    return ppi.ppi_ratio(
        y_num=hit,
        y_den=base,
        f_num=f_hit,
        f_den=f_base,
        labelled=labelled,
        cluster=np.repeat(np.arange(K), M),
    )


@pytest.mark.parametrize("judge", ["good", "useless"])
def test_the_interval_covers_peoples_rate_about_95_percent_whatever_the_judge(judge):
    # 1,000 studies: the coverage's own standard error is 0.7 points, so 93-97% tells a valid
    # interval from one 2-3 points off; each study takes well under a millisecond.
    rng = np.random.default_rng(7 if judge == "good" else 8)
    true = truth()
    found = [draw(rng, judge) for _ in range(1000)]
    found = [f for f in found if f.value is not None]
    assert len(found) >= 990
    covered = np.mean([f.ci[0] <= true <= f.ci[1] for f in found])
    assert 0.93 <= covered <= 0.97, covered
    assert abs(np.mean([f.value for f in found]) - true) < 0.01
    ppi_width = np.mean([f.ci[1] - f.ci[0] for f in found])
    alone_width = np.mean([f.classical_ci[1] - f.classical_ci[0] for f in found])
    if judge == "good":
        # A judge that agrees with people is worth more people: narrower, and > 1.5 x the votes.
        assert ppi_width < 0.8 * alone_width
        assert np.median([f.variance_ratio for f in found]) > 1.5
    else:
        # A useless judge costs (almost) nothing: lambda near 0, the width of people alone.
        assert np.median([f.lam for f in found]) < 0.15
        assert ppi_width == pytest.approx(alone_width, rel=0.05)


def study_frame(seed=0):
    """A synthetic study: an LLM judge on every item, people (6 raters' votes per item) on the
    first half of the questions."""
    items = synthetic_items(80, seed=seed)
    judge = votes_frame(
        items,
        simulate_votes(items, JudgeParams(susceptibility={"reference": 0.8}), votes_per_item=4, seed=seed),
        judge="LLM",
        kind="llm",
    )
    people_items = items[items["question_id"] < 40]
    people = votes_frame(
        people_items,
        simulate_votes(people_items, JudgeParams(susceptibility={"reference": 0.8}), votes_per_item=6, seed=seed + 1),
        judge="Humans",
        kind="human",
    )
    people["vote_id"] += len(judge)
    import pandas as pd

    from analysis.frame import normalise

    both = pd.concat([judge.astype(object), people.astype(object)], ignore_index=True)
    return normalise(both), items


def test_the_report_has_ppi_rows_whose_people_alone_figures_are_peoples_own_rows():
    frame, items = study_frame()
    report = analyze(frame, study="s", options=Options(bootstrap=200))
    table = report["rows"]
    groups = [g["group"] for g in report["groups"]]
    for g in groups:
        got = rows.one(table, judge="LLM", metric="ppi_asr", group=g)
        assert got is not None and got["estimate"] is not None, g
        effective = rows.one(table, judge="LLM", metric="ppi_effective_votes", group=g)
        assert effective["n"] > 0 and effective["estimate"] > 0
        # People alone, in PPI's terms, is people's own ASR row (same base, same hits).
        human = rows.one(table, judge="Humans", metric="asr", group=g, bloom="")
        assert f"people alone {human['estimate']:.3f}" in got["note"]
        assert got["n"] == human["n"]
    position = rows.one(table, judge="LLM", metric="ppi_position", group="position")
    human = rows.one(table, judge="Humans", metric="position_diff", bloom="")
    assert f"people alone {human['estimate']:.3f}" in position["note"]
    assert rows.one(table, judge="LLM", metric="ppi_effective_votes", group="position")["n"] == human["n"]
    # The terminal text says it too, under the judge.
    lines = list(text.report_lines(report))
    worth = rows.one(table, judge="LLM", metric="ppi_effective_votes", group="position")
    assert f"  Human-equivalent votes [position]: {rows.figure_text(worth)}" in lines
    # No rows for people themselves.
    assert rows.one(table, judge="Humans", metric="ppi_asr") is None


def test_a_rate_of_0_still_has_an_interval_and_a_tuned_judge_never_widens_it():
    rng = np.random.default_rng(4)
    base = np.ones(60)
    found = ppi.ppi_ratio(
        y_num=np.zeros(60),
        y_den=base,
        f_num=rng.random(60) < 0.5,
        f_den=base,
        labelled=np.arange(60) < 30,
        cluster=np.arange(60),
    )
    # Wilson's on the 30 clusters with a base: (0, 0.114).
    assert found.value == 0 and found.ci[0] == 0 and found.ci[1] == pytest.approx(0.1135, abs=1e-3)
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y = rng.random(80) < 0.4
        found = ppi.ppi_ratio(
            y_num=y,
            y_den=base[:40].repeat(2),
            f_num=rng.random(80) < 0.5,
            f_den=base[:40].repeat(2),
            labelled=np.arange(80) < 40,
            cluster=np.arange(80),
        )
        assert found.ci[1] - found.ci[0] <= found.classical_ci[1] - found.classical_ci[0] + 1e-12
        assert found.variance_ratio >= 1
