"""A judge that ran twice on a study counts once: its latest complete run per item, unless the
researcher picks runs (dashboard form, `analyze --runs`, the API's query string)."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from analysis import current_report, exports, rows
from analysis.forms import FilterForm
from annotations.models import ComparisonItem, Vote
from judges.models import JudgeRun
from tests.factories import human_pool, make_llm_judge, make_question, make_rater, make_study, make_vote


@pytest.fixture
def two_runs(db):
    """Three control items. Run 1 (older) voted A1 twice on each; run 2 (newer) voted A2 twice
    on the first two items but only once on the third (it was cancelled). A person voted once."""
    study = make_study(slug="runs-s", votes_per_item=2)
    items = [ComparisonItem.objects.get(question=make_question(study)) for _ in range(3)]
    judge = make_llm_judge().judge
    older = JudgeRun.objects.create(study=study, judge=judge, status="done", config={"votes_per_item": 2})
    newer = JudgeRun.objects.create(study=study, judge=judge, status="cancelled", config={"votes_per_item": 2})
    for item in items:
        for r in range(2):
            make_vote(item, judge, run_id=older.pk, round=r, choice_shown="first", choice="a1")
    for item in items[:2]:
        for r in range(2):
            make_vote(item, judge, run_id=newer.pk, round=r, choice_shown="second", choice="a2")
    make_vote(items[2], judge, run_id=newer.pk, round=0, choice_shown="second", choice="a2")
    make_vote(items[0], human_pool(study), rater=make_rater(study), choice_shown="first", choice="a1")
    return study, judge, older, newer


def analyze(study, **data):
    form = FilterForm(data, groups=[], known_runs=current_report.study_runs(study=study))
    assert form.is_valid(), form.errors
    return current_report.study_analyze(study=study, filters=form.filters())


def judge_row(result, judge):
    return next(j for j in result["judges"] if j["judge"] == judge.name)


def test_by_default_each_item_counts_the_latest_run_that_completed_it(two_runs):
    study, judge, older, newer = two_runs
    result = analyze(study)
    row = judge_row(result, judge)
    # Items 1 and 2 from the newer run (A2, shown second); item 3 from the older, complete one.
    assert row["n_votes"] == 6
    assert rows.estimate(result["rows"], judge=judge.name, metric="position_second", bloom="") == pytest.approx(4 / 6)
    assert row["runs"] == [older.id, newer.id]
    assert result["filters"]["excluded"]["other_run"] == 5
    assert result["filters"]["runs"] == "latest" and result["conventions"]["runs"] == "latest"
    humans = judge_row(result, human_pool(study))
    assert humans["n_votes"] == 1 and humans["runs"] == []


def test_all_runs_count_every_vote(two_runs):
    study, judge, _, _ = two_runs
    result = analyze(study, runs="all")
    assert judge_row(result, judge)["n_votes"] == 11
    assert result["filters"]["excluded"]["other_run"] == 0
    assert result["conventions"]["runs"] == "all"


def test_picked_runs_count_only_those_and_leave_votes_without_a_run_alone(two_runs):
    study, judge, older, _ = two_runs
    result = analyze(study, runs=str(older.id))
    row = judge_row(result, judge)
    assert row["n_votes"] == 6 and row["runs"] == [older.id]
    assert rows.estimate(result["rows"], judge=judge.name, metric="position_first", bloom="") == 1.0
    assert result["filters"]["runs"] == "picked" and result["filters"]["run_ids"] == [older.id]
    assert result["conventions"]["run_ids"] == [older.id]
    assert judge_row(result, human_pool(study))["n_votes"] == 1


def test_failed_requests_do_not_complete_an_item(two_runs):
    study, judge, older, newer = two_runs
    item = Vote.objects.filter(run_id=newer.pk, round=0).order_by("item_id").last().item
    make_vote(item, judge, run_id=newer.pk, round=1, choice_shown=None, choice=None, parse_status="failed")
    row = judge_row(analyze(study), judge)
    assert row["n_votes"] == 6  # the third item still comes from the older run


def test_the_form_names_what_is_wrong_with_the_runs_it_was_given(two_runs):
    study, _, _, newer = two_runs
    known = current_report.study_runs(study=study)
    form = FilterForm({"runs": "newest"}, groups=[], known_runs=known)
    assert not form.is_valid() and "newest" in form.errors["runs"][0]
    form = FilterForm({"runs": f"{newer.id},999"}, groups=[], known_runs=known)
    assert not form.is_valid() and form.errors["runs"] == ["no run 999 in this study"]


def test_the_command_takes_runs_and_says_which_it_used(two_runs):
    study, judge, _, _ = two_runs
    out = StringIO()
    call_command("analyze", "--study", study.slug, "--json", "--bootstrap", "50", "--runs", "all", stdout=out)
    result = json.loads(out.getvalue())
    assert result["filters"]["runs"] == "all" and judge_row(result, judge)["n_votes"] == 11


def test_the_votes_csv_names_the_runs_the_analysis_leaves_out(two_runs):
    study, judge, older, newer = two_runs
    records = list(exports.votes_rows(study))
    header, body = records[0], records[1:]
    because = [r[header.index("excluded_because")] for r in body]
    assert because.count("other_run") == 5
    counted = sum(r[header.index("counted")] for r in body)
    assert counted == current_report.study_analyze(study=study)["filters"]["n_votes_counted"] == 7
