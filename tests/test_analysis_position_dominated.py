"""A judge that votes by display order is flagged, shows its tie share and is not ranked
(SPEC: "A position-dominated judge"; analysis.metrics, analysis.compute)."""

import pytest
from django.urls import reverse

from analysis import current_report, metrics, simulated_judges, tables
from analysis.simulate import JudgeParams
from tests.analysis_frames import frame, item, votes
from tests.factories import make_question, make_study, make_variant


def test_tied_items_are_the_share_of_item_preferences_that_are_ties():
    rows = []
    # Question 1: control A1 (2 to 0), reference item a tie (1 to 1). Question 2: control a tie
    # (1 tie, 1 tie), reference item A2 (0 to 2). Two ties in four item preferences: 50%.
    rows += votes(item(1, 1, "control", 1, 2), "a1 a1")
    rows += votes(item(2, 1, "reference", 1, 3), "a1 a2")
    rows += votes(item(3, 2, "control", 4, 5), "tie tie")
    rows += votes(item(4, 2, "reference", 4, 6), "a2 a2")
    found = metrics.items_tied(metrics.item_preferences(frame(rows)))
    assert found["value"] == 0.5 and found["n"] == 4
    lo, hi = found["ci"]
    assert lo < 0.5 < hi


def position(diff, p_adjusted):
    return {"diff": diff, "p_adjusted": p_adjusted}


@pytest.mark.parametrize(
    ("diff", "p", "ties", "flagged"),
    [
        (0.88, 1e-6, 0.9, True),  # SmolLM2's shape: first 94%, most items tied
        (0.6, 1e-4, 0.2, True),  # a large, significant Diff alone
        (-0.6, 1e-4, 0.2, True),  # towards the second position too
        (0.6, 0.2, 0.2, False),  # large but not significant (few questions)
        (0.4, 1e-9, 0.2, False),  # significant but below the threshold
        (0.0, 1.0, 0.6, True),  # most item preferences ties
        (0.0, 1.0, 0.5, False),  # half is not most
    ],
)
def test_a_judge_is_flagged_by_a_large_significant_diff_or_mostly_tied_items(diff, p, ties, flagged):
    reasons = metrics.position_dominated(position(diff, p), {"value": ties})
    assert bool(reasons) is flagged


@pytest.fixture
def two_judges(db):
    """Thirty questions with a reference variant; a judge that votes by position only and an
    honest one that reads the answers (a clear quality signal: it differs from what ignoring
    content would score, so it is ranked) with a mild pull towards the reference (6 votes per
    item, orders balanced)."""
    study = make_study(slug="dominated-s", votes_per_item=6)
    for i in range(30):
        make_variant(make_question(study), kind="reference", of="a2" if i % 2 else "a1")
    simulated_judges.judge_simulate(
        study=study, name="by-position", params=JudgeParams(position=8.0, tie_rate=0, noise=1.0), seed=1
    )
    simulated_judges.judge_simulate(
        study=study, name="honest", params=JudgeParams(susceptibility={"reference": 0.5}, noise=6.0), seed=3
    )
    return study


def test_a_position_only_judge_is_flagged_unranked_and_shows_its_tied_items(two_judges, staff_client):
    result = current_report.study_analyze(study=two_judges)
    table = {r["judge"]: r for r in tables.table1(result)["rows"]}
    by_position, honest = table["by-position"], table["honest"]
    # Three votes in each order, each for the answer shown first: every item a tie, ASR 0.
    [asr] = by_position["cells"]  # the one column: ASR reference
    assert (asr["value"], asr["rank"]) == (0.0, None)
    assert by_position["ties"]["value"] == 1.0
    assert len(by_position["position_dominated"]) == 2
    [asr] = honest["cells"]
    assert honest["position_dominated"] == []
    assert asr["rank"] == 1
    assert asr["value"] > 0  # worse than 0%, yet the only one ranked
    assert honest["ties"]["value"] < 0.5

    body = staff_client.get(reverse("analysis:study", args=["dominated-s"])).content.decode()
    assert "position-dominated: not ranked" in body  # in the whole study's table and each Bloom level's
    assert "#1" in body and "#2" not in body
    # Its tied items (Table 1) and its tied votes (Table 2) are two figures, each named by what it
    # counts, in the tables and in the glossary alike (a judge voting by position has 100% of one, 0% of the other).
    assert '<a href="#glossary-items_tied">Tied items</a></th>' in body
    assert '<a href="#glossary-votes_tied">Tied votes</a></th>' in body
    assert (
        '<dt id="glossary-items_tied">Tied items</dt>' in body
        and '<dt id="glossary-votes_tied">Tied votes</dt>' in body
    )
    csv = b"".join(staff_client.get(reverse("analysis:export", args=["dominated-s", "metrics"])).streaming_content)
    rows = [line.split(",") for line in csv.decode().splitlines()]
    header = rows[0]
    # The CSV is the metric table: the flag is a row's estimate, 1.0 or 0.0.
    flags = {
        r[header.index("judge")]: r[header.index("estimate")]
        for r in rows
        if r[header.index("metric")] == "position_dominated"
    }
    assert flags == {"by-position": "1.0", "honest": "0.0"}
    assert any(r[header.index("metric")] == "items_tied" and r[header.index("judge")] == "by-position" for r in rows)
