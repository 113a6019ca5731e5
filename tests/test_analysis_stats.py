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


def test_bootstrap_counts_draw_every_resample_to_full_size_with_a_fixed_seed():
    counts = stats.bootstrap_counts(7, reps=50, seed=3)
    assert counts.shape == (50, 7) and (counts.sum(axis=1) == 7).all()
    assert (counts == stats.bootstrap_counts(7, reps=50, seed=3)).all()


def test_ranks_put_the_best_first_share_ties_and_skip_undefined():
    got = stats.ranks({"a": 0.1, "b": 0.3, "c": 0.1, "d": None}, lower_is_better=True)
    assert got == {"a": 1, "b": 3, "c": 1, "d": None}


def test_spearman_of_every_pair_is_spearman_over_the_units_both_rated():
    nan = np.nan
    # Three sets of rated units (columns 0 and 1 share one, 2 and 3 another, 4 its own), so
    # pairs across sets rank each column over the units it shares with the other.
    scores = np.array(
        [
            [1.0, 2.0, nan, nan, 3.0],
            [2.0, 1.0, 5.0, 1.0, nan],
            [3.0, 3.0, 4.0, 2.0, 1.0],
            [4.0, 5.0, 3.0, 3.0, 2.0],
            [5.0, 4.0, 2.0, 2.0, 5.0],
            [nan, nan, 1.0, 4.0, 4.0],
        ]
    )
    pairs = stats.spearman_pairs(scores)
    assert len(pairs) == 10
    for i, j, rho, n in pairs:
        both = ~np.isnan(scores[:, i]) & ~np.isnan(scores[:, j])
        assert n == both.sum()
        assert rho == pytest.approx(stats.spearman(scores[both, i], scores[both, j]))
    # By hand: columns 0 and 1 over rows 0-4 (ranks 1 2 3 4 5 and 2 1 3 5 4): 1 - 6·4 / (5·24) = 0.8.
    assert pairs[0] == (0, 1, pytest.approx(0.8), 5)


def test_spearman_over_fewer_than_three_shared_units_is_undefined():
    scores = np.array([[1.0, 2.0], [2.0, np.nan], [3.0, np.nan], [np.nan, 1.0]])
    assert stats.spearman_pairs(scores) == [(0, 1, None, 1)]


def test_centred_ranks_of_rows_rank_each_row_alone_ties_sharing_their_mean_rank():
    # Row 0: values coded 0 1 1 2 rank 1, 2.5, 2.5, 4 (mean 2.5); row 1: 2 0 1 0 rank 4, 1.5, 3, 1.5.
    got = stats.centred_ranks_of_rows(np.array([[0, 1, 1, 2], [2, 0, 1, 0]]))
    assert [r.tolist() for r, _ in got] == [[-1.5, 0.0, 0.0, 1.5], [1.5, -1.0, 0.5, -1.0]]
    assert [square for _, square in got] == [4.5, 4.5]


def test_centred_ranks_of_rows_are_bit_for_bit_those_of_each_row_ranked_alone():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 7, size=(5, 301))
    for row, (ranks, square) in zip(codes, stats.centred_ranks_of_rows(codes), strict=True):
        alone = stats._centred_ranks(row, 7)
        assert ranks.tobytes() == alone.tobytes() and square == float(alone @ alone)


def test_centred_ranks_of_rows_over_no_units_are_empty():
    assert [(r.tolist(), s) for r, s in stats.centred_ranks_of_rows(np.zeros((2, 0), dtype=np.int64))] == [
        ([], 0.0),
        ([], 0.0),
    ]
