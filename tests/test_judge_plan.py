from collections import Counter

import pytest

from judges.plan import item_rounds


def cells(rounds):
    return Counter((r.shown_first, r.label_order) for r in rounds)


def first_label_first(rounds):
    """How often the answer shown first is under the scheme's first label."""
    return Counter(r.label_order == "ab" for r in rounds)


def test_six_votes_use_each_order_three_times():
    rounds = item_rounds(votes_per_item=6, schemes=["answer12"], item_index=0)
    assert [r.round for r in rounds] == list(range(6))
    assert Counter(r.shown_first for r in rounds) == {"a1": 3, "a2": 3}


@pytest.mark.parametrize("index", range(8))
def test_six_votes_of_every_item_balance_label_orders_within_each_display_order(index):
    rounds = item_rounds(votes_per_item=6, schemes=["ab"], item_index=index)
    for order in ("a1", "a2"):
        assert sorted(Counter(r.label_order for r in rounds if r.shown_first == order).values()) == [1, 2]
    assert first_label_first(rounds) == {True: 3, False: 3}


@pytest.mark.parametrize("index", range(4))
def test_four_votes_of_an_item_use_every_display_order_and_label_order_once(index):
    rounds = item_rounds(votes_per_item=4, schemes=["ab"], item_index=index)
    assert cells(rounds) == {("a1", "ab"): 1, ("a1", "ba"): 1, ("a2", "ab"): 1, ("a2", "ba"): 1}


@pytest.mark.parametrize("index", range(4))
def test_two_votes_are_a_balanced_half(index):
    rounds = item_rounds(votes_per_item=2, schemes=["ab"], item_index=index)
    assert Counter(r.shown_first for r in rounds) == {"a1": 1, "a2": 1}
    # One vote has the answer shown first under the first label, the other under the second.
    assert first_label_first(rounds) == {True: 1, False: 1}


def test_the_first_half_gives_the_first_label_to_the_answer_shown_first_then_to_the_one_shown_second():
    rounds = item_rounds(votes_per_item=2, schemes=["ab"], item_index=0)
    assert [(r.shown_first, r.label_order) for r in rounds] == [("a1", "ab"), ("a2", "ba")]


@pytest.mark.parametrize("votes", [1, 2, 3, 5, 6, 7])
@pytest.mark.parametrize("schemes", [["ab"], ["answer12", "ab"], ["answer12", "ab", "symbols"]])
def test_over_the_items_every_order_label_order_and_scheme_cell_is_used_equally_often(votes, schemes):
    used = Counter()
    for index in range(4 * len(schemes)):
        used.update((r.shown_first, r.label_order, r.scheme) for r in item_rounds(
            votes_per_item=votes, schemes=schemes, item_index=index
        ))  # fmt: skip
    assert len(used) == 4 * len(schemes)
    assert set(used.values()) == {votes}


@pytest.mark.parametrize("schemes", [["answer12", "ab"], ["answer12", "ab", "symbols"], ["a", "b", "c", "d"]])
def test_with_several_schemes_every_item_still_has_every_order_and_label_order_pair(schemes):
    for index in range(4 * len(schemes)):
        rounds = item_rounds(votes_per_item=6, schemes=schemes, item_index=index)
        assert len(cells(rounds)) == 4
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
    assert [(r.shown_first, r.label_order, r.sample) for r in rounds] == [
        ("a1", "ab", 0),
        ("a2", "ba", 0),
        ("a1", "ba", 0),
        ("a2", "ab", 0),
        ("a2", "ba", 1),
        ("a1", "ab", 1),
    ]


def test_it_rejects_an_empty_plan():
    with pytest.raises(ValueError, match="votes_per_item"):
        item_rounds(votes_per_item=0, schemes=["ab"], item_index=0)
    with pytest.raises(ValueError, match="label scheme"):
        item_rounds(votes_per_item=2, schemes=[], item_index=0)
