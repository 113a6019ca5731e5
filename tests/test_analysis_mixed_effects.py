"""The mixed model of choices (analysis.mixed_effects): the coding of a vote by hand, the
effects and the two SDs against a truth known by construction (simulated studies drawn from the
model), the rows of the report, and the notes where a model cannot be fitted.

The 400-study coverage run is bench/bench_mixed_effects.py (docs/BENCHMARKS.md, "Mixed model");
here a smaller seeded run checks bias and a pooled coverage."""

import json
from io import StringIO

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.urls import reverse

from analysis import metrics, mixed_effects, rows, simulate, simulated_judges, tables
from analysis.compute import Options, analyze
from analysis.simulate import CrossedTruth, JudgeParams
from tests.analysis_frames import frame, item, votes
from tests.factories import make_question, make_study, make_variant

TRUTH = CrossedTruth(
    effects={"factual_error": -1.0, "reference": 0.5}, position=0.3, sd_rater=0.8, sd_question=1.2, tie_rate=0.1
)


def fit(votes_frame: pd.DataFrame, groups=("factual_error", "reference")) -> mixed_effects.MixedFit:
    roots = metrics.item_preferences(votes_frame)[["item_id", "a1_root", "a2_root"]]
    return mixed_effects.fit(votes_frame, roots, list(groups))


# --- the coding of a vote -----------------------------------------------------------------------


def test_each_vote_is_read_against_its_questions_reference_answer_whichever_original_was_perturbed():
    """Question 1: control (A1 = 10, A2 = 11), its reference answer 11; a reference item made
    from 11 (A2p on the reference side) and a factual-error item made from 10 (A2p on the other
    side: its A1 is the reference answer 11)."""
    control = item(1, 1, "control", 10, 11)
    on_reference = item(2, 1, "reference", 10, 11)
    on_other = item(3, 1, "factual_error", 11, 10, semantics="degrading")
    cast = [
        (control, "a2", "a2"),
        (control, "a1", "a2"),
        (control, "tie", "a1"),
        (on_reference, "a2", "a1"),
        (on_reference, "a1", "a2"),
        (on_other, "a1", "a1"),
        (on_other, "a2", "a1"),
    ]
    table = frame([vote for it, choice, first in cast for vote in votes(it, choice, shown_first=first)])
    roots = metrics.item_preferences(table)[["item_id", "a1_root", "a2_root"]]
    d = mixed_effects.design(table, roots)
    assert d.n_ties == 1
    # took the reference answer: control a2 yes, a1 no; reference item a2 (A2p, the reference
    # side) yes, a1 no; factual-error item a1 (the reference original) yes, a2 (A2p) no.
    assert d.took_reference.tolist() == [1, 0, 1, 0, 1, 0]
    assert d.side.tolist() == [1, 1, 1, 1, -1, -1]
    # the reference answer shown first: control A2 first twice; reference item A1 first, then
    # A2; factual-error item A1 (the reference) first both times.
    assert d.first.tolist() == [1, 1, -1, 1, 1, 1]
    assert d.group.tolist() == ["control", "control", "reference", "reference", "factual_error", "factual_error"]


# --- against a known truth ----------------------------------------------------------------------

# 20 studies of 6,000 votes (150 raters x 120 questions): about 12 s of CPU here, enough to see a
# bias of 0.1 in an effect (the mean of 20 estimates has a standard error of about 0.02) and of
# 15% in an SD (about 2%), and a pooled coverage of 60 fixed-effect intervals to within about 3
# points. Measured (seeds 0-19): factual_error -1.027, reference 0.499, position 0.313, SD raters
# 0.789, SD questions 1.202; 59 of 60 effect intervals and 39 of 40 SD intervals cover. The
# 400-study coverage of each figure is the benchmark's.
STUDIES = 20


@pytest.fixture(scope="module")
def simulated_fits() -> list[mixed_effects.MixedFit]:
    return [
        fit(simulate.crossed_votes(n_questions=120, n_raters=150, n_votes=6000, truth=TRUTH, seed=seed))
        for seed in range(STUDIES)
    ]


def test_the_effects_and_both_sds_are_recovered_from_simulated_studies(simulated_fits):
    assert all(found.note == "" and found.terms == "rater + question" for found in simulated_fits)
    for group, planted in TRUTH.effects.items():
        mean = np.mean([found.effects[group].value for found in simulated_fits])
        assert mean == pytest.approx(planted, abs=0.1)
    assert np.mean([found.position.value for found in simulated_fits]) == pytest.approx(TRUTH.position, abs=0.1)
    assert np.mean([found.sd_rater.value for found in simulated_fits]) == pytest.approx(TRUTH.sd_rater, rel=0.15)
    assert np.mean([found.sd_question.value for found in simulated_fits]) == pytest.approx(TRUTH.sd_question, rel=0.15)
    found = simulated_fits[0]
    assert (found.n_raters, found.n_questions) == (150, 120)
    assert found.n_votes + found.n_ties == 6000


def test_the_intervals_cover_the_planted_values_at_about_the_nominal_rate(simulated_fits):
    covered = []
    for found in simulated_fits:
        for group, planted in TRUTH.effects.items():
            lo, hi = found.effects[group].ci
            covered.append(lo <= planted <= hi)
        covered.append(found.position.ci[0] <= TRUTH.position <= found.position.ci[1])
    assert 0.88 <= np.mean(covered) <= 1.0
    sd_covered = [f.sd_rater.ci[0] <= TRUTH.sd_rater <= f.sd_rater.ci[1] for f in simulated_fits]
    sd_covered += [f.sd_question.ci[0] <= TRUTH.sd_question <= f.sd_question.ci[1] for f in simulated_fits]
    assert np.mean(sd_covered) >= 0.85


def test_a_judge_without_raters_gets_the_question_term_alone():
    people = simulate.crossed_votes(n_questions=60, n_raters=1, n_votes=3000, truth=TRUTH, seed=1)
    people["rater"] = pd.Categorical([""] * len(people))
    found = fit(people)
    assert found.terms == "question" and found.note == ""
    assert found.sd_rater.value is None and found.sd_rater.note.startswith("no raters")
    # The rater term gone, the question SD takes the raters' spread too: sqrt(0.8² + 1.2²) = 1.44
    # at most, and the effects shrink a little towards 0 (a marginal model's attenuation).
    assert 1.0 < found.sd_question.value < 1.7
    assert found.effects["factual_error"].ci[0] < -0.6


# --- where a model cannot be fitted ---------------------------------------------------------------


def test_too_few_votes_give_no_estimate_and_a_note_naming_the_numbers():
    small = simulate.crossed_votes(n_questions=4, n_raters=3, n_votes=40, truth=TRUTH, seed=2)
    found = fit(small)
    assert found.note.startswith("not fitted: ") and "decisive votes" in found.note
    assert f"{found.n_votes} decisive votes ({found.n_ties} ties left out); the model needs 50" in found.note
    assert all(effect is None for effect in found.effects.values())
    assert found.position is None and found.sd_rater is None and found.sd_question is None


def test_few_questions_or_raters_are_named():
    few_questions = simulate.crossed_votes(n_questions=5, n_raters=40, n_votes=600, truth=TRUTH, seed=3)
    found = fit(few_questions)
    assert found.note == "not fitted: 5 questions with two or more decisive votes; how questions differ needs 10"
    few_raters = simulate.crossed_votes(n_questions=40, n_raters=3, n_votes=1200, truth=TRUTH, seed=3)
    found = fit(few_raters)
    assert found.note == "" and found.terms == "question"
    assert found.sd_rater.value is None
    assert found.sd_rater.note == "3 raters with two or more decisive votes; how raters differ needs 5"


def test_a_group_whose_votes_all_go_one_way_is_named_and_the_rest_is_fitted():
    study = simulate.crossed_votes(n_questions=60, n_raters=40, n_votes=3000, truth=TRUTH, seed=4)
    # Every factual-error vote takes the answer that was not perturbed.
    fe = (study["group"] == "factual_error").to_numpy()
    perturbed_is_a2 = np.ones(len(study), dtype=bool)  # synthetic items put A2p in the A2 slot
    study.loc[fe & perturbed_is_a2, "choice"] = "a1"
    found = fit(study)
    assert found.effects["factual_error"] is None
    n_fe = found.group_votes["factual_error"]
    assert found.group_notes["factual_error"] == (
        f"all {n_fe} decisive votes took the other answer: the effect is infinite; left out of the fit"
    )
    assert found.effects["reference"] is not None and found.sd_question.value > 0


def test_a_judge_that_always_takes_the_answer_shown_first_is_named():
    study = simulate.crossed_votes(n_questions=30, n_raters=20, n_votes=600, truth=TRUTH, seed=5)
    study["choice"] = np.where(study["choice"] == "tie", "tie", study["shown_first"].astype(str))
    study["choice"] = pd.Categorical(study["choice"], categories=["a1", "a2", "tie"])
    found = fit(study)
    assert found.note.startswith("not fitted: all ")
    assert found.note.endswith(
        "took the answer shown first: the position effect is infinite and the others cannot be told from it"
    )


def test_votes_that_all_take_one_answer_are_named():
    study = simulate.crossed_votes(n_questions=30, n_raters=20, n_votes=600, truth=TRUTH, seed=6)
    study["choice"] = pd.Categorical(["a2"] * len(study), categories=["a1", "a2", "tie"])
    found = fit(study)
    # Every vote takes A2: the perturbed answer on one side (infinite effects), the control's A2.
    assert found.group_notes["reference"].endswith("the effect is infinite; left out of the fit")
    assert found.note.endswith("decisive votes in the fit took the same answer of their question: nothing varies")


# --- rows of the report ---------------------------------------------------------------------------


def test_the_report_has_each_judges_rows_people_with_raters_and_a_judge_without():
    people = simulate.crossed_votes(n_questions=60, n_raters=40, n_votes=3000, truth=TRUTH, seed=7)
    machine = simulate.crossed_votes(n_questions=60, n_raters=1, n_votes=3000, truth=TRUTH, seed=8, judge="llm")
    machine["rater"], machine["judge_kind"] = "", "llm"
    both = pd.concat([people, machine], ignore_index=True)
    both["vote_id"] = np.arange(len(both))
    for column in ("rater", "judge", "judge_kind"):
        both[column] = both[column].astype(str).astype("category")
    report = analyze(both, study="s", options=Options(bootstrap=20))
    table = report["rows"]
    for judge in ("people", "llm"):
        for group in TRUTH.effects:
            effect = rows.one(table, judge=judge, metric="mixed_effect", group=group)
            assert (
                effect["ci_lo"] < effect["estimate"] < effect["ci_hi"]
                and effect["n"] > 0
                and effect["clusters"] is None
            )
        assert rows.one(table, judge=judge, metric="mixed_position")["estimate"] is not None
        assert rows.one(table, judge=judge, metric="mixed_sd_question")["n"] == 60
    rater_sd = rows.one(table, judge="people", metric="mixed_sd_rater")
    assert rater_sd["n"] == 40 and rater_sd["ci_lo"] < rater_sd["estimate"] < rater_sd["ci_hi"]
    assert rows.one(table, judge="people", metric="mixed_effect", group="reference")["convention"] == (
        "ties left out; random intercepts: rater + question"
    )
    llm_sd = rows.one(table, judge="llm", metric="mixed_sd_rater")
    assert llm_sd["estimate"] is None and llm_sd["note"].startswith("no raters")
    assert "decisive votes" in rows.one(table, judge="llm", metric="mixed_position")["note"]
    assert report["conventions"]["mixed_effects"] == mixed_effects.METHOD


def test_a_degenerate_study_gives_rows_with_a_note_and_no_estimate():
    it = item(1, 1, "control", 10, 11)
    report = analyze(frame(votes(it, "a1 a2 tie a1")), study="s", options=Options(bootstrap=20))
    for metric in ("mixed_position", "mixed_sd_rater", "mixed_sd_question"):
        found = rows.one(report["rows"], judge="J", metric=metric)
        assert found["estimate"] is None
        assert found["note"] == "not fitted: 3 decisive votes (1 ties left out); the model needs 50"


# --- where it shows -------------------------------------------------------------------------------


@pytest.fixture
def rated_study(db):
    """30 questions with two perturbed items, 6 votes per item by a simulated judge and by 10
    simulated raters."""
    study = make_study(slug="mixed-s", votes_per_item=6)
    for _ in range(30):
        question = make_question(study)
        make_variant(question, kind="reference")
        make_variant(question, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.judge_simulate(study=study, name="sim-judge", params=JudgeParams(position=0.8), seed=1)
    simulated_judges.raters_simulate(study=study, raters=10, params=JudgeParams(), seed=2)
    return study


def test_the_command_and_the_dashboard_show_the_mixed_model(rated_study, staff_client):
    out = StringIO()
    call_command("analyze", "--study", "mixed-s", "--json", "--bootstrap", "20", stdout=out)
    report = json.loads(out.getvalue())  # nothing of gpboost's in the command's output
    position = rows.one(report["rows"], judge="sim-judge", metric="mixed_position")
    assert position["ci_lo"] < 0.8 < position["ci_hi"]
    assert rows.one(report["rows"], judge="Humans", metric="mixed_sd_rater")["n"] == 10
    shown = tables.mixed_effects_rows(report)
    assert {r["judge"] for r in shown} == {"Humans", "sim-judge"}
    page = staff_client.get(reverse("analysis:study", args=["mixed-s"])).content.decode()
    assert 'id="mixed-effects"' in page and "How much raters differ" in page
