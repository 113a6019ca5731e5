"""Length-controlled win rates: the win-rate properties hold exactly, the fit is global and
reproducible, length is taken out, folds keep questions whole, every figure has an interval."""

import re

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize
from scipy.special import expit, logit

from analysis import compute, exports, judge_metrics, lc, metrics, simulate, tables
from analysis.frame import CONTROL
from analysis.rows import estimate, one, select

GROUPS = ("control", "factual_error", "reference", "rich_content")


def judged_items(n_q=120, seed=0, **params) -> pd.DataFrame:
    """Item preferences of a simulated judge (analysis.simulate) on the synthetic design: a
    control item and three perturbations per question, the perturbed side alternating."""
    items = simulate.synthetic_items(n_q, seed=seed)
    judge = simulate.JudgeParams(**{"susceptibility": simulate.DEFAULT_SUSCEPTIBILITY, "noise": 1.0, **params})
    votes = simulate.simulate_votes(items, judge, votes_per_item=6, seed=seed + 1)
    return metrics.item_preferences(simulate.votes_frame(items, votes))


def length_controlled(prefs: pd.DataFrame) -> list[dict]:
    """The report's length-controlled rows (analysis.judge_metrics) of one judge's item preferences."""
    # The metric reads only the item preferences, oriented as the report orients them, and the options.
    data = judge_metrics.JudgeData(
        judge="sim",
        kind="simulated",
        votes=None,
        prefs=prefs.assign(orientation=compute._orientation(prefs)),
        cluster_index=None,
        counts=None,
        groups=[],
        semantics={},
        options=compute.Options(),
        asked=None,
        pairs=None,
    )
    return judge_metrics.length_controlled(data)


def interval(found: list[dict], metric: str, group: str) -> list[float]:
    row = one(found, metric=metric, group=group)
    return [row["ci_lo"], row["ci_hi"]]


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
        "orientation": compute._orientation(prefs),
    }


@pytest.fixture(scope="module")
def length_biased():
    return judged_items(length_per_token=0.03, position=0.3)


@pytest.mark.parametrize("group", GROUPS)
def test_swapping_one_groups_sides_gives_it_one_minus_its_rate_and_leaves_the_others(length_biased, group):
    ahead = length_controlled(length_biased)
    swapped = length_controlled(swap_sides(length_biased, group))
    # The ridge penalty chosen, which the length slope's note names.
    assert one(ahead, metric="length_slope")["note"] == one(swapped, metric="length_slope")["note"]
    for g in GROUPS:
        for metric, tolerance in (("lc_winrate", 1e-6), ("raw_winrate", 1e-12)):
            value = estimate(ahead, metric=metric, group=g)
            expected = 1 - value if g == group else value
            assert estimate(swapped, metric=metric, group=g) == pytest.approx(expected, abs=tolerance), g
    lo, hi = interval(ahead, "lc_winrate", group)
    assert interval(swapped, "lc_winrate", group) == pytest.approx([1 - hi, 1 - lo], abs=1e-6)


def test_the_length_bias_was_planted_where_the_swap_is_tested(length_biased):
    # Without a length preference in the data the swap test would test less.
    result = length_controlled(length_biased)
    assert estimate(result, metric="length_slope", group=CONTROL) > 0.3
    raw, controlled = (estimate(result, metric=m, group="rich_content") for m in ("raw_winrate", "lc_winrate"))
    assert raw - controlled > 0.05


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
    assert estimate(result, metric="lc_winrate", group=CONTROL) == pytest.approx(0.5, abs=1e-9)
    assert estimate(result, metric="lc_winrate", group="reference") == pytest.approx(0.5, abs=1e-9)
    assert estimate(result, metric="lc_winrate", group="rich_content") > 0.55


def test_running_it_again_gives_exactly_the_same_numbers(length_biased):
    assert length_controlled(length_biased) == length_controlled(length_biased.copy())


def dense_hessian(model: lc.Model, x: np.ndarray) -> np.ndarray:
    """The whole Hessian from its arrow-shaped parts (for scipy's optimisers)."""
    A, B, D = model.hessian(x)
    return np.block([[A, B], [B.T, np.diag(D)]])


def test_the_fit_reaches_the_global_optimum(length_biased):
    d, _, _ = lc.items(**arrays(length_biased))
    model = lc.Model(d, 1.0)
    best = model.fit()
    value, grad = model.objective(best)
    assert np.abs(grad).max() < 1e-6
    # Strictly convex: the Hessian is positive definite everywhere (here at the optimum and
    # at a random point), so this optimum is the only one.
    rng = np.random.default_rng(0)
    for x in (best, rng.normal(0, 3, best.size)):
        assert np.linalg.eigvalsh(dense_hessian(model, x)).min() > 0
    for _ in range(5):
        start = rng.normal(0, 3, best.size)
        other = minimize(model.objective, start, jac=True, method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 0}).x
        assert model.objective(other)[0] >= value - 1e-9
        assert other == pytest.approx(best, abs=1e-3)


def test_newton_stops_at_the_optimum_when_floating_point_keeps_the_gradient_above_its_tolerance():
    """Items of hundreds of millions of votes: the summed loss is so large that its gradient
    cannot get below GTOL in floating point, and the fit still stops, at the optimum scipy's
    trust-region Newton finds from another start. (No item has all its votes on one side: a
    question whose items all go one way has its γ_q where, at these weights, the loss is flat
    to floating point, and two optimisers may stop at different places along it.)"""
    rng = np.random.default_rng(0)
    n_q = 60
    groups = np.repeat(["control", "reference"], n_q)
    args = arrays_of(groups, np.tile(np.arange(n_q), 2), rng.normal(0, 30, 2 * n_q), rng.integers(1, 6, 2 * n_q) / 6)
    d, _, _ = lc.items(**args, weight=rng.integers(1, 7, 2 * n_q) * 1e8)
    model = lc.Model(d, 0.1)
    best = model.fit()
    assert np.linalg.norm(model.objective(best)[1]) > lc.GTOL  # the case this test is about
    start = rng.normal(0, 1, best.size)
    reference = minimize(model.objective, start, jac=True, hess=lambda x: dense_hessian(model, x), method="trust-exact")
    assert best == pytest.approx(reference.x, abs=1e-7)


def arrays_of(groups, questions, delta_len, y) -> dict:
    return {"groups": groups, "questions": questions, "delta_len": delta_len, "y": y}


def test_a_problem_without_items_is_its_penalty_alone_with_its_minimum_at_zero():
    empty = np.zeros(0)
    none = lc.Items(empty.astype(int), empty.astype(int), empty, empty, empty, empty, n_g=3, n_q=0, control=0)
    model = lc.Model(none, 1.0)
    best = model.fit()
    assert best.shape == (4,)  # three θ and φ
    assert (best == 0).all()
    value, grad = model.objective(best)
    assert value == 0 and (grad == 0).all()


def test_a_pure_length_preference_is_taken_out():
    # The judge likes length and nothing else: the perturbations add 15 and 25 words.
    prefs = judged_items(n_q=400, length_per_token=0.03, susceptibility={}, noise=0.5, tie_rate=0.0)
    result = length_controlled(prefs)
    assert estimate(result, metric="raw_winrate", group="reference") > 0.55
    assert estimate(result, metric="raw_winrate", group="rich_content") > 0.6
    for group in ("reference", "rich_content"):
        assert abs(estimate(result, metric="lc_winrate", group=group) - 0.5) < 0.03
        assert abs(estimate(result, metric="lc_effect", group=group)) < 0.03


def test_an_effect_that_is_not_about_length_is_kept():
    prefs = judged_items(n_q=400, susceptibility={"reference": 1.0}, noise=0.5)
    result = length_controlled(prefs)
    assert estimate(result, metric="lc_effect", group="reference") > 0.15
    assert abs(estimate(result, metric="lc_effect", group="rich_content")) < 0.06


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
    # Questions that differ a lot, read from many votes: a question's control item tells much
    # about its other items, and the held-out loss wants the question terms free.
    clear, _ = simulated_judge(np.random.default_rng(1), n_q=60, clarity=2.0, votes=20)
    assert lc.choose_lambda(lc.items(**clear)[0], (1e-3, 1e5), 3, 0)[0] == 1e-3
    # Questions all alike, one vote per item: a question term would only fit noise.
    alike, _ = simulated_judge(np.random.default_rng(1), n_q=60, clarity=0.0, votes=1)
    assert lc.choose_lambda(lc.items(**alike)[0], (1e-3, 1e5), 3, 0)[0] == 1e5


def test_every_rate_and_effect_has_an_interval_around_it(length_biased):
    result = length_controlled(length_biased)
    for key in ("lc_winrate", "raw_winrate", "lc_effect", "raw_effect"):
        for row in select(result, metric=key):
            lo, hi = row["ci_lo"], row["ci_hi"]
            assert lo < row["estimate"] < hi, (key, row["group"])
            assert hi - lo > 0.01
    assert {r["group"]: r["n"] for r in select(result, metric="lc_winrate")} == {g: 120 for g in GROUPS}


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
    assert select(length_controlled(judged_items(n_q=5).query("group != 'control'")), metric="lc_winrate") == []


def test_the_dashboard_rows_and_the_metrics_export_carry_each_interval():
    items = simulate.synthetic_items(30, seed=2)
    votes = simulate.simulate_votes(items, simulate.JudgeParams(length_per_token=0.02), votes_per_item=6, seed=2)
    result = compute.analyze(simulate.votes_frame(items, votes), study="s", votes_per_item=6)
    rows = tables.lc_rows(result)
    assert {r["group"] for r in rows} == set(GROUPS)
    for r in rows:
        assert r["lc_lo"] < r["lc"] < r["lc_hi"] and r["raw_lo"] < r["raw"] < r["raw_hi"]
        assert r["n"] == 30
    records = [dict(zip(exports.METRIC_COLUMNS, row, strict=True)) for row in exports.metric_records(result)]
    exported = [r for r in records if r["judge"] == "sim" and r["metric"] in ("lc_winrate", "lc_effect")]
    assert len(exported) == 4 + 3
    assert all(r["ci_lo"] < r["estimate"] < r["ci_hi"] and r["n"] == 30 for r in exported)


def test_questions_without_a_control_item_keep_the_properties(length_biased):
    missing = length_biased["question_id"] < 20
    prefs = length_biased[~(missing & (length_biased["group"] == CONTROL)).to_numpy()]
    ahead = length_controlled(prefs)
    swapped = length_controlled(swap_sides(prefs, "reference"))
    n_questions = {r["group"]: r["n"] for r in select(ahead, metric="lc_winrate")}
    assert n_questions[CONTROL] == 100 and n_questions["reference"] == 120

    def lc_winrate(found, group):
        return estimate(found, metric="lc_winrate", group=group)

    assert lc_winrate(swapped, "reference") == pytest.approx(1 - lc_winrate(ahead, "reference"), abs=1e-6)
    assert lc_winrate(swapped, "rich_content") == pytest.approx(lc_winrate(ahead, "rich_content"), abs=1e-6)


# Known truth by construction. A judge whose log-odds of preferring the competitor is
# logit(rate_g) + slope · tanh(Δlen / scale) + o · γ_q, γ_q ~ N(0, clarity²): its rate with
# Δlen = 0, over questions like these, is E[logistic(logit(rate_g) + γ)] (o = ±1 at random,
# γ symmetric), which Gauss–Hermite quadrature computes.

RATES = {"control": 0.3, "a": 0.02, "b": 0.5, "c": 0.7, "d": 0.98}


def simulated_judge(rng, *, n_q=150, rates=RATES, slope=0.0, clarity=1.0, votes=6, longer=None, ties=0.0):
    """lc.fit's arguments for one judge, one item per group and question, and the judge's
    rates at Δlen = 0. ``longer`` adds to a group's Δlen (its competitor is made longer);
    Δlen otherwise varies with sd 40 around it; each vote is a tie with probability ``ties``."""
    names = list(rates)
    g = np.tile(np.arange(len(names)), n_q)
    q = np.repeat(np.arange(n_q), len(names))
    orientation = np.where(g == 0, 1.0, rng.choice([-1.0, 1.0], len(g)))
    delta_len = np.array([(longer or {}).get(n, 0.0) for n in names])[g] + rng.normal(0, 40, len(g))
    t = np.tanh(delta_len / lc.length_scale(delta_len, g))
    log_odds = logit(np.array(list(rates.values())))[g] + orientation * rng.normal(0, clarity, n_q)[q] + slope * t
    n_tie = rng.binomial(votes, ties, len(g))
    n_competitor = rng.binomial(votes - n_tie, expit(log_odds))
    args = {
        "groups": np.array(names)[g],
        "questions": q,
        "delta_len": delta_len,
        "y": (n_competitor + 0.5 * n_tie) / votes,
        "weight": np.full(len(g), float(votes)),
        "orientation": orientation,
    }
    nodes, weights = np.polynomial.hermite_e.hermegauss(60)
    truth = {n: float(expit(logit(r) + clarity * nodes) @ weights / weights.sum()) for n, r in rates.items()}
    return args, truth


@pytest.mark.parametrize("clarity", [0.0, 1.0])
@pytest.mark.parametrize("votes", [1, 6, 20])
def test_with_lengths_independent_of_the_votes_the_lc_rate_is_the_raw_rate(votes, clarity):
    """At raw rates from 2% to 98%, one group always much longer and one somewhat longer: no
    pull towards 50% (the estimator this replaced turned 10% into 30% at one vote per item)."""
    differences, raw = [], []
    for rep in range(10):
        rng = np.random.default_rng([votes, int(clarity), rep])
        args, _ = simulated_judge(rng, votes=votes, clarity=clarity, longer={"c": 150, "d": 30}, ties=0.1)
        result = lc.fit(**args)
        differences.append([result.lc_winrate[g] - result.raw_winrate[g] for g in RATES])
        raw.append([result.raw_winrate[g] for g in RATES])
    differences, raw = np.array(differences), np.array(raw)
    assert np.abs(differences).mean(axis=0).max() < 0.03
    # Averaged over replicates: no systematic difference (within three standard errors of the
    # replicates' mean), and none towards 50%.
    assert (np.abs(differences.mean(axis=0)) <= 3 * standard_error(differences) + 0.002).all()
    towards_half = (differences * np.sign(0.5 - raw)).mean(axis=1)
    assert towards_half.mean() <= 3 * standard_error(towards_half) + 0.001


def standard_error(replicates: np.ndarray) -> np.ndarray:
    return replicates.std(axis=0, ddof=1) / np.sqrt(len(replicates))


@pytest.fixture(scope="module")
def planted_length_effect():
    """200 judges with a strong length preference (slope 1 per unit of tanh), groups made
    longer and shorter, one always much longer, questions that differ (clarity 1)."""
    fits = []
    for rep in range(200):
        args, truth = simulated_judge(
            np.random.default_rng(rep), slope=1.0, longer={"a": 30, "b": -30, "c": 150}, clarity=1.0
        )
        fits.append(lc.fit(**args))
    return fits, truth


def test_a_planted_length_effect_is_taken_out_and_the_lc_rate_is_the_no_length_truth(planted_length_effect):
    fits, truth = planted_length_effect
    for g in RATES:
        lc_rates = np.array([f.lc_winrate[g] for f in fits])
        assert abs(lc_rates.mean() - truth[g]) < 0.006, g
    # The raw rates of the longer and shorter groups are far off: there was something to take out.
    assert np.mean([f.raw_winrate["c"] for f in fits]) - truth["c"] > 0.1
    assert np.mean([f.raw_winrate["b"] for f in fits]) - truth["b"] < -0.05
    assert np.mean([f.length_slope for f in fits]) == pytest.approx(1.0, abs=0.1)


def test_the_95_percent_intervals_cover_the_no_length_truth_at_about_the_nominal_rate(planted_length_effect):
    fits, truth = planted_length_effect
    for g in RATES:
        covered = np.mean([f.lc_ci[g][0] <= truth[g] <= f.lc_ci[g][1] for f in fits])
        assert 0.88 <= covered <= 0.99, (g, covered)
        if g != "control":
            effect = truth[g] - truth["control"]
            covered = np.mean([f.lc_effect_ci[g][0] <= effect <= f.lc_effect_ci[g][1] for f in fits])
            assert 0.88 <= covered <= 0.99, (g, covered)


def test_a_control_that_always_goes_to_a1_is_zero_percent_not_a_quarter():
    args, _ = simulated_judge(np.random.default_rng(0), rates={"control": 0.5, "a": 0.5})
    control = args["groups"] == "control"
    args["y"] = np.where(control, 0.0, args["y"])
    result = lc.fit(**args)
    assert result.raw_winrate["control"] == 0.0
    assert result.lc_winrate["control"] < 0.001
    lo, hi = result.lc_ci["control"]
    assert lo <= result.lc_winrate["control"] < hi and 0.01 < hi < 0.05
    assert abs(result.lc_winrate["a"] - result.raw_winrate["a"]) < 0.01


def test_the_length_scale_is_the_pooled_spread_within_groups():
    # By hand: group 0 has Δlen 10, 30 (mean 20), group 1 has 200, 220, 240 (mean 220):
    # squared deviations 100 + 100 + 400 + 0 + 400 = 1000 over 5 − 2 degrees of freedom.
    delta = np.array([10.0, 30.0, 200.0, 220.0, 240.0])
    groups = np.array([0, 0, 1, 1, 1])
    assert lc.length_scale(delta, groups) == pytest.approx(np.sqrt(1000 / 3))
    # A group always much longer moves nothing; negating one group's differences neither.
    assert lc.length_scale(delta + 1000 * groups, groups) == pytest.approx(np.sqrt(1000 / 3))
    assert lc.length_scale(np.where(groups == 1, -delta, delta), groups) == pytest.approx(np.sqrt(1000 / 3))


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("y", 1.5, "y must be a share between 0 and 1; row 3 has 1.5"),
        ("orientation", 2.0, "orientation must be +1, -1 or 0; row 3 has 2.0"),
        ("weight", -6.0, "weight must be a number of votes; row 3 has -6.0"),
    ],
)
def test_input_it_cannot_read_is_refused_by_column_and_row(column, value, message):
    args, _ = simulated_judge(np.random.default_rng(0), n_q=5)
    args[column] = args[column].copy()
    args[column][3] = value
    with pytest.raises(ValueError, match=re.escape(message)):
        lc.fit(**args)
    args, _ = simulated_judge(np.random.default_rng(0), n_q=5)
    with pytest.raises(ValueError, match="y has 24 rows, weight has 25"):
        lc.fit(**{**args, "y": args["y"][:-1]})
