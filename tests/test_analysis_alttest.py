"""The Alternative Annotator Test (analysis.alttest, Calderon, Reichart and Dror 2025): a
hand-computed case, simulations with a known truth (a judge better than the raters passes, a
worse one fails, each rater's test holds its level at the boundary), and equality with the
authors' own procedure on MT-bench's human votes against its GPT-4 judge."""

import csv
import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.urls import reverse
from scipy import stats

from analysis import current_report, rows, simulated_judges, tables
from analysis.alttest import EPSILON, alt_test, benjamini_yekutieli
from analysis.compute import Options
from analysis.simulate import JudgeParams
from biasstudy.datasets import dataset_path
from tests.factories import human_pool, make_judge, make_question, make_study, make_variant, make_vote

# Three raters A, B, C on four items; labels x, y, z. The left-out rater's and the judge's
# share of the other raters agreeing, item by item (d = rater wins - judge wins):
#   item 1: x x x, judge x: every share 2/2, a draw for all        d_A 0, d_B 0, d_C 0
#   item 2: x x y, judge x: A, B draw at 1/2; C 0/2 against 2/2    d_A 0, d_B 0, d_C -1
#   item 3: x y y, judge x: A draws at 0/2; B, C draw at 1/2       d_A 0, d_B 0, d_C 0
#   item 4: y x x, judge z: A draws at 0/2; B, C 1/2 against 0/2   d_A 0, d_B 1, d_C 1
HAND = {
    1: {"A": "x", "B": "x", "C": "x"},
    2: {"A": "x", "B": "x", "C": "y"},
    3: {"A": "x", "B": "y", "C": "y"},
    4: {"A": "y", "B": "x", "C": "x"},
}
HAND_JUDGE = {1: "x", 2: "x", 3: "x", 4: "z"}


def labels_of(table: dict) -> tuple[list, list, list]:
    items, raters, labels = [], [], []
    for item, by_rater in table.items():
        for rater, label in by_rater.items():
            items.append(item)
            raters.append(rater)
            labels.append(label)
    return items, raters, labels


def run(table=HAND, judge=HAND_JUDGE, **settings):
    return alt_test(*labels_of(table), list(judge), list(judge.values()), **settings)


def test_a_hand_computed_case_gives_each_raters_advantages_p_values_and_the_verdict():
    result = run(epsilon=0.2, min_items=4)
    by_rater = {r.rater: r for r in result.raters}
    assert (result.n_items, result.n_raters, result.n_tested) == (4, 3, 3)
    # The judge's wins: A 4 of 4; B and C 3 of 4 (item 4). The raters': A 4, B 4, C 3 of 4.
    assert [by_rater[h].judge_advantage for h in "ABC"] == [1.0, 0.75, 0.75]
    assert [by_rater[h].rater_advantage for h in "ABC"] == [1.0, 1.0, 0.75]
    assert result.advantage_probability == pytest.approx((1 + 0.75 + 0.75) / 3)
    # A: d = 0, 0, 0, 0, no variance below epsilon: t = -inf, p = 0.
    assert by_rater["A"].p_value == 0.0
    # B: d = 0, 0, 0, 1: mean 1/4, sd 1/2, t = (1/4 - 0.2) / (1/2 / 2) = 0.2 on 3 df.
    assert by_rater["B"].p_value == pytest.approx(stats.t.cdf(0.2, 3), rel=1e-12)
    # C: d = 0, -1, 0, 1: mean 0, sd sqrt(2/3), t = -0.2 / sqrt(2/3 / 4) on 3 df.
    assert by_rater["C"].p_value == pytest.approx(stats.t.cdf(-0.2 / np.sqrt(2 / 3 / 4), 3), rel=1e-12)
    for h, d in {"A": [0, 0, 0, 0], "B": [0, 0, 0, 1], "C": [0, -1, 0, 1]}.items():
        if h != "A":
            assert by_rater[h].p_value == pytest.approx(stats.ttest_1samp(d, 0.2, alternative="less").pvalue)
    # BY over m = 3: thresholds i/3 * 0.05 / (1 + 1/2 + 1/3); only A's p (0) is below the first.
    assert [by_rater[h].rejected for h in "ABC"] == [True, False, False]
    assert result.winning_rate == pytest.approx(1 / 3)
    assert result.passes is False
    assert result.verdict == "fails"


def test_an_untested_rater_still_counts_among_the_others_and_thin_items_are_dropped():
    table = {k: dict(v) for k, v in HAND.items()}
    table[3]["D"] = "x"  # D has one item: not tested, but one of B's others on item 3
    table[5] = {"A": "x"}  # one human label: not an item of the test
    result = run(table, {**HAND_JUDGE, 5: "x"}, epsilon=0.2, min_items=4)
    by_rater = {r.rater: r for r in result.raters}
    assert (result.n_items, result.n_raters, result.n_tested) == (4, 4, 3)
    assert by_rater["A"].n_items == 4
    # Item 3 for B: others A x, C y, D x: B 1/3 against the judge's 2/3, so B no longer draws.
    assert by_rater["B"].rater_advantage == 0.75
    assert by_rater["B"].judge_advantage == 0.75


def test_an_item_the_judge_did_not_label_is_left_out():
    judge = dict(HAND_JUDGE)
    del judge[4]
    result = run(judge=judge, min_items=3)
    assert result.n_items == 3
    assert [r.judge_advantage for r in result.raters] == [1.0, 1.0, 1.0]


def test_it_names_the_numbers_when_the_data_cannot_support_a_verdict():
    too_few_items = run(min_items=30)
    assert too_few_items.passes is None
    assert too_few_items.winning_rate is None and too_few_items.advantage_probability is None
    assert too_few_items.verdict == (
        "no verdict: 0 of 3 raters have 30 or more items with 2+ human labels and a label of the judge "
        "(3 needed; the most any other rater has is 4)"
    )
    two_raters = run({k: {h: v[h] for h in "AB"} for k, v in HAND.items()}, min_items=4)
    assert two_raters.passes is None and two_raters.n_tested == 2
    assert two_raters.winning_rate is not None  # the figures, but no verdict on two comparisons
    assert two_raters.reason.startswith("2 of 2 raters have 4 or more items")
    no_overlap = run(judge={9: "x"}, min_items=4)
    assert no_overlap.verdict == (
        "no verdict: no item has 2 or more human labels and a label of the judge "
        "(4 items have 2+ human labels; the judge labelled 0 of the people's 4 items)"
    )
    assert run(table={}).verdict == "no verdict: no human votes with a rater id"


def test_bad_input_is_refused_with_what_is_wrong():
    with pytest.raises(ValueError, match="rater 'A' has more than one label on item 1"):
        alt_test([1, 1], ["A", "A"], ["x", "y"], [1], ["x"])
    with pytest.raises(ValueError, match="the judge has more than one label on item 7:"):
        alt_test([1, 1], ["A", "B"], ["x", "y"], [1, 7, 7], ["x", "y", "x"])
    with pytest.raises(ValueError, match="epsilon must be in"):
        run(epsilon=1.5)
    with pytest.raises(ValueError, match="min_votes must be at least 2"):
        run(min_votes=1)
    with pytest.raises(ValueError, match="a label is missing"):
        alt_test([1, 1], ["A", "B"], ["x", None], [1], ["x"])


def test_benjamini_yekutieli_rejects_the_smallest_p_values_up_to_the_last_under_its_line():
    # m = 4, H_4 = 25/12: the line i/4 * 0.05 * 12/25 = 0.006 i. The third p-value (0.017) is
    # under 0.018, so the first three are rejected although the second (0.0125) is above 0.012.
    p = np.array([0.5, 0.0125, 0.017, 0.001])
    assert benjamini_yekutieli(p, 0.05).tolist() == [False, True, True, True]
    assert benjamini_yekutieli(np.array([0.02, np.nan]), 0.05).tolist() == [False, False]
    assert benjamini_yekutieli(np.array([]), 0.05).tolist() == []


# --- simulations with a known truth -----------------------------------------------------------


def crowd(rng, *, n_items, n_raters, per_item, rater_right, judge_right, n_labels=3):
    """A study with a latent true label per item: each item labelled by ``per_item`` raters
    drawn at random, each right with probability ``rater_right`` (else another label at
    random), and the judge right with ``judge_right``."""
    truth = rng.integers(n_labels, size=n_items)

    def noisy(right: np.ndarray, true: np.ndarray) -> np.ndarray:
        wrong = (true + rng.integers(1, n_labels, size=len(true))) % n_labels
        return np.where(right, true, wrong)

    who = np.argsort(rng.random((n_items, n_raters)), axis=1)[:, :per_item]
    items = np.repeat(np.arange(n_items), per_item)
    labels = noisy(rng.random(len(items)) < rater_right, truth[items])
    judge = noisy(rng.random(n_items) < judge_right, truth)
    return items, who.ravel(), labels, np.arange(n_items), judge


def pass_rate(seed: int, studies: int, **design) -> float:
    rng = np.random.default_rng(seed)
    verdicts = [alt_test(*crowd(rng, **design), epsilon=EPSILON["crowd"]).passes for _ in range(studies)]
    assert None not in verdicts  # every simulated study supports a verdict
    return float(np.mean(verdicts))


DESIGN = {"n_items": 200, "n_raters": 8, "per_item": 3}  # 75 items per rater


def test_a_judge_closer_to_the_truth_than_the_raters_passes_and_a_worse_one_fails():
    assert pass_rate(1, 100, **DESIGN, rater_right=0.6, judge_right=0.9) >= 0.95
    assert pass_rate(2, 100, **DESIGN, rater_right=0.8, judge_right=0.5) == 0.0
    # A judge exactly as good as the raters, at epsilon 0 (the boundary of every rater's null):
    # the share of raters it beats stays within the 5% level.
    rng = np.random.default_rng(3)
    same = [alt_test(*crowd(rng, **DESIGN, rater_right=0.7, judge_right=0.7), epsilon=0.0) for _ in range(100)]
    assert np.mean([r.n_rejected / r.n_tested for r in same]) <= 0.05


@pytest.mark.parametrize("epsilon", [0.1, 0.15, 0.2])
@pytest.mark.parametrize("n_items", [30, 100])
def test_each_raters_test_keeps_its_level_when_the_judge_is_exactly_epsilon_behind(epsilon, n_items):
    """Two raters: left out, rater A is compared with B alone, so d = 1{A = B} - 1{judge = B}.
    B always says x, A says x with probability 0.6 and the judge with 0.6 - epsilon: the mean
    of d is epsilon, the boundary of A's null. Its test may reject at most 5% of the time."""
    rng = np.random.default_rng(int(epsilon * 100) + n_items)
    draws, rejected = 3000, 0
    items = np.repeat(np.arange(n_items), 2)
    raters = np.tile(["A", "B"], n_items)
    for _ in range(draws):
        labels = np.tile(["x", "x"], (n_items, 1))
        labels[:, 0] = np.where(rng.random(n_items) < 0.6, "x", "y")
        judge = np.where(rng.random(n_items) < 0.6 - epsilon, "x", "y")
        result = alt_test(items, raters, labels.ravel(), np.arange(n_items), judge, epsilon=epsilon, min_tested=1)
        rejected += next(r for r in result.raters if r.rater == "A").p_value <= 0.05
    # 5% plus two standard errors of the simulation (3,000 draws: 0.4 points each).
    assert rejected / draws <= 0.05 + 2 * np.sqrt(0.05 * 0.95 / draws)


# --- the authors' procedure on MT-bench ---------------------------------------------------------

MTBENCH = "mtbench_human_judgments"

# The authors' alt_test (github.com/nitaytech/AltTest, alt_test_example.ipynb, commit
# 18428b1f4f34ac61c4978bc180263b90111e7337; scipy 1.16.3), run unchanged outside this repository
# with scoring_function "accuracy", q_fdr 0.05, min_humans_per_instance 2 and
# min_instances_per_human 30, on `human.csv` (every annotator; author_0's repeated vote on
# question 128, turn 1, kept once: both votes are ties) against `gpt4_pair.csv` (any "tie*" a
# tie), an instance per (question, turn, model pair in alphabetical order) with the labels
# a1 / a2 / tie of that order, as our importer makes them. 65 annotators, 960 instances kept,
# 49 annotators tested (16 skipped with fewer than 30 instances).
AUTHORS = {  # epsilon: (winning rate, advantage probability)
    0.1: (1 / 49, 0.8613391814232719),
    0.15: (6 / 49, 0.8613391814232719),
    0.2: (19 / 49, 0.8613391814232719),
}


def mtbench_labels() -> tuple[list, list, list, list, list]:
    folder = dataset_path(MTBENCH)

    def key_label(row: dict) -> tuple[str, str]:
        first, second = sorted((row["model_a"], row["model_b"]))
        key = f"{row['question_id']}-t{row['turn']}-{first}-vs-{second}"
        winner = row["winner"]
        if winner.startswith("tie"):
            return key, "tie"
        return key, "a1" if row[winner] == first else "a2"

    seen, items, raters, labels = set(), [], [], []
    with open(folder / "human.csv", newline="") as f:
        for row in csv.DictReader(f):
            key, label = key_label(row)
            if (key, row["judge"]) not in seen:
                seen.add((key, row["judge"]))
                items.append(key)
                raters.append(row["judge"])
                labels.append(label)
    with open(folder / "gpt4_pair.csv", newline="") as f:
        judge = [key_label(row) for row in csv.DictReader(f)]
    return items, raters, labels, [k for k, _ in judge], [label for _, label in judge]


@pytest.mark.dataset(MTBENCH)
def test_it_gives_what_the_authors_procedure_gives_on_mtbench_at_each_epsilon():
    labels = mtbench_labels()
    for epsilon, (omega, rho) in AUTHORS.items():
        result = alt_test(*labels, epsilon=epsilon)
        assert (result.n_items, result.n_raters, result.n_tested) == (960, 65, 49)
        assert result.winning_rate == omega
        assert result.advantage_probability == rho
        assert result.passes is False


@pytest.mark.dataset(MTBENCH)
def test_the_imported_mtbench_study_reports_the_authors_figures_as_rows(db):
    study = make_study(status="draft", slug="mtbench")
    call_command("import_votes", str(dataset_path(MTBENCH)), "--format", "mtbench", "--study", "mtbench", verbosity=0)
    for epsilon, (omega, rho) in AUTHORS.items():
        table = current_report.study_analyze(study=study, options=Options(alt_epsilon=epsilon, bootstrap=20))["rows"]
        where = {"judge": "mtbench-gpt4-pair", "convention": f"epsilon={epsilon:g}"}
        winning = rows.one(table, metric="alt_test_winning_rate", **where)
        assert winning["estimate"] == pytest.approx(omega, abs=1e-15)
        assert winning["n"] == 49
        assert winning["note"] == "fails"
        advantage = rows.one(table, metric="alt_test_advantage_probability", **where)
        assert advantage["estimate"] == pytest.approx(rho, abs=1e-12)  # the raters' order may differ
        verdict = rows.one(table, metric="alt_test_passes", **where)
        assert (verdict["estimate"], verdict["n"]) == (0.0, 960)
        assert rows.select(table, judge="mtbench-human", metric="alt_test_passes") == []  # people are not tested


# --- where it shows -----------------------------------------------------------------------------


@pytest.fixture
def rated_study(db):
    """60 items, each voted by 3 of 4 simulated raters (about 45 items each) and 3 times by a
    simulated judge."""
    study = make_study(slug="alt-s", votes_per_item=3)
    for _ in range(20):
        question = make_question(study)
        make_variant(question, kind="reference")
        make_variant(question, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.judge_simulate(study=study, name="sim-judge", params=JudgeParams(position=0.3), seed=1)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), seed=2)
    return study


def analyze_json(*args: str) -> dict:
    out = StringIO()
    call_command("analyze", "--study", "alt-s", "--json", "--bootstrap", "20", *args, stdout=out)
    return json.loads(out.getvalue())


def test_the_command_api_csv_and_dashboard_show_each_judges_alt_test(rated_study, staff_client, token_client):
    report = analyze_json("--alt-raters", "expert")
    verdict = rows.one(report["rows"], judge="sim-judge", metric="alt_test_passes")
    assert verdict["convention"] == "epsilon=0.2" and verdict["note"] in ("passes", "fails")
    assert rows.one(report["rows"], judge="sim-judge", metric="alt_test_winning_rate")["n"] == 4
    assert "epsilon 0.2 (expert raters)" in report["conventions"]["alt_test"]
    api = token_client.get(reverse("api:study-metrics", args=["alt-s"]), {"bootstrap": 20, "alt_raters": "expert"})
    assert rows.one(api.json()["rows"], judge="sim-judge", metric="alt_test_passes") == verdict
    csv_text = b"".join(staff_client.get(reverse("analysis:export", args=["alt-s", "metrics"])).streaming_content)
    assert b"alt_test_winning_rate" in csv_text and b"alt_test_advantage_probability" in csv_text
    page = staff_client.get(reverse("analysis:study", args=["alt-s"]), {"alt_raters": "expert"}).content.decode()
    assert "Judges against people" in page
    shown = tables.judges_against_people(report)
    assert [(a["judge"], a["epsilon"], a["n_tested"]) for a in shown] == [("sim-judge", "0.2", 4)]
    assert f">{verdict['note']}<" in page


def test_the_settings_reach_the_test_and_a_missing_verdict_is_named(rated_study):
    report = analyze_json("--alt-epsilon", "0", "--alt-min-items", "1000", "--alt-min-votes", "3")
    found = rows.one(report["rows"], judge="sim-judge", metric="alt_test_passes")
    assert found["estimate"] is None and found["convention"] == "epsilon=0"
    assert found["note"].startswith("no verdict: 0 of 4 raters have 1000 or more items with 3+ human labels")
    assert rows.one(report["rows"], judge="sim-judge", metric="alt_test_winning_rate")["estimate"] is None
    with pytest.raises(Exception, match="alt-min-votes"):
        analyze_json("--alt-min-votes", "1")


def test_a_study_without_people_has_no_alt_test_rows(db):
    study = make_study(slug="alone-s")
    make_question(study)
    simulated_judges.judge_simulate(study=study, name="sim-judge", params=JudgeParams(), seed=1)
    assert rows.select(current_report.study_analyze(study=study)["rows"], metric="alt_test_passes") == []


def test_peoples_votes_without_rater_ids_give_no_verdict_and_say_so(db):
    """As PRD's MTurk votes: people's votes, but no one to leave out."""
    study = make_study(slug="anonymous-s")
    item = make_question(study).items.get()
    for _ in range(3):
        make_vote(item, human_pool(study), client_ms=5000)
    make_vote(item, make_judge(name="sim-judge"))
    found = rows.one(current_report.study_analyze(study=study)["rows"], judge="sim-judge", metric="alt_test_passes")
    assert (found["estimate"], found["n"]) == (None, 0)
    assert found["note"] == "no verdict: no human votes with a rater id"


def test_against_the_dawid_skene_consensus_of_the_others_a_judge_that_is_always_right_is_never_behind():
    # Two perfect raters and four careless ones (right 40% of the time, "tie" otherwise), every
    # rater on every item of A1 / A2 truths; a judge always right. Where the careless others
    # say "tie" together, their share outvotes the perfect ones and the judge loses the item to a
    # careless rater left out; the Dawid-Skene consensus of the others trusts the perfect raters
    # and is the truth, so the judge gives the reference on every item: rho^f_j = 1 for all.
    rng = np.random.default_rng(0)
    n_items = 150
    truth = rng.choice([1, -1], n_items)
    items, raters, labels = [], [], []
    for r in range(6):
        items += list(range(n_items))
        raters += [f"R{r}"] * n_items
        labels += list(truth if r < 2 else np.where(rng.random(n_items) < 0.4, truth, 0))
    judge = (np.arange(n_items), truth)
    by_consensus = alt_test(items, raters, labels, *judge, reference="dawid_skene")
    by_share = alt_test(items, raters, labels, *judge)
    assert [r.judge_advantage for r in by_consensus.raters] == [1.0] * 6
    assert [r.judge_advantage for r in by_share.raters][:2] == [1.0, 1.0]
    assert max(r.judge_advantage for r in by_share.raters[2:]) < 0.9
    # The perfect raters give the reference too (a draw on every item); the careless ones only
    # where they are right.
    assert [r.rater_advantage for r in by_consensus.raters[:2]] == [1.0, 1.0]
    careless = np.array(labels[2 * n_items :]).reshape(4, n_items)
    assert [r.rater_advantage for r in by_consensus.raters[2:]] == list(np.mean(careless == truth, axis=1))


def test_the_dawid_skene_reference_refuses_labels_it_cannot_read_and_unknown_references():
    with pytest.raises(ValueError, match=r"\+1 \(A1\), -1 \(A2\) or 0"):
        alt_test(
            [1, 1, 2, 2],
            ["A", "B", "A", "B"],
            ["x", "y", "x", "y"],
            [1, 2],
            ["x", "y"],
            min_items=2,
            reference="dawid_skene",
            min_tested=1,
        )
    with pytest.raises(ValueError, match="unknown alt-test reference"):
        alt_test([1, 1], ["A", "B"], [1, 1], [1], [1], reference="majority")


def test_a_study_can_choose_the_dawid_skene_reference_from_the_command_api_and_dashboard(
    rated_study, staff_client, token_client
):
    report = analyze_json("--alt-reference", "dawid_skene")
    verdict = rows.one(report["rows"], judge="sim-judge", metric="alt_test_passes")
    assert verdict["convention"] == "epsilon=0.1; reference=dawid_skene"
    assert verdict["note"] in ("passes", "fails")
    assert "the Dawid-Skene consensus of the other raters" in report["conventions"]["alt_test"]
    api = token_client.get(
        reverse("api:study-metrics", args=["alt-s"]), {"bootstrap": 20, "alt_reference": "dawid_skene"}
    )
    assert rows.one(api.json()["rows"], judge="sim-judge", metric="alt_test_passes") == verdict
    assert [a["epsilon"] for a in tables.judges_against_people(report)] == ["0.1"]
    page = staff_client.get(reverse("analysis:study", args=["alt-s"]), {"alt_reference": "dawid_skene"})
    assert page.status_code == 200 and "Judges against people" in page.content.decode()
    with pytest.raises(Exception, match="alt-reference"):
        analyze_json("--alt-reference", "majority")
