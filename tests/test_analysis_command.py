"""manage.py analyze: the JSON contract other tools rely on, and its errors."""

import json
from collections import Counter
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from analysis import rows, simulated_judges
from analysis.judge_metrics import POSITION_METRICS
from analysis.simulate import JudgeParams
from tests.factories import make_question, make_study, make_variant


@pytest.fixture
def voted_study(db):
    study = make_study(slug="demo-s", votes_per_item=4)
    for i in range(12):
        q = make_question(study, a1="short answer " * (i + 1), a2="a longer answer " * 8)
        make_variant(q, kind="reference", of="a2" if i % 2 else "a1")
        make_variant(q, kind="factual_error", text="Wrong facts. " * 5)
    simulated_judges.judge_simulate(study=study, name="sim-1", params=JudgeParams(position=0.5), seed=1)
    simulated_judges.raters_simulate(study=study, raters=6, params=JudgeParams(), seed=2, flag_share=0.2)
    return study


def run_json(*args):
    out = StringIO()
    call_command("analyze", *args, "--json", "--bootstrap", "200", stdout=out)
    return json.loads(out.getvalue())


def test_the_json_has_the_keys_of_the_contract(voted_study):
    result = run_json("--study", "demo-s")
    assert result["study"] == "demo-s"
    assert {"filters", "judges", "columns", "rows"} <= result.keys()
    assert result["columns"] == list(rows.COLUMNS) and all(list(r) == result["columns"] for r in result["rows"])
    by_name = {j["judge"]: j for j in result["judges"]}
    assert by_name["sim-1"]["kind"] == "simulated" and by_name["Humans"]["kind"] == "human"
    assert by_name["sim-1"]["n_votes"] == 12 * 3 * 4
    table = rows.select(result["rows"], judge="sim-1")
    for kind in ("reference", "factual_error"):
        rate = rows.one(table, metric="asr", group=kind, bloom="")
        assert rate["ci_lo"] <= rate["estimate"] <= rate["ci_hi"] and isinstance(rate["n"], int)
    assert [r["group"] for r in rows.select(table, metric="accuracy", bloom="")] == ["factual_error"]
    position = ("position_first", "votes_tied", "position_second", "position_diff")
    assert [r["metric"] for r in rows.select(table, metric=position, bloom="")] == list(position)
    longer = rows.one(table, metric="longer_wins")
    assert longer["convention"] == "tie_half; words" and isinstance(longer["estimate"], float)
    bins = rows.select(table, metric="verbosity_bin")
    assert bins and all(b["group"].split("-")[0].isdigit() and b["n"] is not None for b in bins)
    assert {r["group"] for r in rows.select(table, metric="lc_winrate")} == {"control", "reference", "factual_error"}
    human_nf = rows.select(result["rows"], judge="Human-NF")
    assert [r["metric"] for r in human_nf] == list(position)


def test_filters_are_echoed_with_the_votes_each_one_excluded(voted_study):
    plain = run_json("--study", "demo-s")
    with_flagged = run_json("--study", "demo-s", "--include-flagged", "--min-ms", "100000")
    assert plain["filters"]["excluded"]["flagged_rater"] > 0
    assert with_flagged["filters"]["include_flagged"] is True
    assert with_flagged["filters"]["excluded"]["flagged_rater"] == 0
    assert with_flagged["filters"]["excluded"]["too_fast"] > 0


def test_a_threshold_of_zero_is_a_threshold_not_the_studys_own(voted_study):
    voted_study.min_response_ms = 100_000
    voted_study.save(update_fields=["min_response_ms"])
    assert run_json("--study", "demo-s")["filters"]["excluded"]["too_fast"] > 0
    assert run_json("--study", "demo-s", "--min-ms", "0")["filters"]["excluded"]["too_fast"] == 0


def test_a_bloom_filter_leaves_only_that_level(voted_study):
    result = run_json("--study", "demo-s", "--bloom", "creating")
    assert result["filters"]["n_votes_counted"] == 0
    for j in result["judges"]:
        rate = rows.one(result["rows"], judge=j["judge"], metric="asr", group="reference", bloom="")
        assert rate["estimate"] is None and rate["n"] == 0


def test_it_rejects_an_unknown_study_and_bad_filters(voted_study):
    with pytest.raises(CommandError, match="no study"):
        call_command("analyze", "--study", "nope", "--json")
    with pytest.raises(CommandError, match="--bloom"):
        call_command("analyze", "--study", "demo-s", "--bloom", "dreaming")
    with pytest.raises(CommandError, match="--measure"):
        call_command("analyze", "--study", "demo-s", "--measure", "inches")


def test_the_text_report_names_every_judge(voted_study):
    out = StringIO()
    call_command("analyze", "--study", "demo-s", "--bootstrap", "50", stdout=out)
    assert "sim-1 (simulated)" in out.getvalue() and "random judge (chance level)" in out.getvalue()


def test_the_simulate_command_stores_the_judges_biases_and_votes(db):
    from annotations.models import Judge, Vote

    study = make_study(slug="sim-s", votes_per_item=2)
    for _ in range(3):
        make_question(study)
    out = StringIO()
    call_command("simulate", "--study", "sim-s", "--name", "biased", "--position", "1.5", stdout=out)
    judge = Judge.objects.get(name="biased")
    assert judge.kind == "simulated" and judge.params["position"] == 1.5
    assert Vote.objects.filter(judge=judge).count() == 6 and "6 votes" in out.getvalue()
    call_command("simulate", "--study", "sim-s", "--raters", "3", stdout=out)
    assert Vote.objects.filter(judge__kind="human").count() == 6
    with pytest.raises(CommandError, match="susceptibility"):
        call_command("simulate", "--study", "sim-s", "--susceptibility", "[1]")
    with pytest.raises(CommandError, match="at least 2 raters"):
        call_command("simulate", "--study", "sim-s", "--raters", "1", "--seed", "9")


def test_the_json_names_its_conventions_and_its_family_of_tests(voted_study):
    result = run_json("--study", "demo-s")
    conventions = result["conventions"]
    assert conventions["longer_wins_ties"] == "a tie counts half a win"
    assert "control" in conventions["accuracy_base"] and "both" in conventions["asr_base"]
    assert conventions["runs"] == "latest" and conventions["p_adjust"] == "holm"
    assert conventions["cluster_unit"].startswith("question")
    assert {
        "interval_item_metrics",
        "interval_vote_metrics",
        "interval_fallback",
        "position_test",
    } <= conventions.keys()
    tests = result["tests"]["position"]
    assert tests["adjust"] == "holm" and tests["m"] >= 2
    table = rows.select(result["rows"], judge="sim-1")
    diff = rows.one(table, metric="position_diff", bloom="")
    assert diff["p_adjusted"] >= diff["p_value"]
    for share in ("first", "tie", "second", "diff"):
        found = rows.one(table, metric=POSITION_METRICS[share], bloom="")
        assert found["ci_lo"] <= found["ci_hi"]
    by_bloom = [r for r in rows.select(table, metric="position_diff") if r["bloom"]]
    assert by_bloom and all((r["p_adjusted"] is None) == (r["p_value"] is None) for r in by_bloom)
    bins = rows.select(table, metric="verbosity_bin")
    assert bins and all((b["ci_lo"] is None) == (b["estimate"] is None) for b in bins)
    kappa = rows.one(result["rows"], judge="humans", metric="fleiss_kappa")
    assert kappa is None or (kappa["ci_lo"] is None) == (kappa["ci_hi"] is None)


@pytest.mark.parametrize(
    ("flag", "planted", "other"), [("--label-bias", "label", "position"), ("--position", "position", "label")]
)
def test_a_judge_simulated_with_one_bias_shows_that_bias_and_not_the_other(db, flag, planted, other):
    from annotations.models import Vote

    study = make_study(slug="lab-s", votes_per_item=4)
    for i in range(40):
        make_question(study, a1=f"answer {i} one", a2=f"answer {i} two")
    call_command("simulate", "--study", "lab-s", "--name", "one-bias", flag, "1.2", "--noise", "0", stdout=StringIO())
    votes = Vote.objects.filter(judge__name="one-bias")
    cells = Counter(votes.values_list("shown_first", "labels_swapped"))
    assert cells == {("a1", False): 40, ("a1", True): 40, ("a2", False): 40, ("a2", True): 40}
    assert set(votes.values_list("label_scheme", flat=True)) == {"ab"}
    table = rows.select(run_json("--study", "lab-s")["rows"], judge="one-bias", convention="conditional")
    effects = {
        "position": rows.one(table, metric="position_log_odds"),
        "label": rows.one(table, metric="label_log_odds", group="ab"),
    }
    assert effects[planted]["ci_lo"] <= 1.2 <= effects[planted]["ci_hi"] and effects[planted]["ci_lo"] > 0.5
    assert effects[other]["ci_lo"] <= 0 <= effects[other]["ci_hi"]
    assert effects["label"]["note"].startswith("A / ")


def test_people_cannot_be_simulated_with_a_label_bias(db):
    study = make_study(slug="lab-h", votes_per_item=2)
    make_question(study)
    with pytest.raises(CommandError, match="no labels"):
        call_command("simulate", "--study", "lab-h", "--raters", "3", "--label-bias", "1")
