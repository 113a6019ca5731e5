"""AlpacaEval's LC for models a study did not have when its difficulty was frozen: each half of
the 29 leaderboard models of ``../shared/datasets/alpaca_eval`` (odd and even places of the
published order) scored against a difficulty fitted on the other half, with the constants in
use, against the leaderboard's ``length_controlled_winrate`` (docs/REPRODUCTIONS.md, "Models
added to a frozen difficulty"). The command reads the annotation files as the import does and
fits as the study does (lc_alpaca.fit, FrozenDifficulty, score)."""

import io
import json

import pytest
from django.core.management import call_command

from biasstudy.datasets import dataset_path

ALPACA = dataset_path("alpaca_eval")
pytestmark = [pytest.mark.slow, pytest.mark.dataset("alpaca_eval")]


def test_each_half_scored_against_the_other_halfs_difficulty_stays_within_the_bounds():
    out = io.StringIO()
    call_command(
        "lc_alpaca_constants",
        str(ALPACA / "annotations"),
        "--leaderboard",
        str(ALPACA / "leaderboard.csv"),
        "--halves",
        "--json",
        stdout=out,
    )
    halves = json.loads(out.getvalue())
    assert [h["models"] for h in halves] == [15, 14]
    for half in halves:
        assert half["median"] <= 1.0, half
        assert half["max"] <= 3.0, half
        assert half["spearman"] >= 0.98, half
    every = [abs(e) for half in halves for e in half["errors"].values()]
    assert len(every) == 29 and sorted(every)[14] <= 1.0
