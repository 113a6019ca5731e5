"""Zheng et al. (2023), Table 2, reproduced from the imported MT-bench votes: agreement of the
GPT-4 pair judge with the experts, and of experts with each other, turn 1, with ties (setup S1)
and without (S2)."""

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command

from analysis import current_report, rows, stats, vote_pairs
from analysis.loader import study_frame
from annotations.models import Vote
from biasstudy.datasets import dataset_path
from tests.factories import make_study

MTBENCH = dataset_path("mtbench_human_judgments")
pytestmark = pytest.mark.dataset("mtbench_human_judgments")
SELF_PREFERENCE = ("self_preference_own", "self_preference_others", "self_preference_difference")


@pytest.fixture
def mtbench(db):
    study = make_study(status="draft", slug="mtbench")
    call_command("import_votes", str(MTBENCH), "--format", "mtbench", "--study", "mtbench", verbosity=0)
    return study


def expert_turn_one(study) -> pd.DataFrame:
    """Turn-1 items; of the people, the experts (FastChat's "human"; authors left out). An
    author's repeated vote is stored without its rater link, its rater id in ``meta``."""
    frame = study_frame(study)
    turn_one = frame["question_ext"].str.contains("-t1-").to_numpy()
    repeat = Vote.objects.filter(item__study=study, meta__rater__startswith="author_").values_list("id", flat=True)
    author = frame["rater"].astype(str).str.startswith("author_") | frame["vote_id"].isin(list(repeat))
    return frame[turn_one & ~author.to_numpy()]


def test_gpt4_and_expert_agreement_on_turn_one_match_the_paper(mtbench):
    votes = expert_turn_one(mtbench)
    index = pd.Index(np.unique(votes["cluster_id"].to_numpy()))
    counts = stats.bootstrap_counts(len(index), reps=200, seed=0)
    result = vote_pairs.vote_pair_agreement(votes, ["mtbench-human"], counts=counts, cluster_index=index)
    gpt4, humans = result["vs_humans"]["mtbench-gpt4-pair"], result["among_humans"]
    # FastChat's compute_agreement.py on the same files gives these counts (dataset README).
    assert (gpt4["with_ties"]["agree"], gpt4["with_ties"]["n"]) == (886, 1343)
    assert (gpt4["without_ties"]["agree"], gpt4["without_ties"]["n"]) == (727, 859)
    # Table 2 (first turn): GPT-4 vs human 66 % (S1) and 85 % (S2); human vs human 63 % and 81 %.
    assert round(gpt4["with_ties"]["value"] * 100) == 66
    assert round(gpt4["without_ties"]["value"] * 100) == 85
    assert round(humans["with_ties"]["value"] * 100) == 63
    assert round(humans["without_ties"]["value"] * 100) == 81
    for figure in (*gpt4.values(), *humans.values()):
        lo, hi = figure["ci"]
        assert lo < figure["value"] < hi


def test_the_report_names_both_conventions_beside_the_item_level_agreement(mtbench):
    table = current_report.study_analyze(study=mtbench)["rows"]
    conventions = {r["metric"] for r in rows.select(table, judge="mtbench-gpt4-pair", group="humans")}
    assert conventions == {"vote_pairs_with_ties", "vote_pairs_without_ties"}
    with_ties = rows.one(table, judge="mtbench-gpt4-pair", metric="vote_pairs_with_ties", group="humans")
    assert with_ties["n"] > 1343  # both turns, authors too
    assert rows.one(table, judge="mtbench-gpt4-pair", metric="agreement_vs_human_majority")  # the item-level figure
    # MT-bench answers carry their model: GPT-4's own answers against the experts' view.
    own, others, difference = (
        rows.one(table, judge="mtbench-gpt4-pair", metric=f"self_preference_{part}")
        for part in ("own", "others", "difference")
    )
    assert own["group"] == others["group"] == difference["group"] == "gpt-4"
    n_items = difference["n"]
    assert 0 < n_items <= 5 * 80 * 2  # items with gpt-4 against one of 5 models, 2 turns
    assert own["n"] == n_items  # one GPT-4 vote per item (both orders aggregated)
    assert others["n"] > 0
    assert rows.select(table, judge="mtbench-human", metric=SELF_PREFERENCE) == []  # people have no family
