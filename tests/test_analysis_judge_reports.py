"""A report computed again takes each judge's part of the last report whose inputs have not
changed (report.analyze's judge_reports, kept by services.study_report in the default cache),
and is then exactly the report computed from nothing."""

import json

import numpy as np
import pandas as pd
import pytest
from django.core.cache import cache

from analysis import report, services, simulate
from analysis.frame import normalise
from analysis.simulate import JudgeParams
from tests.factories import make_question, make_study, make_variant


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


@pytest.fixture
def live_study(db):
    study = make_study(slug="live-s", votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="word " * (5 + 3 * i), a2="a longer answer " * 4, bloom_level="applying")
        make_variant(q, kind="factual_error", text="wrong " * 10)
    services.judge_simulate(study=study, name="sim", params=JudgeParams(position=1.0), seed=1)
    services.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def test_a_live_study_report_after_new_votes_is_the_report_computed_from_nothing(live_study):
    cache.clear()
    services.study_report(study=live_study)  # the parts kept
    services.judge_simulate(study=live_study, name="another", params=JudgeParams(position=-1.0), seed=3)
    with_parts = services.study_report(study=live_study)
    cache.clear()
    assert _text(with_parts) == _text(services.study_report(study=live_study))
    assert {j["judge"] for j in with_parts["judges"]} >= {"sim", "another"}
