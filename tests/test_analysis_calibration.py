"""Does the judge know when it is unsure? (analysis.calibration): ECE, Brier and the
reliability curve against a hand computation and simulations with a known truth (a calibrated
judge has an ECE near 0, an overconfident one near its known miscalibration); the confidence of
a vote from option probabilities or repeated votes; and the study's rows, with the agreement of
each judge with people's Dawid-Skene consensus."""

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from analysis import consensus, current_report, plots, rows, simulated_judges
from analysis.calibration import (
    FROM_PROBABILITIES,
    FROM_VOTE_SHARES,
    NOT_APPLICABLE,
    calibration,
    calibration_intervals,
    vote_confidence,
)
from analysis.compute import Options
from analysis.simulate import JudgeParams
from analysis.stats import bootstrap_counts
from analysis.study_metrics import human_labels
from tests.factories import human_pool, make_judge, make_question, make_study, make_variant, make_vote


def test_ece_brier_and_the_curve_match_a_hand_computation():
    # Bins: 0.05 in [0, .1); 0.15 twice in [.1, .2); 0.95 and 1.0 in [.9, 1] (1.0 in the last).
    # |right - confidence| summed per bin: |0 - .05| + |1 - .3| + |2 - 1.95| = .8, over 5 votes.
    # Brier: (.05² + .15² + .85² + .05² + 0²) / 5 = .75 / 5.
    found = calibration([0.05, 0.15, 0.15, 0.95, 1.0], [0, 0, 1, 1, 1])
    assert found.ece == pytest.approx(0.16)
    assert found.brier == pytest.approx(0.15)
    assert found.n == 5
    assert [(c["low"], c["n"]) for c in found.curve] == [(0.0, 1), (0.1, 2), (0.9, 2)]
    assert found.curve[1]["confidence"] == pytest.approx(0.15) and found.curve[1]["accuracy"] == 0.5
    assert found.curve[2]["confidence"] == pytest.approx(0.975) and found.curve[2]["accuracy"] == 1.0


def test_no_votes_give_no_figure_and_bad_confidence_is_named():
    assert (calibration([], []).ece, calibration([], []).n) == (None, 0)
    with pytest.raises(ValueError, match="found 1.5 at position 1"):
        calibration([0.5, 1.5], [1, 0])
    with pytest.raises(ValueError, match="differ in length"):
        calibration([0.5], [1, 0])


def test_a_calibrated_judge_has_an_ece_near_zero_and_an_overconfident_one_its_miscalibration():
    rng = np.random.default_rng(11)
    calibrated, overconfident, brier = [], [], []
    for _ in range(200):
        confidence = rng.uniform(0.5, 1.0, 2000)
        calibrated.append(calibration(confidence, rng.random(2000) < confidence))
        # Right 0.15 less often than it says, at every confidence.
        overconfident.append(calibration(confidence, rng.random(2000) < confidence - 0.15).ece)
        brier.append(np.mean(confidence * (1 - confidence)))
    # ECE is biased upwards by sampling noise (about sqrt(2 / (pi n_bin)) per bin): small here.
    assert np.mean([c.ece for c in calibrated]) < 0.02
    assert np.mean(overconfident) == pytest.approx(0.15, abs=0.01)
    # A calibrated judge's Brier score is E[c (1 - c)].
    assert np.mean([c.brier for c in calibrated]) == pytest.approx(np.mean(brier), abs=0.002)


def frame(**columns):
    votes = pd.DataFrame(columns)
    votes["choice"] = pd.Categorical(votes["choice"], categories=["a1", "a2", "tie"])
    return votes


# A judge overconfident by 0.15 in every bin (confidence uniform on [0.5, 1], right with
# probability confidence - 0.15 + u, u = +-0.05 shared by a question's 6 votes): ECE 0.15 and
# Brier E[c^2] - 2 E[c (c - 0.15)] + E[c - 0.15] = 7/12 - 2 (7/12 - 0.1125) + 0.6 = 0.241667
# by construction.
TRUE_ECE, TRUE_BRIER = 0.15, 7 / 12 - 2 * (7 / 12 - 0.1125) + 0.6


def test_the_ece_and_brier_intervals_cover_the_truth_about_95_percent_with_votes_clustered_by_question():
    # 400 studies of 300 questions: the coverage's standard error is 1.1 points; 400 resamples
    # per study (the report's default is 1,000) keep the percentiles steady; about 5 s in all.
    rng = np.random.default_rng(5)
    counts_seed = iter(range(400))
    covered = {"ece": 0, "brier": 0}
    for _ in range(400):
        question = np.repeat(np.arange(300), 6)
        confidence = rng.uniform(0.5, 1.0, len(question))
        u = rng.choice([-0.05, 0.05], 300)[question]
        right = rng.random(len(question)) < confidence - 0.15 + u
        counts = bootstrap_counts(300, reps=400, seed=next(counts_seed))
        ece_ci, brier_ci = calibration_intervals(confidence, right, question, counts)
        covered["ece"] += ece_ci[0] <= TRUE_ECE <= ece_ci[1]
        covered["brier"] += brier_ci[0] <= TRUE_BRIER <= brier_ci[1]
    assert 0.92 <= covered["ece"] / 400 <= 0.98, covered
    assert 0.92 <= covered["brier"] / 400 <= 0.98, covered


def test_calibration_intervals_need_each_votes_cluster():
    with pytest.raises(ValueError, match="cluster's column"):
        calibration_intervals([0.6, 0.7], [1, 0], [0, 5], bootstrap_counts(2, reps=10, seed=0))
    assert calibration_intervals([], [], [], bootstrap_counts(2, reps=10, seed=0)) == ((None, None), (None, None))


def test_the_confidence_is_the_probability_on_the_chosen_option_as_displayed():
    votes = frame(
        item_id=[1, 1, 2, 3],
        choice=["a1", "a2", "tie", "a1"],
        shown_first=["a1", "a1", "a2", "a2"],
        prob_first=[0.7, 0.7, 0.2, 0.6],
        prob_second=[0.2, 0.2, 0.5, 0.3],
        prob_tie=[0.1, 0.1, 0.3, 0.1],
    )
    # A1 shown first and chosen: first; A2 chosen, shown second: second; tie; A1 shown second.
    at, confidence, source = vote_confidence(votes)
    assert (list(at), list(confidence), source) == ([0, 1, 2, 3], [0.7, 0.2, 0.3, 0.3], FROM_PROBABILITIES)


def test_without_probabilities_the_confidence_is_the_share_of_repeated_votes():
    nan = float("nan")
    votes = frame(
        item_id=[1, 1, 1, 2],
        choice=["a1", "a1", "a2", "a2"],
        shown_first=["a1"] * 4,
        prob_first=[nan] * 4,
        prob_second=[nan] * 4,
        prob_tie=[nan] * 4,
    )
    at, confidence, source = vote_confidence(votes)  # item 2's single vote says nothing
    assert (list(at), source) == ([0, 1, 2], FROM_VOTE_SHARES)
    assert confidence == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert vote_confidence(votes.iloc[3:])[2] == NOT_APPLICABLE


@pytest.fixture
def rated_study(db):
    """60 items, each voted by 3 of 4 simulated raters and 3 times by a simulated judge."""
    study = make_study(slug="calibration-s", votes_per_item=3)
    for _ in range(20):
        question = make_question(study)
        make_variant(question, kind="reference")
        make_variant(question, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.judge_simulate(study=study, name="sim-judge", params=JudgeParams(position=0.3), seed=1)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), seed=2)
    return study


def test_the_report_has_each_judges_calibration_and_agreement_with_the_consensus(rated_study):
    report = current_report.study_analyze(study=rated_study, options=Options(bootstrap=20))
    table = report["rows"]
    ece = rows.one(table, judge="sim-judge", metric="calibration_ece")
    assert ece["convention"] == "repeated votes; reference: dawid_skene"
    assert ece["n"] > 0 and 0 <= ece["estimate"] <= 1
    assert ece["note"] == f"0 votes against gold labels, {ece['n']} against people's Dawid-Skene consensus"
    assert rows.one(table, judge="sim-judge", metric="calibration_brier")["n"] == ece["n"]
    assert ece["ci_lo"] <= ece["estimate"] <= ece["ci_hi"] and ece["clusters"] > 1
    brier = rows.one(table, judge="sim-judge", metric="calibration_brier")
    assert brier["ci_lo"] <= brier["estimate"] <= brier["ci_hi"]
    kappa = rows.one(table, judge="sim-judge", metric="cohen_kappa_vs_human_dawid_skene")
    agreement = rows.one(table, judge="sim-judge", metric="agreement_vs_human_dawid_skene")
    assert kappa["n"] == agreement["n"] > 0 and 0 <= agreement["estimate"] <= 1
    # Beside the majority's, over the same items (every item has people's votes and raters).
    assert rows.one(table, judge="sim-judge", metric="agreement_vs_human_majority")["n"] == agreement["n"]


def test_a_judge_with_one_vote_per_item_and_no_probabilities_says_so(db):
    study = make_study(slug="one-vote-s")
    item = make_question(study).items.get()
    for _ in range(3):
        make_vote(item, human_pool(study), client_ms=5000)
    make_vote(item, make_judge(name="sim-judge"))
    found = rows.one(current_report.study_analyze(study=study)["rows"], judge="sim-judge", metric="calibration_ece")
    assert (found["estimate"], found["n"], found["note"]) == (None, 0, NOT_APPLICABLE)


def test_the_consensus_reads_peoples_votes_as_the_report_does():
    """Ten items, raters A and B right, C always wrong; C's two votes on item 0 count once."""
    truth = ["a1", "a2"] * 5
    wrong = {"a1": "a2", "a2": "a1"}
    votes = frame(
        judge=["h"] * 31,
        rater=["A", "B", "C"] * 10 + ["C"],
        item_id=[i for i in range(10) for _ in range(3)] + [0],
        choice=[c for t in truth for c in (t, t, wrong[t])] + ["a2"],
    )
    items, raters, labels = human_labels(votes)
    assert len(items) == 30
    found = consensus.dawid_skene(items, raters, labels)
    assert list(found.labels[np.argsort(found.item_ids)]) == [1, -1] * 5


def test_a_judge_with_option_probabilities_is_calibrated_against_gold_labels(db, staff_client):
    """Four items whose better answer is A1; the judge's votes and the probability it put on each
    displayed option. Its confidence in its choice and whether it was right, by hand:
    .9 right, .6 right (A1 shown second), .7 wrong (chose A2), .8 right."""
    study = make_study(slug="gold-s")
    judge = make_judge(name="prob-judge")
    cases = [  # (shown_first, choice_shown, option_probs as displayed)
        ("a1", "first", {"first": 0.9, "second": 0.05, "tie": 0.05}),
        ("a2", "second", {"first": 0.3, "second": 0.6, "tie": 0.1}),
        ("a1", "second", {"first": 0.2, "second": 0.7, "tie": 0.1}),
        ("a2", "second", {"first": 0.1, "second": 0.8, "tie": 0.1}),
    ]
    for shown_first, choice_shown, probs in cases:
        item = make_question(study).items.get()
        item.gold_label = "a1"
        item.save()
        make_vote(item, judge, shown_first=shown_first, choice_shown=choice_shown, option_probs=probs)
    report = current_report.study_analyze(study=study, options=Options(bootstrap=20))
    ece = rows.one(report["rows"], judge="prob-judge", metric="calibration_ece")
    # Bins [.9, 1]: .9 right; [.6, .7): .6 right; [.7, .8): .7 wrong; [.8, .9): .8 right.
    # ECE = (.1 + .4 + .7 + .2) / 4; Brier = (.01 + .16 + .49 + .04) / 4.
    assert ece["estimate"] == pytest.approx(1.4 / 4)
    assert rows.one(report["rows"], judge="prob-judge", metric="calibration_brier")["estimate"] == pytest.approx(
        0.7 / 4
    )
    assert (ece["n"], ece["convention"]) == (4, "option probabilities; reference: gold")
    assert ece["note"] == "4 votes against gold labels, 0 against people's Dawid-Skene consensus"
    # The reliability curve's figure draws, per bin, the share right against the mean confidence.
    convention = "option probabilities; reference: gold"
    _, drawn = plots.draw("reliability", report)
    assert drawn[1:] == [
        ["prob-judge", convention, 0.6, 0.7, pytest.approx(0.6), 1.0, 1],
        ["prob-judge", convention, 0.7, 0.8, pytest.approx(0.7), 0.0, 1],
        ["prob-judge", convention, 0.8, 0.9, pytest.approx(0.8), 1.0, 1],
        ["prob-judge", convention, 0.9, 1.0, pytest.approx(0.9), 1.0, 1],
    ]
    page = staff_client.get(reverse("analysis:study", args=["gold-s"])).content.decode()
    assert "Judges against people" in page and "4 votes, option probabilities; reference: gold" in page
    assert reverse("analysis:plot", args=["gold-s", "reliability", "svg"]) in page
