"""frame.equals and frame.is_in: a text column compared by its category codes gives what comparing
its values gives, on categorical and plain columns, with missing values and absent values."""

import numpy as np
import pandas as pd
import pytest

from analysis import stats
from analysis.frame import equals, is_in, sorted_codes

VALUES = ["a1", "a2", None, "a1", ""]


@pytest.mark.parametrize("dtype", ["category", object])
def test_equals_marks_the_votes_with_that_value(dtype):
    column = pd.Series(VALUES, dtype=dtype)
    assert equals(column, "a1").tolist() == [True, False, False, True, False]
    assert equals(column, "").tolist() == [False, False, False, False, True]


@pytest.mark.parametrize("dtype", ["category", object])
def test_equals_of_a_value_no_vote_has_is_all_false(dtype):
    column = pd.Series(VALUES, dtype=dtype)
    out = equals(column, "tie")
    assert out.dtype == bool and not out.any() and len(out) == 5


def test_equals_of_an_empty_column_is_empty():
    assert len(equals(pd.Series([], dtype="category"), "a1")) == 0


@pytest.mark.parametrize("dtype", ["category", object])
def test_is_in_matches_isin_and_skips_absent_values(dtype):
    column = pd.Series(VALUES, dtype=dtype)
    assert is_in(column, ["a2", "", "tie"]).tolist() == [False, True, False, False, True]
    assert not is_in(column, ["tie"]).any()
    assert is_in(column, ["a1", "a2"]).tolist() == column.isin(["a1", "a2"]).tolist()


def test_cohen_kappa_names_a_label_outside_the_categories():
    with pytest.raises(KeyError, match="2"):
        stats.cohen_kappa(np.array([1, 0, 2]), np.array([1, 0, 0]))


def test_cohen_kappa_counts_each_pair_of_labels_once():
    # Hand-computed: agreement 3/4; marginals a = (1, 1, 2), b = (1, 0, 3) over (-1, 0, 1):
    # p_e = (1*1 + 1*0 + 2*3) / 16 = 7/16, kappa = (12/16 - 7/16) / (9/16) = 5/9.
    a = np.array([-1, 0, 1, 1])
    b = np.array([-1, 1, 1, 1])
    assert stats.cohen_kappa(a, b) == pytest.approx(5 / 9)


@pytest.mark.parametrize("dtype", ["category", object])
def test_sorted_codes_number_the_values_present_in_sorted_order(dtype):
    column = pd.Series(["ab", "xy", None, "", "ab", "a/b"], dtype=dtype)
    rows = np.array([True, True, True, True, True, False])
    codes, names = sorted_codes(column, rows)
    # "a/b" is in no row taken: only "", "ab", "xy" are numbered; the missing value is −1.
    assert names.tolist() == ["", "ab", "xy"]
    assert codes.tolist() == [1, 2, -1, 0, 1]


def test_sorted_codes_are_what_a_sorted_factorize_of_the_values_gives():
    column = pd.Series(list("dbcadbbd"), dtype=pd.CategoricalDtype(["d", "c", "b", "a", "z"]))
    rows = np.array([0, 2, 3, 5, 7])
    codes, names = sorted_codes(column, rows)
    expected_codes, expected_names = pd.factorize(column.to_numpy(dtype=object)[rows], sort=True)
    assert codes.tolist() == expected_codes.tolist() and names.tolist() == expected_names.tolist()
