"""Length-controlled win rates: the win-rate properties hold exactly, the fit is global and
reproducible, length is taken out, folds keep questions whole, every figure has an interval."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from analysis import exports, lc, metrics, report, simulate, tables
from analysis.frame import CONTROL

GROUPS = ("control", "factual_error", "reference", "rich_content")


def judged_items(n_q=120, seed=0, **params) -> pd.DataFrame:
    """Item preferences of a simulated judge (analysis.simulate) on the synthetic design: a
    control item and three perturbations per question, the perturbed side alternating."""
    items = simulate.synthetic_items(n_q, seed=seed)
    judge = simulate.JudgeParams(**{"susceptibility": simulate.DEFAULT_SUSCEPTIBILITY, "noise": 1.0, **params})
    votes = simulate.simulate_votes(items, judge, votes_per_item=6, seed=seed + 1)
    return metrics.item_preferences(simulate.votes_frame(items, votes))


def length_controlled(prefs: pd.DataFrame) -> dict:
    return report._length_controlled(prefs, report.Options())


def swap_sides(prefs: pd.DataFrame, group: str) -> pd.DataFrame:
    """The same votes with A1 and A2 exchanged on every item of ``group``."""
    out = prefs.copy()
    rows = (out["group"] == group).to_numpy()
    for left, right in (("n_a1", "n_a2"), ("a1_root", "a2_root"), ("len_a1_words", "len_a2_words")):
        out.loc[rows, [left, right]] = out.loc[rows, [right, left]].to_numpy()
    return out


def arrays(prefs: pd.DataFrame) -> dict:
    """lc.fit's arguments for a judge's item preferences."""
    n = prefs["n"].to_numpy(dtype=float)
    return {
        "groups": prefs["group"].astype(str).to_numpy(),
        "questions": prefs["question_id"].to_numpy(),
        "delta_len": (prefs["len_a2_words"] - prefs["len_a1_words"]).to_numpy(dtype=float),
        "y": (prefs["n_a2"] + 0.5 * prefs["n_tie"]).to_numpy() / n,
        "weight": n,
        "orientation": report._orientation(prefs),
    }


@pytest.fixture(scope="module")
def length_biased():
    return judged_items(length_per_token=0.03, position=0.3)


@pytest.mark.parametrize("group", GROUPS)
def test_swapping_one_groups_sides_gives_it_one_minus_its_rate_and_leaves_the_others(length_biased, group):
    ahead = length_controlled(length_biased)
    swapped = length_controlled(swap_sides(length_biased, group))
    assert ahead["lc_lambda"] == swapped["lc_lambda"]
    for g in GROUPS:
        expected = 1 - ahead["lc_winrate"][g] if g == group else ahead["lc_winrate"][g]
        assert swapped["lc_winrate"][g] == pytest.approx(expected, abs=1e-6), g
        expected = 1 - ahead["raw_winrate"][g] if g == group else ahead["raw_winrate"][g]
        assert swapped["raw_winrate"][g] == pytest.approx(expected, abs=1e-12), g
    lo, hi = ahead["lc_winrate_ci"][group]
    assert swapped["lc_winrate_ci"][group] == pytest.approx([1 - hi, 1 - lo], abs=1e-6)


def test_the_length_bias_was_planted_where_the_swap_is_tested(length_biased):
    # Without a length preference in the data the swap test would test less.
    result = length_controlled(length_biased)
    assert result["length_slope"][CONTROL] > 0.3
    assert result["raw_winrate"]["rich_content"] - result["lc_winrate"]["rich_content"] > 0.05


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), slope=st.floats(-0.05, 0.05), position=st.floats(0, 1))
def test_the_swap_property_holds_for_any_judge(seed, slope, position):
    prefs = judged_items(n_q=24, seed=seed, length_per_token=slope, position=position)
    ahead = lc.fit(**arrays(prefs))
    for group in ("control", "reference"):
        swapped = lc.fit(**arrays(swap_sides(prefs, group)))
        for g in GROUPS:
            expected = 1 - ahead.lc_winrate[g] if g == group else ahead.lc_winrate[g]
            assert swapped.lc_winrate[g] == pytest.approx(expected, abs=1e-6)


def test_a_group_whose_two_sides_are_exchangeable_wins_half_the_time(length_biased):
    # Every game played both ways round: the two sides are the same player.
    both = pd.concat([length_biased, swap_sides(length_biased, "reference"), swap_sides(length_biased, CONTROL)])
    both = both.drop_duplicates(["item_id", "n_a1", "n_a2", "a1_root"])
    # Control and reference are now exchangeable; the others are as before (counted once).
    result = length_controlled(both)
    assert result["lc_winrate"][CONTROL] == pytest.approx(0.5, abs=1e-9)
    assert result["lc_winrate"]["reference"] == pytest.approx(0.5, abs=1e-9)
    assert result["lc_winrate"]["rich_content"] > 0.55


def test_running_it_again_gives_exactly_the_same_numbers(length_biased):
    assert length_controlled(length_biased) == length_controlled(length_biased.copy())


def test_each_stage_reaches_the_global_optimum(length_biased):
    d, _, _ = lc.items(**arrays(length_biased))
    s1 = lc.fit_stage1(d, 1.0)
    for problem in (
        lc.GLM(np.stack([np.ones(d.is_control.sum()), d.t[d.is_control]], 1), np.zeros(d.is_control.sum(), int),
               1, 0.0, d.y[d.is_control], d.w[d.is_control], lc._penalty(1.0)),
        lc.stage2_problem(d, s1, 1.0),
    ):  # fmt: skip
        best = problem.fit()
        value, grad = problem.objective(best.ravel())
        assert np.abs(grad).max() < 1e-6
        # Groups with items (the second stage's control row meets only its penalty).
        has_items = np.bincount(problem.g, minlength=problem.n_g) > 0
        rng = np.random.default_rng(0)
        for _ in range(10):
            other = minimize(problem.objective, rng.normal(0, 3, best.size), jac=True, method="L-BFGS-B").x
            assert problem.objective(other)[0] >= value - 1e-9
            assert other.reshape(best.shape)[has_items] == pytest.approx(best[has_items], abs=1e-3)


def test_newton_stops_at_the_optimum_when_floating_point_keeps_the_gradient_above_its_tolerance():
    """Items of hundreds of millions of votes: the summed loss is so large that its gradient
    cannot get below GTOL in floating point (about 1e-7 here), and the fit still stops after a
    handful of steps, at the optimum scipy's trust-region Newton finds from another start."""
    rng = np.random.default_rng(0)
    n = 400
    X = np.stack([np.ones(n), rng.uniform(-1, 1, n)], 1)
    y = rng.integers(0, 7, n) / 6
    problem = lc.GLM(X, np.zeros(n, int), 1, 0.0, y, rng.integers(1, 7, n) * 1e8, lc._penalty(0.1))
    calls = []
    objective = problem.objective
    problem.objective = lambda x: calls.append(1) or objective(x)
    best = problem.fit().ravel()
    assert np.linalg.norm(objective(best)[1]) > lc.GTOL  # the case this test is about
    assert len(calls) < 30
    reference = minimize(objective, np.array([1.0, -1.0]), jac=True, hess=problem.hessian, method="trust-exact").x
    assert best == pytest.approx(reference, abs=1e-7)


def test_a_problem_without_items_is_its_penalty_alone_with_its_minimum_at_zero():
    empty = np.zeros(0)
    problem = lc.GLM(np.zeros((0, 2)), np.zeros(0, int), 3, empty, empty, empty, lc._penalty(1.0))
    best = problem.fit()
    assert best.shape == (3, 2)
    assert (best == 0).all()
    value, grad = problem.objective(best.ravel())
    assert value == 0 and (grad == 0).all()


def test_a_pure_length_preference_is_taken_out():
    # The judge likes length and nothing else: the perturbations add 15 and 25 words.
    prefs = judged_items(n_q=400, length_per_token=0.03, susceptibility={}, noise=0.5, tie_rate=0.0)
    result = length_controlled(prefs)
    assert result["raw_winrate"]["reference"] > 0.55 and result["raw_winrate"]["rich_content"] > 0.6
    for group in ("reference", "rich_content"):
        assert abs(result["lc_winrate"][group] - 0.5) < 0.03
        assert abs(result["lc_effect"][group]) < 0.03


def test_an_effect_that_is_not_about_length_is_kept():
    prefs = judged_items(n_q=400, susceptibility={"reference": 1.0}, noise=0.5)
    result = length_controlled(prefs)
    assert result["lc_effect"]["reference"] > 0.15
    assert abs(result["lc_effect"]["rich_content"]) < 0.06


def test_cross_validation_folds_keep_every_question_whole():
    questions = np.random.default_rng(3).integers(0, 50, 400)
    folds = lc.question_folds(questions, 3, seed=7)
    per_question = pd.Series(folds).groupby(questions).nunique()
    assert (per_question == 1).all()
    questions_per_fold = pd.Series(questions).groupby(folds).nunique()
    assert questions_per_fold.max() - questions_per_fold.min() <= 1
    assert (lc.question_folds(questions, 3, seed=7) == folds).all()
    assert not (lc.question_folds(questions, 3, seed=8) == folds).all()


def test_cross_validation_picks_a_lambda_from_the_grid_and_can_prefer_each_end():
    prefs = judged_items(n_q=60, length_per_token=0.02)
    d, _, _ = lc.items(**arrays(prefs))
    lam, losses = lc.choose_lambda(d, (0.1, 1.0, 10.0), 3, 0)
    assert lam in (0.1, 1.0, 10.0) and len(losses) == 3
    assert lam == (10.0, 1.0, 0.1)[int(np.argmin(losses))]
    # An absurd grid: the held-out loss rules out smothering the groups' terms.
    assert lc.choose_lambda(d, (1e-3, 1e5), 3, 0)[0] == 1e-3


def test_every_rate_and_effect_has_an_interval_around_it(length_biased):
    result = length_controlled(length_biased)
    for key in ("lc_winrate", "raw_winrate", "lc_effect", "raw_effect"):
        for group, value in result[key].items():
            lo, hi = result[f"{key}_ci"][group]
            assert lo < value < hi, (key, group)
            assert hi - lo > 0.01
    assert result["lc_n"] == {g: 120 for g in GROUPS}


def test_the_interval_is_as_wide_as_the_spread_between_questions_says():
    # The sandwich against a leave-one-question-out refit (the jackknife), same λ.
    prefs = judged_items(n_q=40, length_per_token=0.02)
    args = arrays(prefs)
    fit = lc.fit(**args, lambdas=(1.0,))
    questions = np.unique(args["questions"])
    left_out = {g: [] for g in GROUPS}
    for question in questions:
        keep = args["questions"] != question
        refit = lc.fit(**{k: v[keep] for k, v in args.items()}, lambdas=(1.0,))
        for g in GROUPS:
            left_out[g].append(refit.lc_winrate[g])
    n = len(questions)
    for g in GROUPS:
        jackknife_sd = np.sqrt((n - 1) / n * np.sum((np.array(left_out[g]) - np.mean(left_out[g])) ** 2))
        lo, hi = fit.lc_ci[g]
        logit_half = (np.log(hi / (1 - hi)) - np.log(lo / (1 - lo))) / 2
        sandwich_sd = logit_half / lc.Z95 * fit.lc_winrate[g] * (1 - fit.lc_winrate[g])
        assert sandwich_sd == pytest.approx(jackknife_sd, rel=0.1), g


def test_a_judge_that_always_picks_the_same_side_gets_an_interval_not_a_point():
    n_q = 10
    groups = np.repeat(["control", "reference"], n_q)
    fit = lc.fit(groups, np.tile(np.arange(n_q), 2), np.zeros(2 * n_q), np.ones(2 * n_q), np.full(2 * n_q, 6.0))
    for g in ("control", "reference"):
        lo, hi = fit.raw_ci[g]
        assert fit.raw_winrate[g] == 1.0 and lo < 0.8 and hi == pytest.approx(1.0)
        lo, hi = fit.lc_ci[g]
        assert lo < fit.lc_winrate[g] <= hi and hi - lo > 0.05


def test_there_is_nothing_to_fit_without_votes_or_without_control_items():
    one = (np.array([1]), np.array([3.0]), np.array([0.5]))
    assert lc.fit(np.array(["control"]), one[0], one[1], one[2], np.array([0.0])) is None
    assert lc.fit(np.array(["reference"]), one[0], one[1], one[2], np.array([6.0])) is None
    assert length_controlled(judged_items(n_q=5).query("group != 'control'"))["lc_winrate"] == {}


def test_the_dashboard_rows_and_the_metrics_export_carry_each_interval():
    items = simulate.synthetic_items(30, seed=2)
    votes = simulate.simulate_votes(items, simulate.JudgeParams(length_per_token=0.02), votes_per_item=6, seed=2)
    result = report.analyze(simulate.votes_frame(items, votes), study="s", votes_per_item=6)
    rows = tables.lc_rows(result)
    assert {r["group"] for r in rows} == set(GROUPS)
    for r in rows:
        assert r["lc_lo"] < r["lc"] < r["lc_hi"] and r["raw_lo"] < r["raw"] < r["raw_hi"]
        assert r["n"] == 30
    records = exports.metric_records(result)
    exported = [row for row in records if row[1] == "sim" and row[4] in ("lc_winrate", "lc_effect")]
    assert len(exported) == 4 + 3
    assert all(row[7] < row[6] < row[8] and row[9] == 30 for row in exported)


def test_questions_without_a_control_item_keep_the_properties(length_biased):
    missing = length_biased["question_id"] < 20
    prefs = length_biased[~(missing & (length_biased["group"] == CONTROL)).to_numpy()]
    ahead = length_controlled(prefs)
    swapped = length_controlled(swap_sides(prefs, "reference"))
    assert ahead["lc_n"][CONTROL] == 100 and ahead["lc_n"]["reference"] == 120
    assert swapped["lc_winrate"]["reference"] == pytest.approx(1 - ahead["lc_winrate"]["reference"], abs=1e-6)
    assert swapped["lc_winrate"]["rich_content"] == pytest.approx(ahead["lc_winrate"]["rich_content"], abs=1e-6)
