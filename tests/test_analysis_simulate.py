"""The analysis recovers the biases a simulated judge was given, within its intervals."""

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit

from analysis import metrics, simulate
from analysis.compute import analyze
from analysis.rows import estimate, one, select
from analysis.simulate import JudgeParams


def design(n_q=300):
    return simulate.synthetic_items(n_q)


def to_frame(items, sim):
    return simulate.votes_frame(items, sim)


def test_the_position_bias_put_in_is_the_position_bias_measured():
    items = design()
    params = JudgeParams(position=0.8, tie_rate=0.2, noise=0.0)
    sim = simulate.simulate_votes(items, params, votes_per_item=6, seed=1)
    pos = metrics.position(to_frame(items, sim))
    # Orders are balanced, so on average P(first) = (1 − t)·mean over items and orders of
    # σ(u ± position)… with noise 0 and no other bias except susceptibility, take it exactly:
    expected_first = []
    base = simulate.log_odds_a2(items, params, {r: 0.0 for r in range(600)})

    for u in base:
        expected_first += [(1 - 0.2) * expit(u + 0.8), (1 - 0.2) * (1 - expit(u - 0.8))]
    lo, hi = pos["ci"]["first"]
    assert lo <= np.mean(expected_first) <= hi
    assert pos["tie"] == pytest.approx(0.2, abs=0.02)


def expected_item_probabilities(
    items: pd.DataFrame, params: JudgeParams, *, votes_per_item: int, quality: dict[int, float] | None = None
) -> pd.DataFrame:
    """Exact probabilities of each item preference (A1 / A2 / Tie) under the judge model: the
    truth the analysis must recover from the simulation. Needs an even ``votes_per_item`` (half
    the votes in each order) and, unless noise is 0, the realised ``quality``."""
    if votes_per_item % 2:
        raise ValueError("expected probabilities need an even number of votes per item")
    if params.label:
        raise ValueError("expected probabilities are for judges without a label bias")
    quality = quality or {int(r): 0.0 for r in np.unique(items[["a1_root", "a2_root"]].to_numpy())}
    base = simulate.log_odds_a2(items, params, quality)
    half = votes_per_item // 2
    t = params.tie_rate
    out = np.zeros((len(items), 3))
    # Distribution of (A1 − A2) votes within each order, then convolve the two halves.
    for i, u in enumerate(base):
        dists = []
        for sign in (-1, 1):
            p2 = (1 - t) * expit(u + sign * params.position)
            p1 = 1 - t - p2
            dists.append(simulate.score_distribution(half, p1, p2, t))
        total = np.convolve(dists[0], dists[1])
        mid = len(total) // 2
        out[i] = [total[mid + 1 :].sum(), total[:mid].sum(), total[mid]]
    return pd.DataFrame(out, columns=["p_a1", "p_a2", "p_tie"], index=items.index)


def test_asr_and_accuracy_recover_the_exact_expected_values_within_their_intervals():
    items = design(n_q=400)
    params = JudgeParams(
        susceptibility={"factual_error": -1.5, "reference": 0.7, "rich_content": 0.0}, tie_rate=0.1, noise=0.0
    )
    sim = simulate.simulate_votes(items, params, votes_per_item=6, seed=2)
    table = analyze(to_frame(items, sim), study="s", votes_per_item=6)["rows"]

    def interval(metric, group):
        found = one(table, judge="sim", metric=metric, group=group, bloom="")
        return found["ci_lo"], found["ci_hi"]

    probs = expected_item_probabilities(items, params, votes_per_item=6).set_index(items["group"])
    # With noise 0 every question is alike: control, p-item preferences are independent draws.
    ctrl = probs.loc["control"].mean()
    for group in ("reference", "rich_content"):
        p = probs.loc[group].mean()
        lo, hi = interval("asr", group)
        assert lo <= p["p_a2"] <= hi, group
    fe = probs.loc["factual_error"].mean()
    lo, hi = interval("asr", "factual_error")
    assert lo <= fe["p_a2"] + fe["p_tie"] <= hi
    lo, hi = interval("accuracy", "factual_error")
    assert lo <= fe["p_a1"] <= hi
    assert ctrl["p_a1"] == pytest.approx(ctrl["p_a2"])


def test_a_pure_length_preference_shows_in_the_curve_and_vanishes_after_length_control():
    items = design(n_q=500)
    params = JudgeParams(length_per_token=0.03, tie_rate=0.0, noise=0.3)
    sim = simulate.simulate_votes(items, params, votes_per_item=6, seed=3)
    table = analyze(to_frame(items, sim), study="s")["rows"]
    values = [b["estimate"] for b in select(table, judge="sim", metric="verbosity_bin") if b["n"] > 200]
    assert values[0] < values[-1] and all(v >= 0.45 for v in values)
    assert estimate(table, judge="sim", metric="longer_wins") > 0.6
    assert estimate(table, judge="sim", metric="raw_effect", group="rich_content") > 0.1
    assert abs(estimate(table, judge="sim", metric="lc_effect", group="rich_content")) < 0.06


def test_the_simulated_votes_are_balanced_over_the_two_orders():
    items = design(n_q=5)
    sim = simulate.simulate_votes(items, JudgeParams(), votes_per_item=6, seed=0)
    assert (sim.groupby("item_id")["shown_first"].apply(lambda s: (s == "a1").sum()) == 3).all()


def test_the_power_table_gives_narrower_intervals_for_more_questions():
    params = JudgeParams(noise=0.5, susceptibility={"reference": 1.0})
    small = simulate.asr_interval_widths(n_questions=100, votes_per_item=[6], params=params)[0]
    large = simulate.asr_interval_widths(n_questions=400, votes_per_item=[6], params=params)[0]
    assert large["reference"]["width"] < 0.7 * small["reference"]["width"]
    assert small["reference"]["n"] > 0 and 0 < large["reference"]["value"] < 1


@pytest.mark.parametrize(
    "params",
    [
        JudgeParams(noise=0.5, tie_rate=0.1, susceptibility={"reference": 1.0, "rich_content": 1.0}),
        JudgeParams(noise=1.0, tie_rate=0.15, susceptibility={"reference": 0.5, "factual_error": -0.5}),
        JudgeParams(noise=2.0, tie_rate=0.3, position=0.5, susceptibility={"rich_content": 2.0}),
    ],
)
def test_the_power_table_never_gives_a_wider_interval_for_more_votes_per_item(params):
    ks = [1, 2, 4, 6, 8, 12, 24]
    rows = simulate.asr_interval_widths(n_questions=142, votes_per_item=ks, params=params)
    assert [r["votes_per_item"] for r in rows] == ks
    for group in simulate.SYNTHETIC_GROUPS:
        widths = [r[group]["width"] for r in rows]
        assert all(a >= b for a, b in zip(widths, widths[1:], strict=False)), (group, widths)
    # A judge that is consistent across votes gains from more of them.
    first, last = rows[0]["reference"]["width"], rows[-1]["reference"]["width"]
    if params.noise == 0.5:
        assert last < 0.95 * first
