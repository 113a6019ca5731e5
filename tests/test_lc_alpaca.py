"""The AlpacaEval-compatible LC fit against a known truth: simulated leaderboards with planted
model strengths, length slopes and instruction difficulties (analysis.lc_alpaca)."""

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from analysis import lc_alpaca

THETAS = np.array([-3.0, -2.0, -1.2, -0.5, 0.0, 0.6, 1.2, 2.0])
# Longer and shorter models than the baseline, so the raw rate is off the truth by length.
MEAN_DELTA = np.array([800.0, -400.0, 1200.0, 0.0, 300.0, -800.0, 1500.0, 200.0])


def leaderboard(seed: int, *, slope: float = 1.0, slope_spread: float = 0.05, n_instr: int = 300, soft: bool = True):
    """(rows, true LC per model in percent): each of the models answers every instruction; the
    judge's probability follows the model with γ_i ~ N(0, 1); y is that probability seen through
    Beta noise (a soft label) or a Bernoulli vote."""
    rng = np.random.default_rng(seed)
    gamma = rng.normal(0.0, 1.0, n_instr)
    slopes = slope + rng.normal(0.0, slope_spread, len(THETAS))
    model = np.repeat(np.arange(len(THETAS)), n_instr)
    instr = np.tile(np.arange(n_instr), len(THETAS))
    delta = rng.normal(MEAN_DELTA[model], 600.0)
    sd = pd.Series(delta).groupby(model).std().to_numpy()
    p = expit(THETAS[model] + slopes[model] * np.tanh(delta / sd[model]) + gamma[instr])
    y = rng.beta(4 * p + 0.01, 4 * (1 - p) + 0.01) if soft else (rng.random(len(p)) < p).astype(float)
    truth = {f"m{k}": 100 * float(expit(THETAS[k] + gamma).mean()) for k in range(len(THETAS))}
    names = np.array([f"m{k}" for k in range(len(THETAS))], dtype=object)[model]
    return (names, instr, delta, y), truth


def test_it_recovers_planted_lc_rates_without_bias_and_its_intervals_cover_them():
    errors, covered, raw_errors = [], [], []
    for seed in range(30):
        rows, truth = leaderboard(seed)
        result = lc_alpaca.fit(*rows)
        for name, true in truth.items():
            errors.append(result.lc_winrate[name] - true)
            raw_errors.append(result.raw_winrate[name] - true)
            low, high = result.lc_interval[name]
            covered.append(low <= true <= high)
    errors = np.array(errors)
    assert abs(errors.mean()) < 0.3  # points: no bias
    assert np.median(np.abs(errors)) < 1.2
    assert np.median(np.abs(raw_errors)) > 3 * np.median(np.abs(errors))  # the length effect was there
    assert 0.90 <= np.mean(covered) <= 0.99


def test_votes_instead_of_soft_labels_recover_the_truth_too():
    errors = []
    for seed in range(10):
        rows, truth = leaderboard(100 + seed, soft=False)
        result = lc_alpaca.fit(*rows)
        errors += [result.lc_winrate[name] - true for name, true in truth.items()]
    assert abs(np.mean(errors)) < 0.5
    assert np.median(np.abs(errors)) < 2.0


def test_planted_slopes_and_difficulties_are_recovered():
    rows, _ = leaderboard(7, slope=1.5, n_instr=600)
    result = lc_alpaca.fit(*rows)
    assert result.common_slope == pytest.approx(1.5, abs=0.15)
    assert all(abs(s - 1.5) < 0.2 for s in result.slope.values())
    rng = np.random.default_rng(7)
    gamma = rng.normal(0.0, 1.0, 600)
    fitted = np.array([result.difficulty[i] for i in range(600)])
    # γ is known up to a shift traded with θ: compare centred.
    assert np.corrcoef(fitted, gamma)[0, 1] > 0.8
    theta = np.array([result.theta[f"m{k}"] for k in range(len(THETAS))])
    shift = np.mean(fitted - gamma)
    assert np.abs(theta + shift - THETAS).max() < 0.25


def test_without_a_length_effect_the_lc_rate_is_the_raw_rate_up_to_noise():
    gaps = []
    for seed in range(10):
        rows, _ = leaderboard(200 + seed, slope=0.0, slope_spread=0.0)
        result = lc_alpaca.fit(*rows)
        gaps += [result.lc_winrate[m] - result.raw_winrate[m] for m in result.models]
    assert abs(np.mean(gaps)) < 0.5
    assert np.max(np.abs(gaps)) < 3.0


def test_the_fit_reaches_the_optimum_a_general_optimiser_finds():
    rows, _ = leaderboard(3, n_instr=40)
    result = lc_alpaca.fit(*rows)
    names, instr, delta, y = rows
    m = pd.factorize(pd.Series(names), sort=True)[0]
    n_m, n_i = m.max() + 1, 40
    sd = pd.Series(delta).groupby(m).std().to_numpy()
    t = np.tanh(delta / sd[m])
    lam = lc_alpaca.SLOPE_POOLING * n_i

    def loss(b):
        theta, phi, bar, gamma = b[:n_m], b[n_m : 2 * n_m], b[2 * n_m], b[2 * n_m + 1 :]
        eta = theta[m] + phi[m] * t + gamma[instr]
        return (
            np.sum(np.logaddexp(0, eta) - y * eta)
            + 0.5 * lam * np.sum((phi - bar) ** 2)
            + 0.5 * lc_alpaca.THETA_RIDGE * np.sum(theta**2)
            + 0.5 * lc_alpaca.DIFFICULTY_RIDGE * np.sum(gamma**2)
        )

    ours = np.concatenate(
        [
            [result.theta[f"m{k}"] for k in range(n_m)],
            [result.slope[f"m{k}"] for k in range(n_m)],
            [result.common_slope],
            [result.difficulty[i] for i in range(n_i)],
        ]
    )
    other = minimize(loss, np.zeros_like(ours), method="L-BFGS-B", options={"maxiter": 5000, "gtol": 1e-10})
    assert loss(ours) <= other.fun + 1e-6
    assert lc_alpaca.fit(*rows).lc_winrate == result.lc_winrate  # and again, to the bit


def test_a_model_identical_to_the_baseline_wins_half():
    rows, _ = leaderboard(5)
    names, instr, delta, y = rows
    same = np.unique(instr)
    result = lc_alpaca.fit(
        np.concatenate([names, ["baseline"] * len(same)]),
        np.concatenate([instr, same]),
        np.concatenate([delta, np.zeros(len(same))]),
        np.concatenate([y, np.full(len(same), 0.5)]),
    )
    assert result.lc_winrate["baseline"] == pytest.approx(50, abs=1.5)
    assert result.raw_winrate["baseline"] == 50


@pytest.mark.parametrize(
    ("y", "delta", "message"),
    [([0.5, 1.2], [1, 2], r"\[0, 1\]"), ([0.5, np.nan], [1, 2], r"\[0, 1\]"), ([0.5, 0.5], [1, np.inf], "finite")],
)
def test_bad_input_is_refused_naming_what(y, delta, message):
    with pytest.raises(ValueError, match=message):
        lc_alpaca.fit(["a", "b"], [0, 0], delta, y)


def test_rows_of_unequal_length_are_refused():
    with pytest.raises(ValueError, match="one value per row"):
        lc_alpaca.fit(["a"], [0, 1], [1, 2], [0.5, 0.5])


def frame(**columns) -> pd.DataFrame:
    base = {
        "a2_system": ["m1", "m1", "m2"],
        "subset": ["m1", "m1", "m2"],
        "question_ext": ["m1#0", "m1#1", "m2#0"],
        "len_a1_chars": [100.0, 50.0, 100.0],
        "len_a2_chars": [150.0, 20.0, 100.0],
        "choice": ["a2", "tie", "a1"],
        "shown_first": ["a1", "a1", "a1"],
        "prob_first": [np.nan, np.nan, np.nan],
        "prob_second": [np.nan, np.nan, np.nan],
        "prob_tie": [np.nan, np.nan, np.nan],
    }
    return pd.DataFrame({**base, **columns})


def test_a_frame_gives_each_vote_its_model_instruction_length_difference_and_preference():
    models, instructions, delta, y = lc_alpaca.frame_inputs(frame())
    assert list(models) == ["m1", "m1", "m2"]
    assert list(instructions) == ["0", "1", "0"]  # one instruction across models
    assert list(delta) == [50, -30, 0]
    assert list(y) == [1.0, 0.5, 0.0]


def test_option_probabilities_are_used_as_soft_labels_in_whichever_order_was_shown():
    probs = frame(
        shown_first=["a1", "a2", "a1"],
        prob_first=[0.3, 0.8, np.nan],
        prob_second=[0.7, 0.2, np.nan],
        prob_tie=[0.0, 0.0, np.nan],
    )
    assert list(lc_alpaca.frame_inputs(probs)[3]) == pytest.approx([0.7, 0.8, 0.0])


def test_a_frame_without_models_is_refused_naming_the_question():
    with pytest.raises(ValueError, match="m1#0"):
        lc_alpaca.frame_inputs(frame(a2_system=["", "", ""], subset=["", "", ""]))
