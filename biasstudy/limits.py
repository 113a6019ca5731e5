"""Bounds on numbers a researcher may ask for, the same wherever they are asked: the API's
inputs (api/inputs.py), the admin's forms and the management commands.

Seeds fit the signed 32-bit columns they are stored in (LLMJudge.seed, a perturbation's
provenance); bootstrap resamples and votes per item are bounded so that one request cannot
occupy a worker for hours.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

BOOTSTRAP_MAX = 10_000
SEED_MAX = 2**31 - 1
VOTES_PER_ITEM_MAX = 100


def int_argument(low: int, high: int) -> Callable[[str], int]:
    """An argparse `type` for a whole number in [low, high]: out of range, the command exits
    with "argument --x: must be at least <low> and at most <high>"."""

    def parse(text: str) -> int:
        value = int(text)  # a ValueError reads "invalid int value: '...'"
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be at least {low} and at most {high}, got {value}")
        return value

    parse.__name__ = "int"
    return parse
