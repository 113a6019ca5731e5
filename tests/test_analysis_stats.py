"""Intervals, tests and agreement coefficients against published or hand-computed values."""

import numpy as np
import pytest

from analysis import stats


def test_wilson_matches_the_textbook_values():
    assert stats.wilson(0, 10) == (0.0, pytest.approx(0.2775, abs=1e-4))
    lo, hi = stats.wilson(5, 10)
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))


def test_wilson_of_nothing_is_undefined():
    assert stats.wilson(0, 0) == (None, None)


def test_fleiss_kappa_matches_the_wikipedia_example():
    table = np.array(
        [
            [0, 0, 0, 0, 14],
            [0, 2, 6, 4, 2],
            [0, 0, 3, 5, 6],
            [0, 3, 9, 2, 0],
            [2, 2, 8, 1, 1],
            [7, 7, 0, 0, 0],
            [3, 2, 6, 3, 0],
            [2, 5, 3, 2, 2],
            [6, 5, 2, 1, 0],
            [0, 2, 2, 3, 7],
        ]
    )
    assert stats.fleiss_kappa(table) == pytest.approx(0.210, abs=1e-3)


def test_krippendorff_alpha_matches_krippendorffs_own_nominal_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 coders, 12 units.
    units = [
        [1, 1, 1],
        [2, 2, 3, 2],
        [3, 3, 3, 3],
        [3, 3, 3, 3],
        [2, 2, 2, 2],
        [1, 2, 3, 4],
        [4, 4, 4, 4],
        [1, 1, 2, 1],
        [2, 2, 2, 2],
        [5, 5, 5],
        [1, 1],
        [3],
    ]
    table = np.zeros((len(units), 5))
    for u, values in enumerate(units):
        for v in values:
            table[u, v - 1] += 1
    assert stats.krippendorff_alpha_nominal(table) == pytest.approx(0.743, abs=1e-3)


def test_agreement_is_undefined_when_nobody_disagrees_or_nothing_is_pairable():
    assert stats.krippendorff_alpha_nominal(np.array([[3, 0], [2, 0]])) is None
    assert stats.fleiss_kappa(np.array([[1, 0]])) is None


def test_cohen_kappa_by_hand():
    assert stats.cohen_kappa(np.array([1, 1, -1, -1]), np.array([1, -1, -1, -1])) == pytest.approx(0.5)


def test_the_binomial_test_of_first_against_second():
    assert stats.binomial_p(5, 10) == pytest.approx(1.0)
    assert stats.binomial_p(10, 10) == pytest.approx(2 / 1024)
    assert stats.binomial_p(0, 0) is None


def test_bootstrap_counts_draw_every_resample_to_full_size_with_a_fixed_seed():
    counts = stats.bootstrap_counts(7, reps=50, seed=3)
    assert counts.shape == (50, 7) and (counts.sum(axis=1) == 7).all()
    assert (counts == stats.bootstrap_counts(7, reps=50, seed=3)).all()


def test_ranks_put_the_best_first_share_ties_and_skip_undefined():
    got = stats.ranks({"a": 0.1, "b": 0.3, "c": 0.1, "d": None}, lower_is_better=True)
    assert got == {"a": 1, "b": 3, "c": 1, "d": None}
