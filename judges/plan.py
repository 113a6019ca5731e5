"""The balanced plan of a judge run: which order and label scheme each vote uses. Pure.

For one item, round r takes the r-th entry of the cycle (A1 first, scheme 1), (A2 first,
scheme 1), (A1 first, scheme 2), ... started at an offset that moves with the item, so each
item's votes alternate the two orders (exactly half each when the count is even) and, over
the items, every (order, scheme) pair is used equally often.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

ORDERS = ("a1", "a2")


@dataclass(frozen=True)
class PlannedVote:
    round: int
    shown_first: str  # "a1" or "a2"
    scheme: str
    # How many earlier rounds of this item asked the very same prompt: keeps repeated
    # identical prompts apart in the response cache (and in the seed) so they stay independent.
    sample: int


def item_rounds(*, votes_per_item: int, schemes: list[str], item_index: int) -> list[PlannedVote]:
    if votes_per_item < 1:
        raise ValueError(f"votes_per_item must be at least 1, got {votes_per_item}")
    if not schemes:
        raise ValueError("at least one label scheme is needed")
    cycle = [(order, scheme) for scheme in schemes for order in ORDERS]
    seen: Counter[tuple[str, str]] = Counter()
    planned = []
    for r in range(votes_per_item):
        order, scheme = cycle[(item_index + r) % len(cycle)]
        planned.append(PlannedVote(round=r, shown_first=order, scheme=scheme, sample=seen[(order, scheme)]))
        seen[(order, scheme)] += 1
    return planned
