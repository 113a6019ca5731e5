"""Label preference and position preference, estimated jointly (analysis.labels)."""

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import log_expit

from analysis import simulate
from analysis.labels import NO_LABELS, NOT_COUNTERBALANCED, TIED_TO_ANSWER, label_and_position
from analysis.simulate import JudgeParams
from tests.analysis_frames import frame, item

AB = {"ab": ("A", "B")}
_ids = itertools.count(1)


def vote(it, shown_first, swapped, picked_label, *, scheme="ab"):
    """One vote on `it` with the answer shown first under A (or B when `swapped`), for the label picked."""
    first_label = "B" if swapped else "A"
    shown = "tie" if picked_label == "tie" else "first" if picked_label == first_label else "second"
    choice = "tie" if shown == "tie" else shown_first if shown == "first" else {"a1": "a2", "a2": "a1"}[shown_first]
    return {
        **it,
        "vote_id": next(_ids),
        "judge": "J",
        "judge_kind": "llm",
        "shown_first": shown_first,
        "choice_shown": shown,
        "choice": choice,
        "label_scheme": scheme,
        "labels_swapped": swapped,
    }


def always_b(n_questions=8):
    rows = []
    for q in range(n_questions):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        rows += [vote(it, order, swapped, "B") for order in ("a1", "a2") for swapped in (False, True)]
    return frame(rows)


def maximiser(log_likelihood):
    return minimize_scalar(lambda b: -log_likelihood(b), bounds=(-10, 10), method="bounded", options={"xatol": 1e-10}).x


def half_votes(b, cells):
    """Half a vote each way in `cells` cells whose linear predictor is ±b."""
    return cells * 0.5 * (log_expit(b) + log_expit(-b))


def test_a_judge_that_always_picks_b_has_a_label_effect_and_no_position_effect():
    result = label_and_position(always_b(), AB)
    # Per item, 2 of the 4 votes went to A2 (those where A2 was under B). Given that total, the
    # 6 ways to place them have weights e^(±2a), e^(±2b), 1, 1 (a position, b label), and the
    # observed one e^(-2b). At a = 0, 8 items plus the half votes of the 4 cells:
    # 8 (-2b - log(4 + 2 cosh 2b)) + 4 · ½ (log σ(b) + log σ(-b)).
    expected = maximiser(lambda b: 8 * (-2 * b - np.log(4 + 2 * np.cosh(2 * b))) + half_votes(b, 4))
    label = result["label"]["ab"]
    assert label["identifiable"] is True and result["identifiable"] is True
    assert label["log_odds"] == pytest.approx(expected, abs=1e-6)
    assert label["share"] == pytest.approx(1 / (1 + math.exp(-expected)), abs=1e-6)
    # The pooled fit gives each cell 8 votes plus half each way: B 8.5 times in 9, -ln 17.
    assert result["marginal"]["label"]["ab"]["log_odds"] == pytest.approx(-math.log(17), abs=1e-6)
    assert (label["first_label"], label["second_label"]) == ("A", "B")
    assert result["position"]["log_odds"] == pytest.approx(0.0, abs=1e-6)
    lo, hi = result["position"]["ci"]
    assert lo < 0 < hi  # every question agrees exactly, yet the interval is not a point
    assert label["ci"][1] < 0
    assert result["n"] == 32 and result["n_questions"] == 8
    assert [c["first"] for c in result["cells"]] == [0.0, 1.0, 0.0, 1.0]


def test_label_order_tied_to_position_reports_position_only_and_says_why():
    rows = []
    for q in range(4):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        rows += [vote(it, order, False, "A") for order in ("a1", "a2", "a1", "a2")]
    result = label_and_position(frame(rows), AB)
    assert result["identifiable"] is False and result["reason"] == NOT_COUNTERBALANCED
    assert result["label"]["ab"]["identifiable"] is False and "log_odds" not in result["label"]["ab"]
    # Always the first shown (and always "A"): all of it shows up as position, as it must. Per
    # item, A2 got the 2 votes where it was shown first; given 2 votes for A2, the number of them
    # shown first is 0, 1 or 2 with weights e^(-2a), 4, e^(2a). Plus half votes in 2 cells.
    expected = maximiser(lambda a: 4 * (2 * a - np.log(np.exp(-2 * a) + 4 + np.exp(2 * a))) + half_votes(a, 2))
    assert result["position"]["log_odds"] == pytest.approx(expected, abs=1e-6)
    assert result["marginal"]["position"]["log_odds"] == pytest.approx(math.log(8.5 / 0.5), abs=1e-6)


def test_votes_without_labels_are_not_a_label_preference():
    rows = []
    for q in range(3):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        rows += [vote(it, order, False, "A", scheme="") for order in ("a1", "a2")]
    result = label_and_position(frame(rows))
    assert result["identifiable"] is False and result["reason"] == NO_LABELS


def test_labels_that_follow_the_answer_rather_than_its_position_are_not_identifiable():
    rows = []
    for q in range(3):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        # A1 always has the first label: swapped exactly when A2 is shown first.
        rows += [vote(it, "a1", False, "A"), vote(it, "a2", True, "A")]
    result = label_and_position(frame(rows), AB)
    assert result["identifiable"] is False and result["label"]["ab"]["reason"] == TIED_TO_ANSWER


def test_with_one_display_order_only_position_is_not_separable_from_content():
    rows = []
    for q in range(4):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        rows += [vote(it, "a1", False, "A"), vote(it, "a1", True, "A")]
    result = label_and_position(frame(rows), AB)
    assert result["position"] is None and result["marginal"]["content_a1"] is None
    # Per item, one vote under each label order, the one under A taken: σ(2b) per item.
    expected = maximiser(lambda b: 4 * log_expit(2 * b) + half_votes(b, 2))
    assert result["label"]["ab"]["log_odds"] == pytest.approx(expected, abs=1e-6)
    assert result["marginal"]["label"]["ab"]["log_odds"] == pytest.approx(math.log(4.5 / 0.5), abs=1e-6)


def test_ties_and_votes_of_unknown_order_are_left_out_and_nothing_decisive_is_none():
    it = item(1, 1, "control", 1, 2)
    rows = [vote(it, "a1", False, "tie"), vote(it, "a2", True, "tie")]
    assert label_and_position(frame(rows), AB) is None
    unknown = {**vote(it, "a1", False, "A"), "order_known": False}
    assert label_and_position(frame([unknown]), AB) is None
    result = label_and_position(frame(rows + [vote(it, "a1", False, "A"), vote(it, "a2", False, "B")]), AB)
    assert result["n"] == 2 and result["n_ties"] == 2
    assert result["position"]["ci"] == [None, None]  # one question: no clustered interval


def test_repeating_each_vote_does_not_narrow_the_interval_votes_are_clustered_by_question():
    rows = []
    for q in range(12):
        it = item(q, q, "control", 2 * q, 2 * q + 1)
        picks = ["A", "B", "A", "A"] if q % 3 else ["B", "B", "A", "B"]
        cells = [("a1", False), ("a1", True), ("a2", False), ("a2", True)]
        rows += [vote(it, order, swapped, pick) for (order, swapped), pick in zip(cells, picks, strict=True)]
    once = label_and_position(frame(rows), AB)
    six = label_and_position(frame([{**r, "vote_id": i} for i, r in enumerate(rows * 6)]), AB)

    def width(result):
        lo, hi = result["label"]["ab"]["ci"]
        return hi - lo

    assert width(six) > 0.8 * width(once)


def simulated(params, *, n_questions=150, seed=0):
    items = simulate.synthetic_items(n_questions, seed=seed)
    sim = simulate.simulate_votes(items, params, votes_per_item=6, seed=seed, counterbalance_labels=True)
    return simulate.votes_frame(items, sim)


def covers(effect, value):
    lo, hi = effect["ci"]
    return lo <= value <= hi


@pytest.mark.parametrize(
    ("position", "label"), [(0.8, 0.0), (0.0, 0.8), (-0.5, 0.0), (0.0, -0.5), (0.6, -0.6)]
)  # fmt: skip
def test_each_measure_recovers_its_own_planted_bias_and_not_the_other(position, label):
    # Without item heterogeneity the planted log-odds are exactly what the model estimates.
    params = JudgeParams(position=position, label=label, noise=0.0, susceptibility={}, tie_rate=0.1)
    result = label_and_position(simulated(params), AB)
    assert covers(result["position"], position) and covers(result["label"]["ab"], label)
    assert result["position"]["log_odds"] == pytest.approx(position, abs=0.15)
    assert result["label"]["ab"]["log_odds"] == pytest.approx(label, abs=0.15)


@pytest.mark.parametrize(("position", "label"), [(1.0, 0.0), (0.0, 1.0)])
def test_with_realistic_judges_the_bias_not_planted_stays_at_zero(position, label):
    params = JudgeParams(position=position, label=label)  # quality noise, perturbations, ties
    result = label_and_position(simulated(params, seed=3), AB)
    planted, other = (
        (result["position"], result["label"]["ab"]) if position else (result["label"]["ab"], result["position"])
    )
    assert covers(other, 0.0)
    assert covers(planted, 1.0) and planted["ci"][0] > 0.5  # per item: no attenuation by the items' spread


def test_a_label_bias_in_runs_that_were_not_counterbalanced_shows_up_as_position():
    items = simulate.synthetic_items(100, seed=1)
    params = JudgeParams(label=1.0, noise=0.0, susceptibility={})
    sim = simulate.simulate_votes(items, params, votes_per_item=6, seed=1)  # people, or LLM runs from before
    sim["label_scheme"] = "ab"
    result = label_and_position(simulate.votes_frame(items, sim), AB)
    assert result["identifiable"] is False and result["reason"] == NOT_COUNTERBALANCED
    assert covers(result["position"], 1.0)


def test_the_simulated_llm_judge_follows_the_counterbalanced_plan():
    items = simulate.synthetic_items(8, seed=0)
    sim = simulate.simulate_votes(items, JudgeParams(), votes_per_item=4, seed=0, counterbalance_labels=True)
    for _, votes in sim.groupby("item_id"):
        cells = sorted(zip(votes["shown_first"], votes["labels_swapped"], strict=True))
        assert cells == [("a1", False), ("a1", True), ("a2", False), ("a2", True)]
    assert set(sim["label_scheme"]) == {"ab"}
