"""AlpacaEval 2.0's length-controlled leaderboard reproduced from its own annotation files: the
29 models of ``../shared/datasets/alpaca_eval`` imported with ``import_votes --format
alpaca_eval`` and fitted by the AlpacaEval-compatible LC (analysis.lc_alpaca), against the
leaderboard's ``length_controlled_winrate`` (docs/REPRODUCTIONS.md, "AlpacaEval 2.0").

The constants were chosen by cross-validation over the 29 models (docs/STATISTICS.md); the
bounds hold on all of them and on each half of the leaderboard's LC order (odd and even places).
The raw win rates are reproduced exactly (they are the mean of the imported preferences)."""

import csv
import io
import json

import numpy as np
import pytest
from django.core.management import call_command
from scipy.stats import kendalltau, spearmanr

from analysis import alpaca_difficulty
from biasstudy.datasets import dataset_path
from tests.factories import make_study

ALPACA = dataset_path("alpaca_eval")
JUDGE = "weighted_alpaca_eval_gpt4_turbo"
pytestmark = [pytest.mark.slow, pytest.mark.dataset("alpaca_eval/leaderboard.csv")]


def leaderboard() -> dict[str, dict]:
    with (ALPACA / "leaderboard.csv").open(encoding="utf-8", newline="") as fh:
        return {row[""]: row for row in csv.DictReader(fh)}


def test_the_leaderboard_is_reproduced_from_the_annotation_files(db):
    """One import (it takes most of the time), then every check on it."""
    study = make_study(status="draft", slug="alpaca-eval")
    # Its time is a benchmark's figure (docs/BENCHMARKS.md), not a test's.
    call_command(
        "import_votes", str(ALPACA / "annotations"), "--format", "alpaca_eval", "--study", study.slug, verbosity=0
    )
    fit = alpaca_difficulty.study_lc_alpaca(study=study)[JUDGE]
    check_the_29_files_become_one_question_per_model_and_instruction(study)
    check_the_raw_win_rates_are_the_leaderboards_exactly(fit)
    check_the_lc_win_rates_are_the_leaderboards_within_a_point_and_none_beyond_three(fit)
    check_the_ranking_is_kept_up_to_neighbours_the_leaderboard_puts_within_a_point(fit)
    check_the_analyze_command_prints_the_table(study, fit)


def check_the_29_files_become_one_question_per_model_and_instruction(study):
    assert study.questions.count() == 29 * 805
    assert study.questions.values("text").distinct().count() == 805


def check_the_raw_win_rates_are_the_leaderboards_exactly(fit):
    published = leaderboard()
    assert sorted(fit.models) == sorted(published)
    for model, row in published.items():
        assert fit.raw_winrate[model] == pytest.approx(float(row["win_rate"]), abs=1e-9)


def errors(fit, models) -> np.ndarray:
    published = leaderboard()
    return np.array([fit.lc_winrate[m] - float(published[m]["length_controlled_winrate"]) for m in models])


def check_the_lc_win_rates_are_the_leaderboards_within_a_point_and_none_beyond_three(fit):
    published = leaderboard()
    order = sorted(published, key=lambda m: float(published[m]["length_controlled_winrate"]))
    for half in (order, order[0::2], order[1::2]):  # all, the tuning half, the held-out half
        off = np.abs(errors(fit, half))
        assert np.median(off) <= 1.0, half
        assert off.max() <= 3.0, half


def check_the_ranking_is_kept_up_to_neighbours_the_leaderboard_puts_within_a_point(fit):
    published = leaderboard()
    models = sorted(published)
    ours = [fit.lc_winrate[m] for m in models]
    theirs = [float(published[m]["length_controlled_winrate"]) for m in models]
    assert spearmanr(ours, theirs)[0] > 0.99
    assert kendalltau(ours, theirs)[0] > 0.97
    # Every pair in the other order is a pair the leaderboard itself separates by under a point.
    for a in models:
        for b in models:
            if fit.lc_winrate[a] > fit.lc_winrate[b] and theirs[models.index(a)] < theirs[models.index(b)]:
                assert theirs[models.index(b)] - theirs[models.index(a)] < 1.0, (a, b)


def check_the_analyze_command_prints_the_table(study, fit):
    out = io.StringIO()
    call_command("analyze", "--study", study.slug, "--lc", "alpaca_eval", stdout=out)
    lines = out.getvalue().splitlines()
    assert JUDGE in lines[0] and "805 instructions" in lines[0]
    best = max(fit.models, key=fit.lc_winrate.get)
    assert lines[2].split()[0] == best and float(lines[2].split()[3]) == round(fit.lc_winrate[best], 2)
    out = io.StringIO()
    call_command("analyze", "--study", study.slug, "--lc", "alpaca_eval", "--json", stdout=out)
    rows = json.loads(out.getvalue())[JUDGE]
    assert [r["model"] for r in rows] == [line.split()[0] for line in lines[2:]]
