"""The issue-21 measures (accuracy against gold labels, position consistency and fairness,
repetition stability, self-preference) in the metrics CSV and the plain-text report, as they are
in ``analyze --json``; absent where their base is empty (n = 0)."""

import pytest
from django.template.loader import render_to_string

from analysis import exports, tables
from analysis.compute import analyze
from analysis.text import report_lines
from tests.analysis_frames import frame, item


def pair(item_id: int, first_pick: str, second_pick: str, judge: str, **kw) -> list[dict]:
    """One vote shown A1 first and one shown A2 first on item `item_id` (question = item)."""
    it = item(item_id, item_id, "control", 10 * item_id + 1, 10 * item_id + 2, **kw)
    rows = []
    for shown_first, pick in (("a1", first_pick), ("a2", second_pick)):
        shown = "tie" if pick == "tie" else "first" if pick == shown_first else "second"
        rows.append({**it, "judge": judge, "judge_kind": "llm", "choice": pick, "shown_first": shown_first})
        rows[-1]["choice_shown"] = shown
    return rows


def study_rows() -> list[dict]:
    # gpt-4 wrote A1 of both items, bard A2. The GPT-4 judge keeps A1 on item 1 (consistent, correct
    # in both orders) and takes the answer shown first on item 2 (primacy); Bard always takes A2.
    systems = {"a1_system": "gpt4", "a2_system": "bard"}
    rows = pair(1, "a1", "a1", "prd-gpt4", gold_label="a1", subset="S", **systems)
    rows += pair(2, "a1", "a2", "prd-gpt4", gold_label="a2", subset="T", **systems)
    rows += pair(1, "a2", "a2", "prd-bard", gold_label="a1", subset="S", **systems)
    rows += pair(2, "a2", "a2", "prd-bard", gold_label="a2", subset="T", **systems)
    return rows


@pytest.fixture
def result() -> dict:
    return analyze(frame(study_rows()), study="s", votes_per_item=2)


def records(result: dict) -> list[dict]:
    return [dict(zip(exports.METRIC_COLUMNS, row, strict=True)) for row in exports.metric_records(result)]


def test_the_metrics_csv_has_gold_accuracy_overall_and_by_subset(result):
    rows = {(r["judge"], r["metric"], r["subset"]): r for r in records(result)}
    both = rows[("prd-gpt4", "gold_accuracy_both", "")]
    assert both["estimate"] == pytest.approx(1 / 2) and both["n"] == 2
    assert rows[("prd-gpt4", "gold_accuracy_average", "")]["estimate"] == pytest.approx(3 / 4)
    assert rows[("prd-gpt4", "gold_accuracy_a1_first", "T")]["estimate"] == 0
    assert rows[("prd-gpt4", "gold_accuracy_a2_first", "T")]["estimate"] == 1
    assert rows[("prd-bard", "gold_accuracy_both", "T")]["estimate"] == 1


def test_the_metrics_csv_has_position_consistency_and_preference_fairness(result):
    rows = {(r["judge"], r["metric"], r["subset"]): r for r in records(result)}
    assert rows[("prd-gpt4", "position_consistency", "")]["estimate"] == pytest.approx(1 / 2)
    assert rows[("prd-gpt4", "primacy", "")]["estimate"] == pytest.approx(1 / 2)
    # Shi et al.'s sign: recency − primacy; the one inconsistent pair followed the first position.
    fairness = rows[("prd-gpt4", "preference_fairness", "")]
    assert fairness["estimate"] == pytest.approx(-1 / 2) and fairness["ci_lo"] is None
    assert rows[("prd-gpt4", "position_consistency", "T")]["estimate"] == 0
    assert rows[("prd-bard", "position_consistency", "")]["estimate"] == 1


def test_the_metrics_csv_has_self_preference_against_the_other_judges(result):
    rows = {(r["judge"], r["metric"]): r for r in records(result)}
    # GPT-4 scores its own A1: 1, ½·0 … per vote: item 1 both a1 (1, 1), item 2 a1 then a2 (1, 0).
    own = rows[("prd-gpt4", "self_preference_own")]
    assert own["estimate"] == pytest.approx(3 / 4) and own["group"] == "gpt-4"
    assert rows[("prd-gpt4", "self_preference_others")]["estimate"] == 0
    assert rows[("prd-gpt4", "self_preference_difference")]["estimate"] == pytest.approx(3 / 4)


def test_measures_with_an_empty_base_have_no_row():
    # One order only, no gold label, no system: nothing of the new measures can be computed.
    it = item(1, 1, "control", 11, 12)
    rows = [{**it, "judge": "J", "judge_kind": "llm", "choice": "a1", "shown_first": "a1", "choice_shown": "first"}]
    result = analyze(frame(rows), study="s", votes_per_item=1)
    metrics = {r["metric"] for r in records(result)}
    new = {"gold_accuracy", "position_consistency", "preference_fairness", "repetition_stability", "self_preference"}
    assert not {m for m in metrics if any(m.startswith(n) for n in new)}
    assert "position_first" in metrics  # the rest of the export is there
    lines = "\n".join(report_lines(result, verbose=True))
    assert "gold accuracy" not in lines and "position consistency" not in lines and "Self-preference" not in lines


def test_the_text_report_shows_the_new_measures_and_their_subsets_when_verbose(result):
    short = "\n".join(report_lines(result))
    assert "gold accuracy: A1 first 50.0%" in short and "correct in both orders 50.0%" in short
    assert "position consistency: 50.0%" in short and "preference fairness (recency - primacy) -50.0%" in short
    assert "prd-gpt4 (gpt-4): own 75.0%" in short
    assert "[T]" not in short
    verbose = "\n".join(report_lines(result, verbose=True))
    assert "gold accuracy [T]: A1 first 0.0%" in verbose and "position consistency [S]: 100.0%" in verbose


def test_the_dashboard_table_gives_each_rate_its_own_n(result):
    # Beside "Pairs" (the base of consistency), the rates with other bases carry theirs: the one
    # inconsistent pair for "first, of those", the votes per order for gold accuracy, and n = 0
    # where no request was repeated.
    rows, _ = tables.consistency_rows(result)
    html = render_to_string("analysis/_consistency.html", {"rows": rows, "by_subset": False})
    gpt4 = next(row for row in html.split("<tr>") if "prd-gpt4" in row)
    cells = [cell.split("</td>")[0] for cell in gpt4.split("<td>")[1:]]
    first_of_those, pairs, a1_first, a2_first, average, both, stability = cells[3:10]
    assert first_of_those.startswith("100.0%") and "n=1<" in first_of_those
    assert pairs.strip() == "2"
    assert a1_first.startswith("50.0%") and "n=2<" in a1_first
    assert a2_first.startswith("100.0%") and "n=2<" in a2_first
    assert "n=4<" in average and "n=2<" in both
    assert stability.startswith("n/a") and "n=0<" in stability
