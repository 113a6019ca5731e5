"""A report computed again takes each judge's part of the last report whose inputs have not
changed (report.analyze's judge_reports, kept by services.study_report in the default cache),
and is then exactly the report computed from nothing."""

import json

import numpy as np
import pandas as pd

from analysis import report, simulate
from analysis.frame import normalise
from analysis.simulate import JudgeParams


def _frame(seed: int = 0):
    items = simulate.synthetic_items(30, seed=seed)
    frames = []
    for j, kind in enumerate(("human", "llm", "llm")):
        votes = simulate.simulate_votes(items, JudgeParams(position=0.5 * j), votes_per_item=4, seed=seed + j)
        frames.append(simulate.votes_frame(items, votes, judge=f"judge-{j}", kind=kind))
    frame = normalise(pd.concat(frames, ignore_index=True))
    frame["vote_id"] = np.arange(len(frame))
    return frame


def _text(result: dict) -> str:
    return json.dumps(result, sort_keys=True, default=str)


def test_the_same_votes_again_take_every_part_and_give_the_same_report():
    frame, kept = _frame(), {}
    first = report.analyze(frame, study="s", judge_reports=kept)
    assert len(kept) == 3  # one part per judge
    keys = set(kept)
    again = report.analyze(frame, study="s", judge_reports=kept)
    assert _text(again) == _text(first) == _text(report.analyze(frame, study="s"))
    assert set(kept) == keys


def test_a_judge_with_changed_votes_is_computed_again_and_the_others_are_taken():
    frame, kept = _frame(), {}
    report.analyze(frame, study="s", judge_reports=kept)
    before = set(kept)
    changed = frame.copy()
    mask = (changed["judge"] == "judge-1").to_numpy() & (changed["choice"] == "a1").to_numpy()
    changed.loc[np.flatnonzero(mask)[:5], "choice"] = "a2"  # five of judge-1's verdicts turned
    result = report.analyze(changed, study="s", judge_reports=kept)
    assert _text(result) == _text(report.analyze(changed, study="s"))
    assert len(set(kept) & before) == 2 and len(kept) == 3  # judge-0 and judge-2 kept, judge-1 new


def test_other_options_take_no_part_of_the_last_report():
    frame, kept = _frame(), {}
    report.analyze(frame, study="s", judge_reports=kept)
    before = set(kept)
    options = report.Options(bootstrap=200)
    result = report.analyze(frame, study="s", options=options, judge_reports=kept)
    assert not set(kept) & before
    assert _text(result) == _text(report.analyze(frame, study="s", options=report.Options(bootstrap=200)))


def test_a_report_changed_by_its_reader_does_not_change_the_parts_kept():
    frame, kept = _frame(), {}
    first = report.analyze(frame, study="s", judge_reports=kept)
    expected = _text(first)
    first["judges"][0]["asr"].clear()
    first["judges"][1]["position"]["p_adjusted"] = "changed"
    assert _text(report.analyze(frame, study="s", judge_reports=kept)) == expected
