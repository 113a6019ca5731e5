"""The pure rule that decides which display order an item needs next."""

import itertools

import pytest

from annotations.balance import needs_more, next_order


def test_it_hands_out_the_lagging_order():
    assert next_order(2, 1, 6) == "a2"
    assert next_order(0, 1, 6) == "a1"


def test_it_uses_the_tie_break_when_both_orders_are_level():
    assert next_order(1, 1, 6, tie_break="a2") == "a2"
    assert next_order(1, 1, 6, tie_break="a1") == "a1"


def test_it_stops_at_the_quota_when_balanced():
    assert next_order(3, 3, 6) is None
    assert not needs_more(3, 3, 6)


def test_an_odd_quota_completes_one_apart():
    assert next_order(2, 1, 3) is None
    assert next_order(1, 1, 3, tie_break="a2") == "a2"


def test_a_late_vote_past_the_quota_is_rebalanced_on_the_other_side():
    # A late vote on an expired lease left A1-left one ahead at the quota.
    assert next_order(4, 3, 6) == "a2"
    assert next_order(5, 3, 6) == "a2"


@pytest.mark.parametrize("quota", [1, 2, 3, 6, 7])
def test_following_it_keeps_orders_within_one_and_fills_the_quota_exactly(quota):
    for tie_breaks in itertools.product(["a1", "a2"], repeat=quota):
        a1 = a2 = 0
        for tie in tie_breaks:
            order = next_order(a1, a2, quota, tie_break=tie)
            if order is None:
                break
            a1, a2 = (a1 + 1, a2) if order == "a1" else (a1, a2 + 1)
            assert abs(a1 - a2) <= 1
        assert next_order(a1, a2, quota) is None
        assert a1 + a2 == quota
        assert abs(a1 - a2) == quota % 2


def test_it_rejects_impossible_counts_with_a_clear_message():
    with pytest.raises(ValueError, match="quota >= 1"):
        next_order(0, 0, 0)
    with pytest.raises(ValueError, match="tie_break"):
        next_order(0, 0, 2, tie_break="left")
