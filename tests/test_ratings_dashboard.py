"""The dashboard's "Systems" section: where answers name their systems, a ratings table per
judge (people first), the forest plot of plain and style-controlled ratings, the style
coefficients and each judge's rank agreement with people; none where they do not."""

import pytest
from django.urls import reverse
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.text import Text

from analysis import current_report, plots, rows, simulated_judges, tables
from analysis.simulate import JudgeParams
from annotations.models import Answer
from tests.factories import make_question, make_study

SYSTEMS = ("model-one", "model-two", "model-three", "model-four")
JUDGE = "Simulated judge with a rather long name"


@pytest.fixture
def systems_study(db):
    study = make_study(slug="systems", votes_per_item=2)
    for i in range(24):
        first, second = SYSTEMS[i % 4], SYSTEMS[(i + 1 + i // 4) % 4]
        if first == second:
            second = SYSTEMS[(i + 2) % 4]
        q = make_question(study, a1="**short** answer " * (2 + i % 5), a2="- a longer\n- answer " * (3 + i % 3))
        Answer.objects.filter(question=q, external_id=f"{q.external_id}-a1").update(system=first)
        Answer.objects.filter(question=q, external_id=f"{q.external_id}-a2").update(system=second)
    simulated_judges.judge_simulate(study=study, name=JUDGE, params=JudgeParams(), seed=1)
    simulated_judges.raters_simulate(study=study, raters=4, params=JudgeParams(), votes_per_item=2, seed=2)
    return study


def test_the_systems_section_shows_each_judge_and_people_first(systems_study, staff_client):
    result = current_report.study_analyze(study=systems_study)
    found = tables.systems(result)
    assert [j["judge"] for j in found["judges"]][:2] == ["humans", "human majority"]
    assert JUDGE in [j["judge"] for j in found["judges"]]
    assert {c["system"] for c in found["judges"][0]["systems"]} == set(SYSTEMS)
    body = staff_client.get(reverse("analysis:study", args=["systems"])).content.decode()
    assert 'id="systems"' in body and "/plot/ratings.svg" in body
    assert 'id="style-coefficients"' in body and 'id="rank-agreement"' in body
    assert rows.one(result["rows"], judge=JUDGE, metric="rank_spearman", convention="plain")["n"] == 4


def test_the_ratings_figure_names_every_judge_and_its_csv_holds_the_rows(systems_study):
    result = current_report.study_analyze(study=systems_study)
    fig, drawn = plots.draw("ratings", result)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_visible()]
    assert JUDGE in texts and "humans" in texts and "model-three" in texts
    width, height = fig.get_size_inches()
    box = fig.get_tightbbox(canvas.get_renderer())
    assert box.x0 >= -0.06 and box.x1 <= width + 0.06 and box.y1 <= height + 0.06
    header, *lines = drawn
    assert header == ["judge", "system", "fit", "rating", "ci_lo", "ci_hi", "n"]
    plain = rows.one(result["rows"], judge=JUDGE, metric="bt_rating", group="model-two")
    assert [JUDGE, "model-two", "plain", plain["estimate"], plain["ci_lo"], plain["ci_hi"], plain["n"]] in lines


def test_a_study_whose_answers_name_no_systems_has_no_systems_section(db, staff_client):
    study = make_study(slug="plain-study", votes_per_item=2)
    for _ in range(6):
        make_question(study)
    simulated_judges.raters_simulate(study=study, raters=2, params=JudgeParams(), votes_per_item=2, seed=2)
    assert tables.systems(current_report.study_analyze(study=study)) is None
    body = staff_client.get(reverse("analysis:study", args=["plain-study"])).content.decode()
    assert 'id="systems"' not in body and "/plot/ratings.svg" not in body


def test_analyze_gives_arenas_vote_bootstrap_and_recomputes_the_scaling_on_request(systems_study):
    import io
    import json

    from django.core.management import call_command

    from analysis.models import StyleScaling

    out = io.StringIO()
    call_command("analyze", "--study", "systems", "--json", "--ratings-bootstrap", "votes", stdout=out)
    found = rows.one(json.loads(out.getvalue())["rows"], judge="humans", metric="bt_rating_style")
    assert found["convention"].startswith("votes bootstrap, anchor ")
    stored = StyleScaling.objects.get(study=systems_study)
    StyleScaling.objects.filter(pk=stored.pk).update(scaling={**stored.scaling, "n": 1})
    call_command("analyze", "--study", "systems", "--json", "--refresh-style-scaling", stdout=io.StringIO())
    assert StyleScaling.objects.get(study=systems_study).scaling == stored.scaling


def test_the_dashboard_anchor_prints_the_chosen_system_at_1000_in_its_own_stored_view(systems_study, staff_client):
    from analysis.models import StudyReport

    url = reverse("analysis:study", args=["systems"])
    default = staff_client.get(url)
    response = staff_client.get(url, {"ratings_anchor": "model-three"})
    assert response.status_code == 200
    for judge in response.context["systems"]["judges"]:
        cell = next(c for c in judge["systems"] if c["system"] == "model-three")
        assert cell["plain"]["value"] == pytest.approx(1000) and cell["style"]["value"] == pytest.approx(1000)
    assert "anchor model-three at 1000" in response.content.decode()
    # The anchor only shifts the plain ratings: each system's difference to model-one is the same.
    before, after = (
        {c["system"]: c["plain"]["value"] for c in r.context["systems"]["judges"][0]["systems"]}
        for r in (default, response)
    )
    assert after["model-two"] - after["model-one"] == pytest.approx(before["model-two"] - before["model-one"])
    anchors = {r.request["options"]["ratings_anchor"] for r in StudyReport.objects.filter(study=systems_study)}
    assert {"", "model-three"} <= anchors  # a view of its own beside the default


def test_an_unknown_anchor_is_a_form_error_listing_the_systems(systems_study, staff_client):
    response = staff_client.get(reverse("analysis:study", args=["systems"]), {"ratings_anchor": "model-nine"})
    assert response.status_code == 400
    errors = response.context["form"].errors["ratings_anchor"]
    assert errors == [
        "no system 'model-nine' in this study; its systems: model-four, model-one, model-three, model-two"
    ]
    assert "model-nine" in response.content.decode()


def test_the_api_metrics_take_the_anchor_and_the_bootstrap(systems_study, token_client):
    url = reverse("api:study-metrics", args=["systems"])
    body = token_client.get(url, {"ratings_anchor": "model-two", "ratings_bootstrap": "votes"}).json()
    found = rows.one(body["rows"], judge="humans", metric="bt_rating", group="model-two")
    assert found["estimate"] == pytest.approx(1000) and found["convention"] == "votes bootstrap, anchor model-two"
    refused = token_client.get(url, {"ratings_anchor": "model-nine"})
    assert refused.status_code == 400 and "model-one" in refused.json()["ratings_anchor"][0]


def test_analyze_takes_the_anchor_and_refuses_an_unknown_one(systems_study):
    import io
    import json

    from django.core.management import CommandError, call_command

    out = io.StringIO()
    call_command("analyze", "--study", "systems", "--json", "--ratings-anchor", "model-four", stdout=out)
    found = rows.one(json.loads(out.getvalue())["rows"], judge=JUDGE, metric="bt_rating_style", group="model-four")
    assert found["estimate"] == pytest.approx(1000) and found["convention"] == "prompt bootstrap, anchor model-four"
    with pytest.raises(CommandError, match="--ratings-anchor: no system 'model-nine'.*its systems: model-four"):
        call_command("analyze", "--study", "systems", "--ratings-anchor", "model-nine", stdout=io.StringIO())
    with pytest.raises(CommandError, match="--ratings-bootstrap"):
        call_command("analyze", "--study", "systems", "--ratings-bootstrap", "rows", stdout=io.StringIO())
