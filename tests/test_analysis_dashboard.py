"""The results dashboard: staff only on every view and fragment, and it shows the tables."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from analysis import current_report, power, rows, simulated_judges, tables
from analysis.simulate import JudgeParams
from annotations.models import Rater
from tests.factories import human_pool, make_judge, make_question, make_rater, make_study, make_variant, make_vote


@pytest.fixture
def dash_study(db):
    study = make_study(slug="dash-s", votes_per_item=2, gold_min_accuracy=0.8)
    for i in range(6):
        q = make_question(study, a1="word " * (5 + 7 * i), a2="<script>alert(1)</script> longer " * 4)
        make_variant(q, kind="factual_error", text="wrong " * 10)
        make_variant(q, kind="reference", of="a1" if i % 2 else "a2")
    simulated_judges.judge_simulate(study=study, name="sim <b>bold</b>", params=JudgeParams(position=1.0), seed=5)
    simulated_judges.raters_simulate(
        study=study, raters=4, params=JudgeParams(), votes_per_item=2, seed=6, flag_share=0.25
    )
    return study


def urls(slug):
    return [
        reverse("analysis:studies"),
        reverse("analysis:study", args=[slug]),
        reverse("analysis:raters", args=[slug]),
        reverse("analysis:power", args=[slug]),
        reverse("analysis:export", args=[slug, "votes"]),
        reverse("analysis:export", args=[slug, "metrics"]),
    ]


def test_anonymous_visitors_and_non_staff_users_are_sent_to_log_in(dash_study, anon_client):
    user = get_user_model().objects.create_user("rater-person", password="pw-123456789")
    member = Client()
    member.force_login(user)
    for client in (anon_client, member):
        for url in urls("dash-s"):
            for headers in ({}, {"HTTP_HX_REQUEST": "true"}):
                response = client.get(url, **headers)
                assert response.status_code == 302, url
                assert "/admin/login/" in response["Location"]


def test_staff_see_every_table_of_the_paper(dash_study, staff_client):
    response = staff_client.get(reverse("analysis:study", args=["dash-s"]))
    body = response.content.decode()
    assert response.status_code == 200
    for heading in ("Table 1", "Table 2", "Verbosity", "Length-controlled", "Agreement", "By Bloom level"):
        assert heading in body
    assert "Position and label preference" in body
    # Two votes per item: each item a balanced half, one answer under the first label in both.
    assert "not identifiable: within each item one answer keeps the same label" in body  # the simulated judge
    assert "not identifiable: these votes were not given under labels" in body  # the people
    assert "Human-NF" in body and "random judge" in body
    for name in ("forest", "position", "verbosity", "lc", "bloom", "agreement"):
        assert f'<img src="/dashboard/dash-s/plot/{name}.svg"' in body, name
    assert "sim &lt;b&gt;bold&lt;/b&gt;" in body and "sim <b>bold</b>" not in body
    assert 'hx-trigger="every 10s"' in body


def test_an_htmx_request_gets_only_the_results_fragment(dash_study, staff_client):
    response = staff_client.get(
        reverse("analysis:study", args=["dash-s"]), {"include_flagged": "on"}, HTTP_HX_REQUEST="true"
    )
    body = response.content.decode()
    assert response.status_code == 200
    assert body.lstrip().startswith('<div id="results"') and "<html" not in body
    assert "flagged rater 0" in body


def test_bad_filters_are_shown_not_applied(dash_study, staff_client):
    response = staff_client.get(reverse("analysis:study", args=["dash-s"]), {"min_ms": "-5", "bloom": "dreaming"})
    assert response.status_code == 400
    assert "Fix the filters" in response.content.decode()


def test_the_rater_monitor_lists_every_rater_with_flags(dash_study, staff_client):
    body = staff_client.get(reverse("analysis:raters", args=["dash-s"])).content.decode()
    raters = Rater.objects.filter(study=dash_study, participant_id__startswith="SIM-06-")
    assert len(raters) == 4 and all(f">{r.pseudonym}</a>" in body for r in raters)
    assert "SIM-06-" not in body  # pseudonyms: the participant ids are in the payment file
    assert "flagged" in body and "2/5" in body


def test_the_power_page_simulates_interval_widths(dash_study, staff_client):
    params = {
        "n_questions": 40,
        "raters": 10,
        "items_per_rater": 20,
        "susceptibility": 0.5,
        "noise": 1.0,
        "tie_rate": 0.1,
    }
    response = staff_client.get(reverse("analysis:power", args=["dash-s"]), params, HTTP_HX_REQUEST="true")
    body = response.content.decode()
    assert response.status_code == 200 and "Votes per item" in body and "interval width" in body


def test_the_power_page_simulates_at_most_a_bounded_number_of_votes_per_item(dash_study, staff_client):
    # 10,000 raters × 1,000 items over 40 questions supply thousands of votes per item; drawing
    # them all took over a minute in the request. The table stops at the bound and says so.
    from analysis.power import MAX_SIMULATED_VOTES_PER_ITEM

    params = {"n_questions": 40, "raters": 10_000, "items_per_rater": 1000, "susceptibility": 0.5, "noise": 1.0}
    response = staff_client.get(reverse("analysis:power", args=["dash-s"]), {**params, "tie_rate": 0.1})
    items = 40 * (len(power.power_groups(study=dash_study)) + 1)  # the study's own groups
    assert response.context["rows"]["supplied"] == round(10_000 * 1000 / items, 2)  # as it is, not floored
    assert max(row["votes_per_item"] for row in response.context["rows"]["rows"]) == MAX_SIMULATED_VOTES_PER_ITEM
    assert f"The table stops at {MAX_SIMULATED_VOTES_PER_ITEM}" in response.content.decode()


def test_the_dashboard_downloads_the_same_csv_as_the_command(dash_study, staff_client):
    from analysis import exports

    response = staff_client.get(reverse("analysis:export", args=["dash-s", "votes"]))
    assert response["Content-Type"].startswith("text/csv") and response.streaming
    streamed = b"".join(response.streaming_content).decode()
    assert streamed == "".join(exports.csv_lines(exports.votes_rows(dash_study)))
    assert staff_client.get(reverse("analysis:export", args=["dash-s", "secrets"])).status_code == 404


def test_the_dashboard_works_when_raters_have_entered_but_only_machines_have_voted(staff_client, db):
    # Found by the access matrix: the votes' rater column was all None and would not merge
    # with the raters who had entered but not yet voted.
    from tests.factories import make_judge, make_question, make_rater, make_study, make_vote

    study = make_study()
    item = make_question(study).items.get()
    make_rater(study)
    make_vote(item, make_judge())
    response = staff_client.get(f"/dashboard/{study.slug}/")
    assert response.status_code == 200


@pytest.fixture
def first_picker(db):
    """Twenty questions; a simulated judge that all but always picks the answer shown first."""
    study = make_study(slug="first-s", votes_per_item=2)
    for _ in range(20):
        make_question(study)
    simulated_judges.judge_simulate(
        study=study, name="first-picker", params=JudgeParams(position=12.0, tie_rate=0), seed=1
    )
    return study


def test_p_values_below_0_001_print_as_such_with_holm_beside_them(first_picker, staff_client):
    body = staff_client.get(reverse("analysis:study", args=["first-s"])).content.decode()
    assert "p (Holm)" in body
    # z = sqrt(20) on 20 question clusters: p about 8e-6, printed "< 0.001" (escaped), never "0.000".
    assert body.count("&lt; 0.001") >= 2 and "0.000<" not in body
    csv = b"".join(staff_client.get(reverse("analysis:export", args=["first-s", "metrics"])).streaming_content)
    records = [line.split(",") for line in csv.decode().splitlines()]
    header = records[0]
    diff = next(
        r
        for r in records
        if r[header.index("judge")] == "first-picker" and r[header.index("metric")] == "position_diff"
    )
    # The CSV is for programs: the p-values as numbers, both below 0.001.
    assert 0 < float(diff[header.index("p_value")]) <= float(diff[header.index("p_adjusted")]) < 0.001


def test_abbreviations_are_explained_on_hover_and_in_a_glossary(dash_study, staff_client):
    body = staff_client.get(reverse("analysis:study", args=["dash-s"])).content.decode()
    for abbr in ("ASR", "Acc", "Human-NF", "LC"):
        assert re.search(rf'<abbr title="[^"]+">{abbr}</abbr>', body), abbr
    for term in ("ASR", "Acc", "Human-NF", "LC", "Diff"):
        assert re.search(rf"<dt[^>]*>{term}</dt>", body), term
    # A figure's header links to its glossary entry, which the registry writes (analysis.rows).
    assert '<a href="#glossary-position_diff">Diff</a>' in body and '<dt id="glossary-position_diff">Diff</dt>' in body
    assert 'id="glossary"' in body


def test_group_and_bloom_filters_are_checkboxes(dash_study, staff_client):
    body = staff_client.get(reverse("analysis:study", args=["dash-s"])).content.decode()
    assert '<input type="checkbox" name="group" value="factual_error"' in body
    assert '<input type="checkbox" name="bloom" value="creating"' in body
    assert "<select multiple" not in body and 'name="bloom" multiple' not in body


def test_a_bloom_tables_votes_are_that_levels_not_the_judges_total(db, staff_client):
    study = make_study(slug="blooms-s", votes_per_item=2)
    for i in range(6):
        q = make_question(study, bloom_level=("applying", "creating", "creating")[i % 3])
        make_variant(q, kind="reference")
    simulated_judges.judge_simulate(study=study, name="sim", params=JudgeParams(), seed=2)
    result = current_report.study_analyze(study=study)
    judge = result["judges"][0]
    assert judge["n_votes"] == 24
    for level, expected in (("applying", 8), ("creating", 16)):
        row = next(r for r in tables.table1(result, part=level)["rows"] if r["judge"] == "sim")
        position = rows.one(result["rows"], judge="sim", metric="position_first", bloom=level)
        assert row["n_votes"] == expected == position["n"]
    body = staff_client.get(reverse("analysis:study", args=["blooms-s"])).content.decode()
    applying = body[body.index("<h3>Applying</h3>") :]
    assert '<td class="name">simulated</td><td>8</td>' in applying[: applying.index("</table>")]


def test_filtering_by_a_perturbation_group_keeps_the_control_items_in_the_base(dash_study, staff_client):
    # ASR compares each perturbed item with its question's control item: a filter that dropped
    # the control votes would leave every ASR without a base (n/a).
    response = staff_client.get(reverse("analysis:study", args=["dash-s"]), {"group": "reference"})
    result = response.context["result"]
    unfiltered = current_report.study_analyze(study=dash_study)
    # The same judges in the same order, the group filter or not.
    assert [j["judge"] for j in result["judges"]] == [j["judge"] for j in unfiltered["judges"]]
    for judge in result["judges"]:
        asr, whole_asr = (
            rows.one(r["rows"], judge=judge["judge"], metric="asr", group="reference", bloom="")
            for r in (result, unfiltered)
        )
        assert (asr["estimate"], asr["n"]) == (whole_asr["estimate"], whole_asr["n"]), judge["judge"]
        assert asr["n"] > 0 and asr["estimate"] is not None
        # The group not picked is left out.
        assert rows.one(result["rows"], judge=judge["judge"], metric="asr", group="factual_error", bloom="")["n"] == 0
    assert result["filters"]["groups"] == ["reference", "control"]
    assert 'value="control"' not in response.content.decode()  # kept without being offered as a filter


def test_a_group_filter_leaves_the_other_groups_columns_out_of_table_one_and_its_figures(dash_study, staff_client):
    # With the catalogue's kinds, picking two groups left nine columns (and forest panels) of n/a.
    response = staff_client.get(reverse("analysis:study", args=["dash-s"]), {"group": "reference"})
    result = response.context["result"]
    assert [c["label"] for c in tables.table1(result)["columns"]] == ["ASR reference"]
    assert "ASR factual_error" not in response.content.decode()
    figure = staff_client.get(reverse("analysis:plot", args=["dash-s", "forest", "svg"]), {"group": "reference"})
    assert "ASR reference" in figure.content.decode() and "factual_error" not in figure.content.decode()
    unfiltered = current_report.study_analyze(study=dash_study)
    assert [c["label"] for c in tables.table1(unfiltered)["columns"]] == [
        "ASR factual_error",
        "Acc factual_error",
        "ASR reference",
    ]


def test_the_mean_probability_is_explained_as_not_the_share_of_choices_whoever_is_listed_first(db, staff_client):
    # The people vote without token probabilities; the machine's are averaged. The explanation
    # stands before the first judge that has them, whether or not a judge without them comes first.
    study = make_study(slug="probs-s", votes_per_item=2)
    item = make_question(study).items.get()
    make_vote(item, human_pool(study), rater=make_rater(study), client_ms=4000)
    for name in ("a-machine", "b-machine"):
        machine = make_judge(name=name)
        for shown_first in ("a1", "a2"):
            probs = {"first": 0.55, "second": 0.4, "tie": 0.05}
            make_vote(item, machine, shown_first=shown_first, choice_shown="first", option_probs=probs)
    body = staff_client.get(reverse("analysis:study", args=["probs-s"])).content.decode()
    assert "a-machine: mean probability on A1 47.5%" in body and "b-machine: mean probability" in body
    assert body.count("It measures how sure the model is, not how often it chose") == 1


def test_a_judges_agreement_with_the_human_majority_carries_its_interval(db, staff_client):
    # Four questions; on their control items two people vote A1, and the judge agrees on three
    # of the four: 75% of the items, with an interval over questions (shown, and in the CSV).
    study = make_study(slug="agree-s", votes_per_item=2)
    judge = make_judge(name="judge-agrees")
    for n in range(4):
        item = make_question(study).items.get(kind__isnull=True)
        for _ in range(2):
            make_vote(item, human_pool(study), rater=make_rater(study), client_ms=4000)
        make_vote(item, judge, choice_shown="first" if n < 3 else "second")
    found = rows.one(
        current_report.study_analyze(study=study)["rows"], judge="judge-agrees", metric="agreement_vs_human_majority"
    )
    assert (found["estimate"], found["n"]) == (0.75, 4)
    lo, hi = found["ci_lo"], found["ci_hi"]
    assert lo < 0.75 < hi <= 1
    body = staff_client.get(reverse("analysis:study", args=["agree-s"])).content.decode()
    assert re.search(r"75\.0%<span class=\"ci\">\[\d+\.\d%, \d+\.\d%\]</span></td><td>4</td>", body)
    metrics = b"".join(staff_client.get(reverse("analysis:export", args=["agree-s", "metrics"])).streaming_content)
    # The metrics CSV is the metric table: study, judge, kind, metric, group, bloom, subset, estimate, ...
    assert b"agree-s,judge-agrees,simulated,agreement_vs_human_majority,,,,0.75," in metrics


def test_the_verbosity_table_says_which_convention_scored_it(dash_study, staff_client):
    url = reverse("analysis:study", args=["dash-s"])
    assert "Longer answer wins (a tie counts half a win; pairs of equal length left out)" in (
        staff_client.get(url).content.decode()
    )
    body = staff_client.get(url, {"verbosity_convention": "blog", "measure": "spaces"}).content.decode()
    assert "a tie&#x27;s winner drawn at random" in body and "seed 0" in body
    assert "Length measure: spaces." in body
    assert staff_client.get(url, {"verbosity_convention": "coin"}).status_code == 400
