"""The balanced plan of a judge run: display order, label order and label scheme of each vote. Pure.

Each vote has a display order (A1 or A2 shown first) and a label order: "ab" puts the answer
shown first under the scheme's first label (as a prompt normally reads), "ba" puts it under the
second label ("[B] … [A] …"). Label order is counterbalanced against display order so that a
judge's preference for a label can be told apart from its preference for a position.

The plan is built from *balanced halves*: two votes of one scheme, one in each display order,
the answer shown first under the first label in one and under the second label in the other.
So one answer keeps the first label in both: A1 in an "A1 half" [(A1 first, ab), (A2 first, ba)],
A2 in an "A2 half" [(A1 first, ba), (A2 first, ab)]. The plan's cycle lists every (half, scheme)
once with A1 and A2 halves alternating and the schemes rotating, then lists them all again with
the two votes of each half swapped (so that an odd count's extra vote falls on either order).
Item i takes its votes from the cycle starting at half i. Hence:

- each item's votes alternate halves: with 4 or more votes it has every (display order,
  label order) pair, with 2 a balanced half; its display orders differ by at most one vote and,
  within one display order, so do its label orders;
- over any 4 x (number of schemes) consecutive items, every (display order, label order,
  scheme) cell is used equally often.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

ORDERS = ("a1", "a2")
LABEL_ORDERS = ("ab", "ba")  # ab: the answer shown first is under the scheme's first label
# The two balanced halves, by which answer keeps the first label: (display order, label order).
_HALVES = {"a1": (("a1", "ab"), ("a2", "ba")), "a2": (("a1", "ba"), ("a2", "ab"))}


@dataclass(frozen=True)
class PlannedVote:
    round: int
    shown_first: str  # "a1" or "a2"
    scheme: str
    # How many earlier rounds of this item asked the very same prompt: keeps repeated
    # identical prompts apart in the response cache (and in the seed) so they stay independent.
    sample: int
    label_order: str = "ab"  # "ab" or "ba", see LABEL_ORDERS

    @property
    def labels_swapped(self) -> bool:
        return self.label_order == "ba"


def _cycle(schemes: list[str]) -> list[tuple[str, str, str]]:
    """(display order, label order, scheme) of every vote of one full cycle, 8 per scheme."""
    n = len(schemes)
    halves = []
    for k in range(2 * n):
        # With an even number of schemes, rotating schemes and alternating halves in step
        # would give each scheme one kind of half only; shifting the rotation once per round
        # of schemes gives every scheme both.
        shift = k // n if n % 2 == 0 else 0
        halves.append((schemes[(k + shift) % n], _HALVES[ORDERS[k % 2]]))
    forward = [(order, labels, scheme) for scheme, half in halves for order, labels in half]
    swapped = [(order, labels, scheme) for scheme, half in halves for order, labels in reversed(half)]
    return forward + swapped


def item_rounds(*, votes_per_item: int, schemes: list[str], item_index: int) -> list[PlannedVote]:
    if votes_per_item < 1:
        raise ValueError(f"votes_per_item must be at least 1, got {votes_per_item}")
    if not schemes:
        raise ValueError("at least one label scheme is needed")
    cycle = _cycle(schemes)
    seen: Counter[tuple[str, str, str]] = Counter()
    planned = []
    for r in range(votes_per_item):
        cell = cycle[(2 * item_index + r) % len(cycle)]
        order, label_order, scheme = cell
        planned.append(
            PlannedVote(round=r, shown_first=order, scheme=scheme, sample=seen[cell], label_order=label_order)
        )
        seen[cell] += 1
    return planned
