"""LLMBar reproduced: for every one of the 499 (subset, evaluator, strategy) result files of
Zeng et al. 2024, our accuracy shown in each order, their average, "correct in both orders" and
positional agreement equal the repository's statistics (``evaluator_statistics.csv``) exactly,
from the whole data set imported with ``import_votes --format llmbar`` and analysed by the same
report as every study (docs/REPRODUCTIONS.md, "LLMBar").

One convention differs and is reconstructed, not loosened: LLMBar's "equal" compares the two raw
winners, so a pair where neither output could be read counts as agreeing; in our position
consistency an unread verdict does not survive the swap, and such pairs are reported apart
(``pairs_both_unread``). Their "equal" is therefore (consistent + both unread) / n, checked exactly.
"""

import csv
from fractions import Fraction

import pytest
from django.core.management import call_command

from analysis import current_report, rows
from biasstudy.datasets import dataset_path
from tests.factories import make_study

LLMBAR = dataset_path("llmbar")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.dataset("llmbar/evaluator_votes.csv.gz"),
]


def published(text: str) -> tuple[int, int]:
    """ "29 / 54 = 53.70370370370371%" → (29, 54)."""
    hits, rest = text.split(" / ")
    return int(hits), int(rest.split(" = ")[0])


def count(found: dict) -> tuple[int, int]:
    """A rate's hits and base as whole numbers (the base counts one pair or vote per item)."""
    hits = found["estimate"] * found["n"]
    assert abs(hits - round(hits)) < 1e-6
    return round(hits), found["n"]


def test_every_llmbar_result_file_is_reproduced_exactly(db):
    study = make_study(status="draft", slug="llmbar")
    call_command("import_votes", str(LLMBAR), "--format", "llmbar", "--study", "llmbar", verbosity=0)
    table = current_report.study_analyze(study=study)["rows"]
    with (LLMBAR / "evaluator_statistics.csv").open(encoding="utf-8", newline="") as fh:
        files = list(csv.DictReader(fh))
    assert len(files) == 499
    mismatches = []
    for row in files:
        # One result file: its judge's rows on its subset, by metric.
        ours_of = {
            r["metric"]: r
            for r in rows.select(table, judge=f"{row['evaluator']} / {row['strategy']}", subset=row["subset"])
        }
        consistent, pairs = count(ours_of["position_consistency"])
        ours = {
            "correct_False": count(ours_of["gold_accuracy_a1_first"]),
            "correct_True": count(ours_of["gold_accuracy_a2_first"]),
            "correct_both": count(ours_of["gold_accuracy_both"]),
            "equal": (consistent + round(ours_of["pairs_both_unread"]["estimate"]), pairs),
        }
        theirs = {key: published(row[key]) for key in ours}
        # The average as a fraction: (correct_False + correct_True) / 2n, against their percentage.
        average = Fraction(ours["correct_False"][0] + ours["correct_True"][0], 2 * ours["correct_False"][1])
        if (
            ours != theirs
            or ours_of["gold_accuracy_average"]["estimate"] != pytest.approx(float(average), abs=1e-12)
            or float(average) * 100 != pytest.approx(float(row["correct_average"].rstrip("%")), abs=1e-9)
        ):
            mismatches.append((row["subset"], row["evaluator"], row["strategy"], ours, theirs))
    assert mismatches == []
