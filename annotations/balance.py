"""Which display order an item needs next: the pure rule behind balanced assignment.

An item needs `quota` counted votes, half with A1 on the left and half with A2 on the left.
`a1` and `a2` are the votes already counted plus the slots reserved by open leases, per order.
Handing out the lagging order keeps the two within one of each other while collecting and
equal at completion when the quota is even. A late vote on an expired lease can push an
item past its quota on one side; the item is then offered again on the other side until the
two are balanced again (at most one apart for an odd quota).
"""

from __future__ import annotations

A1_FIRST = "a1"
A2_FIRST = "a2"


def needs_more(a1: int, a2: int, quota: int) -> bool:
    """True while the item wants another vote (for quota or for balance)."""
    return a1 + a2 < quota or abs(a1 - a2) > quota % 2


def next_order(a1: int, a2: int, quota: int, *, tie_break: str = A1_FIRST) -> str | None:
    """The order to show next ("a1" or "a2"), or None when the item is complete.

    `tie_break` decides when both orders are equally filled (callers pass a random one so
    raters do not all see A1 on the left first).
    """
    if a1 < 0 or a2 < 0 or quota < 1:
        raise ValueError(f"next_order: counts must be >= 0 and quota >= 1, got a1={a1}, a2={a2}, quota={quota}")
    if tie_break not in (A1_FIRST, A2_FIRST):
        raise ValueError(f"next_order: tie_break must be 'a1' or 'a2', got {tie_break!r}")
    if not needs_more(a1, a2, quota):
        return None
    if a1 == a2:
        return tie_break
    return A1_FIRST if a1 < a2 else A2_FIRST
