"""Scoring models against a frozen instruction difficulty (analysis.lc_alpaca, "Frozen
difficulty"), against a known truth: the simulated leaderboards of test_lc_alpaca, and the
choice of the constants by cross-validation."""

import numpy as np
import pytest
from scipy.special import expit

from analysis import lc_alpaca
from tests.test_lc_alpaca import leaderboard


def frozen_from(rows, models=None):
    """The difficulty fitted on ``models`` (all when None) of these rows, frozen."""
    names = np.asarray(rows[0], dtype=object)
    keep = np.isin(names, list(models)) if models is not None else np.ones(len(names), bool)
    reference = lc_alpaca.fit(*(np.asarray(r)[keep] for r in rows))
    return lc_alpaca.FrozenDifficulty.from_fit(
        reference, slope_pooling=lc_alpaca.SLOPE_POOLING, difficulty_ridge=lc_alpaca.DIFFICULTY_RIDGE
    ), reference


def test_the_fitted_models_scored_against_their_frozen_difficulty_keep_their_joint_fit_lc():
    rows, _ = leaderboard(3)
    frozen, reference = frozen_from(rows)
    scored = lc_alpaca.score(*rows, frozen=frozen)
    for name in reference.models:
        assert scored.lc_winrate[name] == pytest.approx(reference.lc_winrate[name], abs=1e-6)
        assert scored.slope[name] == pytest.approx(reference.slope[name], abs=1e-6)
    assert scored.unknown_instructions == 0


def test_adding_a_model_moves_no_other_models_lc_against_a_frozen_difficulty():
    rows, _ = leaderboard(4)
    frozen, _ = frozen_from(rows, models=["m0", "m1", "m2", "m3", "m4"])
    names = np.asarray(rows[0], dtype=object)
    few = names != "m7"
    alone = lc_alpaca.score(*(np.asarray(r)[few] for r in rows), frozen=frozen)
    together = lc_alpaca.score(*rows, frozen=frozen)
    for name in alone.models:  # to the bit: each model's fit reads its own rows alone
        assert together.lc_winrate[name] == alone.lc_winrate[name]
        assert together.lc_interval[name] == alone.lc_interval[name]
    # The joint fit, in contrast, moves them.
    joint_alone = lc_alpaca.fit(*(np.asarray(r)[few] for r in rows))
    joint_together = lc_alpaca.fit(*rows)
    assert max(abs(joint_alone.lc_winrate[m] - joint_together.lc_winrate[m]) for m in alone.models) > 1e-3


def test_models_scored_against_a_difficulty_fitted_on_others_recover_their_planted_lc():
    """25 simulated leaderboards of 150 instructions: the four models at odd places scored
    against the difficulty of the other four. Bias and coverage of the 95 % interval over the
    100 held-out rates (γ taken as known, so somewhat under 95 %): 100 rates put a coverage of
    0.95 within ±0.045 (2 sd), enough to tell a sound interval from one that ignores clustering."""
    errors, covered = [], []
    for seed in range(25):
        rows, truth = leaderboard(200 + seed, n_instr=150)
        frozen, _ = frozen_from(rows, models=["m0", "m2", "m4", "m6"])
        names = np.asarray(rows[0], dtype=object)
        held = np.isin(names, ["m1", "m3", "m5", "m7"])
        scored = lc_alpaca.score(*(np.asarray(r)[held] for r in rows), frozen=frozen)
        for name in scored.models:
            errors.append(scored.lc_winrate[name] - truth[name])
            low, high = scored.lc_interval[name]
            covered.append(low <= truth[name] <= high)
    assert abs(np.mean(errors)) < 0.4
    assert np.median(np.abs(errors)) < 1.5
    assert 0.85 <= np.mean(covered) <= 0.99


def test_an_instruction_the_frozen_difficulty_does_not_know_gets_its_mean_and_is_counted():
    rows, _ = leaderboard(5, n_instr=50)
    frozen, _ = frozen_from(rows)
    names, instr, delta, y = (np.asarray(r) for r in rows)
    shifted = np.where(names == "m0", instr + 1000, instr)  # m0's instructions are all new
    scored = lc_alpaca.score(names, shifted, delta, y, frozen=frozen)
    assert scored.unknown_instructions == 50
    mean = np.mean(list(frozen.difficulty.values()))
    expected = 100 * expit(scored.theta["m0"] + mean)
    assert scored.lc_winrate["m0"] == pytest.approx(expected, abs=1e-9)


def test_choosing_the_constants_cross_validates_over_the_published_models():
    rows, truth = leaderboard(6, n_instr=60)
    table, best = lc_alpaca.choose_constants(*rows, truth, folds=4, pooling=(0.1, 10.0), ridge=(0.01,))
    assert [(r["slope_pooling"], r["difficulty_ridge"]) for r in table] == [(0.1, 0.01), (10.0, 0.01)]
    assert best == min(table, key=lambda r: r["mean"])
    # Each row's errors are of models held out: scoring one fold by hand gives its figure.
    held = [m for j, m in enumerate(sorted(truth, key=lambda m: -truth[m])) if j % 4 == 0]
    errors = lc_alpaca.held_out_errors(
        *rows, truth, fitted_on=[m for m in truth if m not in held], slope_pooling=0.1, difficulty_ridge=0.01
    )
    assert sorted(errors) == sorted(held)
    assert table[0]["max"] >= max(abs(e) for e in errors.values())
