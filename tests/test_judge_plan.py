from collections import Counter

import pytest

from judges.plan import item_rounds


def test_six_votes_use_each_order_three_times():
    rounds = item_rounds(votes_per_item=6, schemes=["answer12"], item_index=0)
    assert [r.round for r in rounds] == list(range(6))
    assert Counter(r.shown_first for r in rounds) == {"a1": 3, "a2": 3}


def test_it_balances_orders_on_every_item_and_schemes_over_the_items():
    schemes = ["answer12", "ab"]
    pairs = Counter()
    for index in range(8):
        rounds = item_rounds(votes_per_item=6, schemes=schemes, item_index=index)
        assert Counter(r.shown_first for r in rounds) == {"a1": 3, "a2": 3}
        pairs.update((r.shown_first, r.scheme) for r in rounds)
    assert set(pairs.values()) == {12}


def test_three_schemes_and_six_votes_use_every_order_and_scheme_once():
    rounds = item_rounds(votes_per_item=6, schemes=["answer12", "ab", "symbols"], item_index=5)
    assert len({(r.shown_first, r.scheme) for r in rounds}) == 6


def test_an_odd_count_alternates_which_order_gets_the_extra_vote():
    extra = [
        Counter(r.shown_first for r in item_rounds(votes_per_item=3, schemes=["ab"], item_index=i)) for i in (0, 1)
    ]
    assert extra == [{"a1": 2, "a2": 1}, {"a1": 1, "a2": 2}]


def test_repeated_prompts_of_an_item_get_distinct_sample_numbers():
    rounds = item_rounds(votes_per_item=6, schemes=["answer12"], item_index=0)
    assert [(r.shown_first, r.sample) for r in rounds] == [
        ("a1", 0),
        ("a2", 0),
        ("a1", 1),
        ("a2", 1),
        ("a1", 2),
        ("a2", 2),
    ]


def test_it_rejects_an_empty_plan():
    with pytest.raises(ValueError, match="votes_per_item"):
        item_rounds(votes_per_item=0, schemes=["ab"], item_index=0)
    with pytest.raises(ValueError, match="label scheme"):
        item_rounds(votes_per_item=2, schemes=[], item_index=0)
