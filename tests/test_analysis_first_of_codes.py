"""stats.first_of_codes: where each code first occurs, for codes numbered in order of first
appearance, as numpy's sorted unique with return_index gives it."""

import numpy as np

from analysis import stats


def test_it_gives_the_position_of_each_codes_first_vote():
    # codes 0 1 0 2 1 2 3: first seen at 0, 1, 3, 6
    assert stats.first_of_codes(np.array([0, 1, 0, 2, 1, 2, 3])).tolist() == [0, 1, 3, 6]


def test_one_code_repeated_first_occurs_at_the_start():
    assert stats.first_of_codes(np.array([0, 0, 0])).tolist() == [0]


def test_no_codes_give_no_positions():
    out = stats.first_of_codes(np.array([], dtype=np.int64))
    assert len(out) == 0


def test_it_matches_a_sorted_unique_on_cluster_codes():
    rng = np.random.default_rng(1)
    codes = stats.cluster_codes(rng.integers(0, 50, 500), rng.integers(0, 3, 500))
    assert stats.first_of_codes(codes).tolist() == np.unique(codes, return_index=True)[1].tolist()
