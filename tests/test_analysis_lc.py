"""Length-controlled win rates: the win-rate properties and that length is taken out."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from analysis import lc


def data(seed=0, n_q=60, shift=0.8, length_slope=0.0):
    rng = np.random.default_rng(seed)
    groups = np.repeat(["control", "reference"], n_q)
    questions = np.tile(np.arange(n_q), 2)
    delta = np.concatenate([rng.normal(0, 20, n_q), rng.normal(40, 20, n_q)])
    logit = np.where(groups == "reference", shift, 0.0) + length_slope * delta + rng.normal(0, 0.5, 2 * n_q)
    votes = 6
    wins = rng.binomial(votes, 1 / (1 + np.exp(-logit)))
    return groups, questions, delta, wins / votes, np.full(2 * n_q, float(votes))


def test_swapping_the_sides_gives_one_minus_the_win_rate():
    g, q, d, y, w = data()
    ahead = lc.fit(g, q, d, y, w)
    swapped = lc.fit(g, q, -d, 1 - y, w)
    for group in ahead.groups:
        assert swapped.lc_winrate[group] == pytest.approx(1 - ahead.lc_winrate[group], abs=1e-5)
        assert swapped.raw_winrate[group] == pytest.approx(1 - ahead.raw_winrate[group])


def test_a_group_against_itself_wins_half_the_time():
    # Each game is played both ways round: the two sides are the same player.
    g, q, d, y, w = data(shift=1.5, length_slope=0.05)
    both = lc.fit(
        np.concatenate([g, g]),
        np.concatenate([q, q]),
        np.concatenate([d, -d]),
        np.concatenate([y, 1 - y]),
        np.concatenate([w, w]),
    )
    for group in both.groups:
        assert both.lc_winrate[group] == pytest.approx(0.5, abs=1e-6)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), shift=st.floats(-2, 2), slope=st.floats(-0.05, 0.05))
def test_the_win_rate_properties_hold_for_any_data(seed, shift, slope):
    g, q, d, y, w = data(seed=seed, n_q=20, shift=shift, length_slope=slope)
    ahead, swapped = lc.fit(g, q, d, y, w), lc.fit(g, q, -d, 1 - y, w)
    for group in ahead.groups:
        assert ahead.lc_winrate[group] + swapped.lc_winrate[group] == pytest.approx(1, abs=1e-4)


def test_length_control_removes_a_pure_length_preference():
    # The perturbed answers are ~40 words longer and the judge likes length, nothing else.
    g, q, d, y, w = data(n_q=400, shift=0.0, length_slope=0.03)
    fit = lc.fit(g, q, d, y, w)
    assert fit.raw_winrate["reference"] > 0.65
    assert abs(fit.lc_winrate["reference"] - 0.5) < 0.06
    assert fit.phi["reference"] > 0


def test_length_control_keeps_an_effect_that_is_not_about_length():
    g, q, d, y, w = data(n_q=400, shift=1.0, length_slope=0.0)
    fit = lc.fit(g, q, d, y, w)
    assert fit.lc_winrate["reference"] - fit.lc_winrate["control"] > 0.12


def test_there_is_nothing_to_fit_without_votes():
    assert lc.fit(np.array(["control"]), np.array([1]), np.array([3.0]), np.array([0.5]), np.array([0.0])) is None
