"""docs/REPRODUCTIONS.md's PRD (Vicuna-80) tables, recomputed from the whole data set: each LLM
judge's position preference, its agreement with the human votes (vote pairs with and without
ties, and per item against the human majority) and self-preference, as written there. The PRD
paper's own figures could not be read here (the section says so): these hold our figures to
what the document tells a reader they will get."""

import pytest
from django.core.management import call_command

from analysis import current_report, rows
from analysis.judge_metrics import POSITION_METRICS
from annotations.models import Study
from biasstudy.datasets import dataset_path

PRD = dataset_path("prd_vicuna80_lfqa")
pytestmark = [pytest.mark.slow, pytest.mark.dataset("prd_vicuna80_lfqa")]

# judge: votes, first, second, tie (%), as in the position table
POSITION = {
    "prd-gpt4": (5107, 55.7, 30.2, 14.0),
    "prd-claude": (1600, 33.3, 58.6, 8.2),
    "prd-gpt35": (1760, 40.0, 41.0, 19.0),
    "prd-bard": (1600, 78.3, 18.1, 3.6),
    "prd-vicuna-13b": (1600, 39.4, 57.6, 2.9),
    "prd-human": (7040, 45.6, 43.0, 11.4),
}
# judge: vote pairs with ties, without (%), item agreement with the human majority (%), kappa, items
AGREEMENT = {
    "prd-gpt4": (52.8, 65.5, 55.5, 0.30, 2560),
    "prd-claude": (57.1, 68.6, 55.0, 0.32, 800),
    "prd-gpt35": (57.6, 73.8, 64.0, 0.40, 800),
    "prd-bard": (53.0, 60.1, 37.9, 0.17, 800),
    "prd-vicuna-13b": (49.7, 56.9, 33.4, 0.11, 800),
}
# judge: items, own, others (%), difference and its interval (pp), the pairs of one Vicuna
# question resampled together (their prompt key)
SELF_PREFERENCE = {
    "prd-gpt4": (640, 88.5, 72.5, 16.0, 14.0, 17.8),
    "prd-bard": (320, 36.3, 31.6, 4.7, 1.5, 7.7),
    "prd-vicuna-13b": (320, 44.1, 40.0, 4.1, 0.4, 7.4),
    "prd-claude": (320, 67.0, 66.3, 0.7, -2.4, 3.9),
    "prd-gpt35": (320, 30.9, 37.9, -7.1, -9.7, -4.4),
}


def pct(value: float) -> float:
    """A share as the document prints it: a percentage to one decimal, a half rounded either way
    (0.3325 is written 33.3%)."""
    return round(100 * value + 1e-9, 1)


def position_preferences(table: list[dict]) -> None:
    for name, (n, first, second, tie) in POSITION.items():
        found = {
            share: rows.one(table, judge=name, metric=POSITION_METRICS[share], bloom="")
            for share in ("first", "second", "tie")
        }
        shares = (pct(found["first"]["estimate"]), pct(found["second"]["estimate"]), pct(found["tie"]["estimate"]))
        assert (found["first"]["n"], *shares) == (n, first, second, tie)


def agreement_with_the_human_votes(table: list[dict]) -> None:
    def vote_pairs(judge: str) -> tuple[float, ...]:
        return tuple(
            pct(rows.estimate(table, judge=judge, metric=f"vote_pairs_{convention}", group="humans"))
            for convention in ("with_ties", "without_ties")
        )

    for name, (with_ties, without_ties, agreement, kappa, items) in AGREEMENT.items():
        assert vote_pairs(name) == (with_ties, without_ties), name
        item = rows.one(table, judge=name, metric="agreement_vs_human_majority")
        item_kappa = rows.estimate(table, judge=name, metric="cohen_kappa_vs_human_majority")
        assert (pct(item["estimate"]), round(item_kappa, 2), item["n"]) == (agreement, kappa, items), name
    assert vote_pairs("humans") == (51.5, 63.3)  # people among themselves


def self_preference(table: list[dict]) -> None:
    for name, (items, own, others, difference, lo, hi) in SELF_PREFERENCE.items():
        found = {
            part: rows.one(table, judge=name, metric=f"self_preference_{part}")
            for part in ("own", "others", "difference")
        }
        gap = found["difference"]  # its n: the items
        assert (gap["n"], pct(found["own"]["estimate"]), pct(found["others"]["estimate"])) == (items, own, others)
        assert [pct(gap["estimate"]), pct(gap["ci_lo"]), pct(gap["ci_hi"])] == [difference, lo, hi], name


def test_the_prd_figures_of_reproductions_md_are_what_its_commands_give(db):
    # The documented commands: import the whole folder with --create, then the study's report
    # (the one analyze --json prints).
    call_command("import_votes", str(PRD), "--format", "prd", "--study", "prd", "--create", verbosity=0)
    table = current_report.study_analyze(study=Study.objects.get(slug="prd"))["rows"]
    position_preferences(table)
    agreement_with_the_human_votes(table)
    self_preference(table)
