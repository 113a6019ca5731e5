"""Would a judge that ignores the answers do as well? The content-blind baseline of ASR and
accuracy (analysis.content_blind), its rows, and Table 1's rule of ranking only the judges
that differ from it (docs/STATISTICS.md)."""

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy.special import expit

from analysis import compute, content_blind, current_report, metrics, rows, simulated_judges, tables
from analysis.management.commands.load_demo import DEMO_SIMULATED_JUDGES, DEMO_SLUG
from analysis.simulate import JudgeParams, simulate_votes, synthetic_items, votes_frame
from annotations.models import Study
from tests.analysis_frames import frame, item, votes

SHARES = (0.6, 0.1, 0.3)  # first, tie, second


def test_an_items_preference_is_the_convolution_of_its_votes_by_hand():
    # One vote in each order: A1 wins with (A1, A2) = 0.6 · 0.3 or one of them a tie and the
    # other A1 (0.6 · 0.1 + 0.1 · 0.3); a tie with (first, first), (second, second) or two ties.
    assert content_blind.item_preference_probabilities(1, 1, 0, SHARES) == pytest.approx((0.27, 0.27, 0.46))
    # Both shown A1 first: A1 by 0.6² + 2 · 0.6 · 0.1, A2 by 0.3² + 2 · 0.3 · 0.1.
    assert content_blind.item_preference_probabilities(2, 0, 0, SHARES) == pytest.approx((0.48, 0.15, 0.37))
    # Of unknown order, A1 and A2 alike: (0.45, 0.45, 0.1) per vote.
    p = content_blind.item_preference_probabilities(0, 0, 1, SHARES)
    assert p == pytest.approx((0.45, 0.45, 0.1))


def test_the_expected_ratio_is_exact_by_hand_and_the_simulated_studies_agree():
    # Two questions: in the base set with 0.3 and 0.7, hits then with 0.2 and 0.9.
    a, b, x, y = 0.3, 0.7, 0.2, 0.9
    by_hand = (a * (1 - b) * x + (1 - a) * b * y + a * b * (x + y) / 2) / (1 - (1 - a) * (1 - b))
    assert content_blind.expected_ratio(np.array([a, b]), np.array([x, y])) == pytest.approx(by_hand, abs=1e-12)
    assert content_blind.expected_ratio(np.array([0.0]), np.array([0.5])) is None
    # A hundred questions of those two kinds: the mean of 200,000 simulated studies.
    p_base, p_hit = np.array([a, b] * 50), np.array([x, y] * 50)
    simulated = content_blind.simulated_ratios(p_base, p_hit, np.random.default_rng(0), draws=200_000)
    assert simulated.mean() == pytest.approx(content_blind.expected_ratio(p_base, p_hit), abs=3 * simulated.std() / 450)


def test_a_tiny_design_gives_its_hand_computed_rows():
    # One question, 2 votes per item, one in each order. Control: A1 (shown first), then A2
    # (shown first): first, first. Reference: A1 (first), then tie. Shares: first 3/4, tie 1/4.
    # Each item then: A1 with 3/4 · 1/4, A2 the same, a tie with 9/16 + 1/16 = 5/8.
    rows_ = votes(item(1, 1, "control", 1, 2), "a1 a2") + votes(item(2, 1, "reference", 1, 2), "a1 tie")
    result = compute.analyze(frame(rows_), study="tiny", options=compute.Options(bootstrap=50))
    blind = rows.one(result["rows"], metric="asr_content_blind", group="reference")
    # Non-semantic: base = control A1 or tie (13/16), a hit = reference A2 (3/16); one question.
    assert blind["estimate"] == pytest.approx(3 / 16)
    assert blind["n"] == 1
    assert blind["note"] == "position shares first 75.0%, tie 25.0%, second 0.0%"
    # The judge's ASR is 0 (control tied, reference A1): what the twin scores 13 times in 16.
    assert rows.estimate(result["rows"], metric="asr", group="reference", bloom="") == 0.0
    assert blind["p_value"] == 1.0
    assert (blind["ci_lo"], blind["ci_hi"]) == (0.0, 1.0)


def _study(params: JudgeParams, *, seed: int, n_questions: int = 40) -> tuple[dict, dict]:
    """One simulated study of ``params`` at 6 votes per item: (the judge's figures, their
    baselines), each by (metric, group)."""
    items = synthetic_items(n_questions, seed=seed)
    frame_ = votes_frame(items, simulate_votes(items, params, votes_per_item=6, seed=seed))
    prefs = metrics.item_preferences(frame_)
    ind = metrics.asr_indicators(metrics.oriented_pairs(prefs))
    groups = sorted(ind["group"].unique())
    semantics = dict(zip(ind["group"], ind["semantics"], strict=False))
    observed = {}
    for g in groups:
        sub = ind[ind["group"] == g]
        observed[("asr", g)] = sub["asr_hit"].sum() / sub["asr_base"].sum() if sub["asr_base"].sum() else None
        if semantics[g] == "degrading":
            observed[("accuracy", g)] = sub["acc_hit"].mean()
    _, found = content_blind.judge_baselines(frame_, prefs, groups, semantics, observed, judge="sim", seed=seed)
    return observed, found


BLIND = JudgeParams(position=1.2, noise=0.0, tie_rate=0.1)  # u = ± position only: content-blind
SEEING = JudgeParams(position=1.2, noise=3.0, tie_rate=0.1)  # the same position effect, and content


def test_a_position_only_judge_scores_its_baseline_and_a_content_sensitive_one_differs():
    studies = 150
    blind = [_study(BLIND, seed=s) for s in range(studies)]
    keys = list(blind[0][1])
    assert len(keys) == 4  # ASR of three groups, accuracy of the degrading one
    # The twin at the planted shares: first (1 − t) σ(1.2), second (1 − t) σ(−1.2).
    planted = (0.9 * expit(1.2), 0.1, 0.9 * expit(-1.2))
    for key in keys:
        asr = np.array([o[key] for o, _ in blind if o[key] is not None], dtype=float)
        base = np.array([f[key]["value"] for _, f in blind], dtype=float)
        # Unbiased: the baselines' mean is the judge's mean ASR within the simulation's error.
        assert abs(base.mean() - asr.mean()) < 3 * asr.std() / np.sqrt(len(asr)), key
        # And the exact expectation at the planted shares is the mean ASR too (known truth).
        metric, g = key
        design = content_blind.item_preference_probabilities(3, 3, 0, planted)
        expected = {"asr": design[1] if g != "factual_error" else design[1] + design[2], "accuracy": design[0]}
        assert abs(expected[metric] - asr.mean()) < 3 * asr.std() / np.sqrt(len(asr)), key
        # The test holds its level: a content-blind judge is told apart in about 5% of studies.
        rejected = np.mean([f[key]["p_value"] < content_blind.ALPHA for _, f in blind])
        assert rejected <= 0.09, (key, rejected)
        # And the range covers the judge's ASR about 95% of the time.
        lo = np.array([f[key]["ci"][0] for _, f in blind])
        hi = np.array([f[key]["ci"][1] for _, f in blind])
        covered = np.mean([(lo[i] <= o[key] <= hi[i]) for i, (o, _) in enumerate(blind)])
        assert covered >= 0.91, (key, covered)
    seeing = [_study(SEEING, seed=1000 + s) for s in range(40)]
    for g in ("reference", "rich_content"):
        # Its control and perturbed preferences agree (the same content): it is told apart.
        rejected = np.mean([f[("asr", g)]["p_value"] < content_blind.ALPHA for _, f in seeing])
        assert rejected >= 0.7, (g, rejected)
        assert np.mean([o[("asr", g)] < f[("asr", g)]["value"] for o, f in seeing]) >= 0.95


@pytest.mark.django_db
def test_the_demos_left_preferring_judge_is_ranked_only_where_it_differs_from_its_baseline(staff_client):
    call_command("load_demo", verbosity=0)
    study = Study.objects.get(slug=DEMO_SLUG)
    # A third judge: the demo's left-preferring one without any regard for content.
    simulated_judges.judge_simulate(
        study=study, name="left, content-blind", params=JudgeParams(position=1.2, noise=0.0), seed=7
    )
    result = current_report.study_analyze(study=study)
    table = tables.table1(result)
    left = next(iter(j for j in DEMO_SIMULATED_JUDGES if "left" in j))
    by_name = {r["judge"]: r for r in table["rows"]}
    asr_columns = [i for i, c in enumerate(table["columns"]) if c["metric"] == "asr"]
    assert len(asr_columns) >= 9
    for name in (left, "left, content-blind"):
        for i, cell in enumerate(by_name[name]["cells"]):
            c = table["columns"][i]
            blind = rows.one(result["rows"], judge=name, metric=f"{c['metric']}_content_blind", group=c["group"])
            assert cell["blind"]["value"] == blind["estimate"]
            if blind["p_value"] >= content_blind.ALPHA:
                # No better than ignoring content: no rank, whatever its ASR.
                assert cell["rank"] is None and cell["no_rank"] == content_blind.NO_BETTER
            else:
                assert cell["rank"] is not None and cell["no_rank"] is None
    # Today's demo: first in 9 of its 10 ASR columns without the rule, first in none with it.
    assert not any(by_name[left]["cells"][i]["rank"] == 1 for i in asr_columns)
    # The judge that ignores content is its own twin: ranked in hardly any column, first in none.
    twin = by_name["left, content-blind"]
    assert sum(cell["rank"] is not None for cell in twin["cells"]) <= 2
    assert not any(twin["cells"][i]["rank"] == 1 for i in asr_columns)
    body = staff_client.get(reverse("analysis:study", args=[DEMO_SLUG])).content.decode()
    assert "(blind " in body and "not ranked: no better than ignoring content" in body
    csv = b"".join(staff_client.get(reverse("analysis:export", args=[DEMO_SLUG, "metrics"])).streaming_content)
    assert b"asr_content_blind" in csv and b"accuracy_content_blind" in csv


def test_a_question_without_a_control_preference_is_outside_the_base_set_as_for_the_judge():
    # Question 1 as in the tiny design; question 2 has a reference item but no control votes.
    rows_ = votes(item(1, 1, "control", 1, 2), "a1 a2") + votes(item(2, 1, "reference", 1, 2), "a1 tie")
    rows_ += votes(item(3, 2, "reference", 4, 5), "a2 a2")
    result = compute.analyze(frame(rows_), study="tiny", options=compute.Options(bootstrap=50))
    blind = rows.one(result["rows"], metric="asr_content_blind", group="reference")
    assert blind["n"] == 1
    shares = (4 / 6, 1 / 6, 1 / 6)  # of six votes: four for the answer shown first, a tie, one second
    _, p_a2, _ = content_blind.item_preference_probabilities(1, 1, 0, shares)
    assert blind["estimate"] == pytest.approx(p_a2)


def test_the_control_is_read_relative_to_the_perturbation():
    # The control's two votes both shown A1 first, for A1 (first, first); the reference item
    # perturbs the control's A1 (its A2 is made from it), one vote in each order: A2 (second
    # shown A1 first), tie. Shares: first 1/2, tie 1/4, second 1/4. The control item: A1 with
    # 1/4 + 2 · 1/2 · 1/4 = 1/2, A2 with 1/16 + 2 · 1/4 · 1/4 = 3/16, a tie 5/16. Read relative
    # to the perturbation its A1 is the control's A2: the base set (A1 or tie) 3/16 + 5/16.
    rows_ = votes(item(1, 1, "control", 1, 2), "a1 a1", shown_first="a1")
    rows_ += votes(item(2, 1, "reference", 2, 1), "a2 tie")
    f = frame(rows_)
    shares = content_blind.position_shares(f)
    assert shares == (0.5, 0.25, 0.25)
    pairs = content_blind.pair_probabilities(metrics.item_preferences(f), content_blind.item_designs(f), shares)
    assert pairs["p_base"].tolist() == pytest.approx([0.5])
    assert pairs["p_hit"].tolist() == pytest.approx([content_blind.item_preference_probabilities(1, 1, 0, shares)[1]])
