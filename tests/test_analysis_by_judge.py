"""frame.by_judge: each judge's votes in their order, as a groupby over the judge gives them."""

import pandas as pd

from analysis.frame import by_judge


def votes(judges: list) -> pd.DataFrame:
    return pd.DataFrame(
        {"judge": pd.Categorical(judges), "vote": range(len(judges))}, index=range(10, 10 + len(judges))
    )


def test_it_gives_each_judge_its_votes_in_their_order_with_their_labels():
    parts = by_judge(votes(["K", "J", "K", "J", "J"]))
    assert sorted(parts) == ["J", "K"]
    assert parts["J"]["vote"].tolist() == [1, 3, 4] and parts["J"].index.tolist() == [11, 13, 14]
    assert parts["K"]["vote"].tolist() == [0, 2] and parts["K"].index.tolist() == [10, 12]


def test_it_is_what_a_groupby_over_the_judge_gives():
    frame = votes(["b", "a", "c", "a", "b", "b", "c"])
    expected = dict(iter(frame.groupby("judge", observed=True)))
    parts = by_judge(frame)
    assert parts.keys() == expected.keys()
    for name, part in parts.items():
        pd.testing.assert_frame_equal(part, expected[name])


def test_votes_sorted_by_judge_already_are_split_as_they_are():
    parts = by_judge(votes(["J", "J", "K"]))
    assert parts["J"]["vote"].tolist() == [0, 1] and parts["K"]["vote"].tolist() == [2]


def test_votes_without_a_judge_belong_to_none():
    parts = by_judge(votes([None, "J", None]))
    assert list(parts) == ["J"] and parts["J"]["vote"].tolist() == [1]


def test_no_votes_give_no_judges():
    assert by_judge(votes([])) == {}
