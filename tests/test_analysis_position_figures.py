"""The dashboard's two "shown first" figures: the positional table's share of all votes (ties
included) and the position-and-label table's conditional effect (ties excluded). People, whose
labels never vary, get "not identifiable" in the second (analysis.tables, study.html)."""

import re

import pytest
from django.urls import reverse

from analysis import current_report, rows, simulated_judges, tables
from analysis.simulate import JudgeParams
from tests.factories import make_question, make_study


@pytest.fixture
def people_and_a_model(db):
    """People who tie often and lean left, as raters on the demo did, and an LLM judge run
    counterbalanced over 4 votes per item."""
    study = make_study(slug="first-figures", votes_per_item=4)
    for _ in range(24):
        make_question(study)
    simulated_judges.raters_simulate(study=study, raters=6, params=JudgeParams(position=0.5, tie_rate=0.37), seed=1)
    simulated_judges.judge_simulate(study=study, name="model", params=JudgeParams(position=0.5, label=0.4), seed=2)
    return study


def test_the_two_first_figures_differ_by_their_base_and_the_page_says_how(people_and_a_model, staff_client):
    result = current_report.study_analyze(study=people_and_a_model)
    shares = next(r for r in tables.table2(result) if r["kind"] == "human")
    effect = rows.one(result["rows"], judge=shares["judge"], metric="takes_first_label", convention="conditional")
    # Both figures from the same votes: the positional table's "first" counts ties in its base,
    # the effect leaves them out. With about a third of the votes tied, the share is far lower.
    decisive_first = shares["first"] / (shares["first"] + shares["second"])
    assert shares["tie"] > 0.25 and shares["first"] < decisive_first - 0.1
    # The effect's base is the decisive votes: all the positional table's votes but the ties.
    assert effect["n"] + round(shares["tie"] * shares["n"]) == shares["n"]

    body = staff_client.get(reverse("analysis:study", args=["first-figures"])).content.decode()
    table = body[body.index('id="position-and-label"') :]
    table = table[: table.index("</table>")]
    by_judge = {re.search(r'<td class="name">([^<]+)</td>', row).group(1): row for row in table.split("<tr>")[2:]}
    assert "not identifiable" in by_judge["Humans"] and "%" not in by_judge["Humans"]
    assert "not identifiable" not in by_judge["model"] and by_judge["model"].count("%") >= 2
    assert body.count('id="two-first-figures"') == 1
    assert "ties included" in body and "ties excluded" in body


def test_without_a_judge_whose_labels_varied_the_page_has_no_comparison_line(db, staff_client):
    study = make_study(slug="people-only", votes_per_item=4)
    for _ in range(6):
        make_question(study)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(position=0.5), seed=1)
    body = staff_client.get(reverse("analysis:study", args=["people-only"])).content.decode()
    assert "not identifiable" in body and 'id="two-first-figures"' not in body
