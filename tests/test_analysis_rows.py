"""The metric table: every registered metric writes rows of its columns, a name is registered
once, a tiny study's rows carry the figures counted by hand, and the metrics CSV is the table."""

import csv
import io
import itertools
import math

import pytest

from analysis import exports, rows, simulate
from analysis.compute import analyze
from analysis.judge_metrics import POSITION_METRICS
from analysis.rows import JUDGE_METRICS, STUDY_METRICS, judge_metric, study_metric
from tests.analysis_frames import frame, item, votes


def simulated_study():
    """Control, non-semantic and degrading items, both display orders and both label orders:
    enough for most metrics to have rows."""
    items = simulate.synthetic_items(12, seed=1)
    cast = simulate.simulate_votes(
        items, simulate.JudgeParams(position=0.5), votes_per_item=4, seed=1, counterbalance_labels=True
    )
    return simulate.votes_frame(items, cast)


def test_every_registered_metric_yields_rows_with_exactly_the_columns(monkeypatch):
    made: dict[tuple[str, str], list] = {}
    for kind, registry in (("judge", JUDGE_METRICS), ("study", STUDY_METRICS)):
        for name, rows_of in list(registry.items()):

            def recording(data, rows_of=rows_of, key=(kind, name)):
                found = list(rows_of(data))
                made.setdefault(key, []).extend(found)
                return found

            monkeypatch.setitem(registry, name, recording)
    result = analyze(simulated_study(), study="s", votes_per_item=4)
    assert set(made) == {("judge", n) for n in JUDGE_METRICS} | {("study", n) for n in STUDY_METRICS}
    for key, found in made.items():
        assert all(tuple(r) == rows.COLUMNS for r in found), key
    with_rows = {name for (_, name), found in made.items() if found}
    core = {"asr", "items_tied", "position", "verbosity", "length_controlled", "label_and_position"}
    assert core | {"position_consistency", "random_judge", "human_nf_position"} <= with_rows
    assert all(tuple(r) == rows.COLUMNS for r in result["rows"]) and result["columns"] == list(rows.COLUMNS)


def test_a_name_is_registered_once():
    registered = JUDGE_METRICS["asr"]
    with pytest.raises(ValueError, match="registered already"):
        judge_metric("asr")(lambda data: [])
    with pytest.raises(ValueError, match="registered already"):
        study_metric("random_judge")(lambda data: [])
    assert JUDGE_METRICS["asr"] is registered


# Four questions, each a control item and a "reference" item with the same answers (A2 of the
# reference item is the control's A2 perturbed); two votes per item, the first shown A1 first,
# the second A2 first (tests.analysis_frames.votes).
HAND_VOTES = {
    # question: (control votes, reference votes)
    1: ("a1 a1", "a2 a2"),  # control A1 (in the base), reference A2: a hit
    2: ("a1 tie", "a1 a1"),  # control A1, reference A1: no hit
    3: ("a2 a2", "a2 a2"),  # control A2: not in the base
    4: ("tie tie", "tie a2"),  # control tie (in the base), reference A2: a hit
}


def hand_study():
    cast = []
    for q, (control, reference) in HAND_VOTES.items():
        cast += votes(item(2 * q, q, "control", 10 * q + 1, 10 * q + 2), control)
        cast += votes(item(2 * q + 1, q, "reference", 10 * q + 1, 10 * q + 2), reference)
    return frame(cast)


def test_a_tiny_studys_rows_carry_the_figures_counted_by_hand():
    table = analyze(hand_study(), study="s", votes_per_item=2)["rows"]
    # ASR: base = questions 1, 2, 4 (control A1 or tie); hits = 1 and 4.
    asr = rows.one(table, judge="J", metric="asr", group="reference", bloom="")
    assert asr["estimate"] == pytest.approx(2 / 3) and asr["n"] == 3 and asr["clusters"] == 3
    assert asr["ci_lo"] <= asr["estimate"] <= asr["ci_hi"]
    # Position over the 16 votes, per question (first, second, tie):
    # q1 (2, 2, 0), q2 (2, 1, 1), q3 (2, 2, 0), q4 (1, 0, 3) → 7, 5, 4.
    shares = {
        s: rows.estimate(table, judge="J", metric=POSITION_METRICS[s], bloom="") for s in ("first", "second", "tie")
    }
    assert shares == pytest.approx({"first": 7 / 16, "second": 5 / 16, "tie": 4 / 16})
    diff = rows.one(table, judge="J", metric="position_diff", bloom="")
    assert diff["estimate"] == pytest.approx(2 / 16) and diff["n"] == 16 and diff["clusters"] == 4
    # The clustered sign test: per-question sums of d (+1 first, −1 second) are 0, +1, 0, +1,
    # so z = 2 / √2 and p = 2(1 − Φ(√2)) = erfc(1). Holm over J's overall and its one Bloom
    # level (the same votes; Human-NF has no votes, no test): 2p.
    assert diff["p_value"] == pytest.approx(math.erfc(1))
    assert diff["p_adjusted"] == pytest.approx(2 * math.erfc(1))
    remembering = rows.one(table, judge="J", metric="position_diff", bloom="remembering")
    assert remembering["estimate"] == pytest.approx(2 / 16)
    # One tied item preference (q4's control) of eight.
    assert rows.estimate(table, judge="J", metric="items_tied") == pytest.approx(1 / 8)
    assert rows.estimate(table, judge="J", metric="position_dominated") == 0.0


def test_the_metrics_csv_is_the_metric_table_line_for_line():
    result = analyze(hand_study(), study="s", votes_per_item=2)
    text = "".join(exports.csv_lines(itertools.chain([exports.METRIC_COLUMNS], exports.metric_records(result))))
    header, *lines = list(csv.reader(io.StringIO(text)))
    assert header == ["study", *rows.COLUMNS]
    assert len(lines) == len(result["rows"])
    for line, row in zip(lines, result["rows"], strict=True):
        assert line[:4] == ["s", row["judge"], row["kind"], row["metric"]]
    # p-values are numbers in the CSV (a program reads it), not the "< 0.001" of the pages.
    diff = next(dict(zip(header, line, strict=True)) for line in lines if line[3] == "position_diff")
    assert float(diff["p_value"]) == pytest.approx(math.erfc(1))
