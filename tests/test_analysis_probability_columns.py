"""A vote's option probabilities become three numbers in the votes frame: NaN for a vote without
them, 0 for an option its probabilities do not name, the same from dicts as from their JSON."""

import json
import math

import numpy as np
import pandas as pd

from analysis.frame import probability_columns

VOTES = [{"first": 0.5, "second": 0.25, "tie": 0.25}, None, {"first": 0.75, "second": 0.25}, {"first": None}, {}]


def _rows(columns: dict[str, np.ndarray]) -> list[tuple]:
    return list(zip(columns["prob_first"], columns["prob_second"], columns["prob_tie"], strict=True))


def test_each_vote_gets_its_three_probabilities_and_a_vote_without_them_nan():
    rows = _rows(probability_columns(pd.Series(VOTES, dtype=object)))
    assert rows[0] == (0.5, 0.25, 0.25)
    assert all(math.isnan(p) for p in rows[1])
    assert rows[2] == (0.75, 0.25, 0.0)  # no tie named: 0
    assert rows[3] == (0.0, 0.0, 0.0) and rows[4] == (0.0, 0.0, 0.0)


def test_json_texts_give_the_same_numbers_as_the_dicts():
    texts = pd.Series([None if v is None else json.dumps(v) for v in VOTES], dtype=object)
    from_texts, from_dicts = probability_columns(texts), probability_columns(pd.Series(VOTES, dtype=object))
    for col in from_dicts:
        np.testing.assert_array_equal(from_texts[col], from_dicts[col])


def test_no_votes_or_none_with_probabilities():
    assert all(len(v) == 0 for v in probability_columns(pd.Series([], dtype=object)).values())
    assert all(np.isnan(v).all() for v in probability_columns(pd.Series([None, None], dtype=object)).values())
