"""CSV exports: they load into pandas unchanged, stream, and neutralise spreadsheet formulas."""

import csv
import io
from io import StringIO

import pandas as pd
import pytest
from django.core.management import CommandError, call_command

from analysis import current_report, exports, loader, rows, simulated_judges
from analysis.frame import Filters, exclusion_masks
from analysis.simulate import JudgeParams
from annotations.models import Vote
from tests.factories import make_judge, make_question, make_study, make_variant


@pytest.fixture
def exported_study(db):
    study = make_study(slug="exp-s", votes_per_item=2)
    for i in range(4):
        q = make_question(study, a1="=HYPERLINK(evil)" if i == 0 else "plain answer", a2="second answer here")
        make_variant(q, kind="rich_content", of="a1" if i % 2 else "a2")
    simulated_judges.judge_simulate(study=study, name="sim-x", params=JudgeParams(), seed=3)
    simulated_judges.raters_simulate(study=study, raters=3, params=JudgeParams(), votes_per_item=2, seed=4)
    llm = make_judge(
        name="llm-y", kind="llm", params={"backend": "openai", "model": "m-1", "prompt_style": "vote_only"}
    )
    item = study.items.first()
    Vote.objects.create(
        item=item,
        judge=llm,
        shown_first="a1",
        choice_shown="second",
        label_scheme="A/B",
        labels_swapped=True,
        raw_output="=cmd|' /C calc'!A0\nB",
        option_probs={"first": 0.2, "second": 0.7, "tie": 0.1},
    )
    Vote.objects.create(item=item, judge=llm, round=1, shown_first="a2", parse_status="invalid", raw_output="+what")
    return study


def export_frame(study, name, **kw):
    text = "".join(exports.csv_lines(exports.EXPORTS[name](study, **kw)))
    return pd.read_csv(io.StringIO(text), keep_default_na=False, na_values=[""])


def test_the_votes_csv_has_one_row_per_vote_with_its_provenance(exported_study):
    df = export_frame(exported_study, "votes")
    assert list(df.columns) == exports.VOTE_COLUMNS
    assert len(df) == Vote.objects.filter(item__study=exported_study).count()
    db_ids = sorted(Vote.objects.filter(item__study=exported_study).values_list("id", flat=True))
    assert sorted(df["vote_id"]) == db_ids
    llm = df[df["judge"] == "llm-y"].sort_values("round")
    assert llm[["backend", "model", "prompt_style"]].iloc[0].tolist() == ["openai", "m-1", "vote_only"]
    assert llm["prob_second"].iloc[0] == pytest.approx(0.7)
    assert llm["labels_swapped"].tolist() == [True, False]
    assert llm["choice"].isna().iloc[1] and llm["parse_status"].iloc[1] == "invalid"
    humans = df[df["judge_kind"] == "human"]
    assert humans["rater"].str.match(r"^R\d+$").all()
    assert set(df["group"]) == {"control", "rich_content"}


def test_formula_cells_are_neutralised_and_numbers_are_not(exported_study):
    df = export_frame(exported_study, "votes")
    outputs = set(df.loc[df["judge"] == "llm-y", "raw_output"])
    assert outputs == {"'=cmd|' /C calc'!A0\nB", "'+what"}
    assert exports.neutralise(-3) == -3 and exports.neutralise("@x") == "'@x" and exports.neutralise("\tx") == "'\tx"
    assert exports.neutralise("a=b") == "a=b"


@pytest.mark.parametrize(
    "formula", ["\uff1d1+1", "\uff0bA1", "\uff0d1", "\uff20SUM(A1)", "\ufe66A1", "\ufe62A1", "\ufe631", "\ufe6bx"]
)
def test_the_full_width_and_small_forms_of_a_formula_sign_are_neutralised_too(formula):
    """Excel takes a full-width "\uff1d" typed through a CJK input method as "=": a cell that
    starts with one (or with the small forms) was exported as it was, a formula to run."""
    line = "".join(exports.csv_lines([["plain", formula, "a\uff1db"]]))
    assert next(csv.reader(io.StringIO(line))) == ["plain", "'" + formula, "a\uff1db"]


def test_the_items_csv_has_each_judges_preference_per_item(exported_study):
    df = export_frame(exported_study, "items")
    sim = df[df["judge"] == "sim-x"]
    assert len(sim) == 8
    assert set(sim["preference"]) <= {"A1", "A2", "Tie"}
    assert ((sim["n_a1"] - sim["n_a2"]) == sim["score"]).all()


def test_the_metrics_csv_is_the_analysis_in_long_format(exported_study):
    df = export_frame(exported_study, "metrics")
    assert list(df.columns) == exports.METRIC_COLUMNS
    sim = df[df["judge"] == "sim-x"]
    conditional, marginal = sim[sim["convention"] == "conditional"], sim[sim["convention"] == "marginal"]
    # Two votes per item: within an item one answer keeps the first label, so only the pooled
    # (marginal) label effect exists; the conditional one is not identifiable and says why.
    assert conditional[conditional["metric"] == "label_log_odds"].empty
    unidentified = conditional[conditional["metric"] == "takes_first_label"]
    assert unidentified["group"].tolist() == ["ab"] and unidentified["estimate"].isna().all()
    assert unidentified["note"].str.startswith("not identifiable").all()
    labels = marginal[marginal["metric"] == "label_log_odds"]
    assert labels["group"].tolist() == ["ab"] and (labels["ci_lo"] < labels["estimate"]).all()
    humans = df[(df["judge"] == "Humans") & (df["convention"] == "conditional")]
    assert humans[humans["metric"] == "label_log_odds"].empty  # people see no labels
    assert len(humans[humans["metric"] == "position_log_odds"]) == 1
    row = sim[(sim["metric"] == "asr") & (sim["group"] == "rich_content") & sim["bloom"].isna()]
    result = current_report.study_analyze(study=exported_study)
    expected = rows.one(result["rows"], judge="sim-x", metric="asr", group="rich_content", bloom="")
    assert row["n"].iloc[0] == expected["n"] and len(df) == len(result["rows"])
    assert {"random judge", "Human-NF"} <= set(df["judge"])


def test_the_export_commands_write_the_same_csv(exported_study, tmp_path):
    for name in ("votes", "items", "metrics"):
        target = tmp_path / f"{name}.csv"
        call_command(f"export_{name}", "--study", "exp-s", "-o", str(target), verbosity=0)
        direct = "".join(exports.csv_lines(exports.EXPORTS[name](exported_study)))
        assert target.read_bytes().decode("utf-8") == direct, name


def test_an_export_command_rejects_an_unknown_study_and_writes_nothing(db, tmp_path):
    with pytest.raises(CommandError, match="no study"):
        call_command("export_votes", "--study", "nope", "-o", str(tmp_path / "x.csv"))
    assert list(tmp_path.iterdir()) == []


def test_the_votes_export_streams_in_chunks(exported_study, django_assert_max_num_queries):
    out = StringIO()
    rows = exports.votes_rows(exported_study, chunk_size=5)
    # The votes and their judges, twice: once for the few columns that decide what counts
    # (loader.rules_frame; a run's configuration only when there are runs), once for the rows.
    with django_assert_max_num_queries(4):
        for line in exports.csv_lines(rows):
            out.write(line)
    assert out.getvalue().count("\n") > 20


def test_the_export_decides_what_counts_as_the_analysis_does_on_the_whole_study_frame(exported_study):
    exported_study.min_response_ms = 500
    exported_study.save()
    Vote.objects.filter(id=Vote.objects.filter(item__study=exported_study, rater__isnull=False).first().id).update(
        client_ms=1, not_familiar=True
    )
    exported_study.raters.filter(id=exported_study.raters.order_by("id").last().id).update(flagged=True)
    full, slim = loader.study_frame(exported_study), loader.rules_frame(exported_study)
    assert slim["vote_id"].tolist() == sorted(full["vote_id"])
    full = full.sort_values("vote_id", ignore_index=True)
    expected, got = exclusion_masks(full, Filters()), exclusion_masks(slim, Filters())
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].tolist() == expected[name].tolist(), name
    hit = {name for name, mask in got.items() if mask.any()}
    assert {"too_fast", "not_familiar", "flagged_rater", "no_choice"} <= hit


def test_the_rules_frame_of_a_study_without_votes_is_empty(db):
    study = make_study(slug="exp-empty")
    assert len(loader.rules_frame(study)) == 0
    assert exports.exclusions(study) == {}
