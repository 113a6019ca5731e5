"""Cutting the results by subset (Question.subset, the parts of an imported data set such as
LLMBar's): a filter like Bloom level and group, on the dashboard, in the API and in `analyze`."""

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from analysis import simulated_judges
from analysis.frame import Filters, apply_filters
from analysis.simulate import JudgeParams
from tests.analysis_frames import frame, item, votes
from tests.factories import make_question, make_study


def test_the_subset_filter_keeps_the_votes_of_the_chosen_subsets_and_counts_the_rest():
    rows = votes(item(1, 1, "control", 11, 12, subset="Natural"), "a1 a2 a1")
    rows += votes(item(2, 2, "control", 21, 22, subset="Adversarial"), "a1 a1")
    rows += votes(item(3, 3, "control", 31, 32), "a2")  # no subset
    counted, excluded, _ = apply_filters(frame(rows), Filters(subsets=["Natural"]))
    assert len(counted) == 3 and set(counted["subset"]) == {"Natural"}
    assert excluded["subset"] == 3
    counted, excluded, _ = apply_filters(frame(rows), Filters(subsets=["Natural", "Adversarial"]))
    assert len(counted) == 5 and excluded["subset"] == 1
    counted, excluded, _ = apply_filters(frame(rows), Filters())
    assert len(counted) == 6 and excluded["subset"] == 0


@pytest.fixture
def subset_study(db):
    study = make_study(slug="subsets", votes_per_item=2)
    for i in range(6):
        make_question(study, subset="Natural" if i < 4 else "Adversarial", external_id=f"q{i}")
    simulated_judges.judge_simulate(study=study, name="sim", params=JudgeParams(position=0.5), seed=1)
    return study


def analyze_json(*args: str) -> dict:
    out = StringIO()
    call_command("analyze", "--study", "subsets", "--json", "--bootstrap", "20", *args, stdout=out)
    return json.loads(out.getvalue())


def test_analyze_takes_subset_options_and_refuses_an_unknown_subset(subset_study):
    everything = analyze_json()
    natural = analyze_json("--subset", "Natural")
    assert everything["filters"]["n_votes_counted"] == 12
    assert natural["filters"]["n_votes_counted"] == 8
    assert natural["filters"]["subsets"] == ["Natural"] and natural["filters"]["excluded"]["subset"] == 4
    both = analyze_json("--subset", "Natural", "--subset", "Adversarial")
    assert both["filters"]["n_votes_counted"] == 12
    with pytest.raises(CommandError, match="--subset"):
        analyze_json("--subset", "Imaginary")


def test_the_dashboard_offers_the_study_s_subsets_as_checkboxes_and_filters_by_them(subset_study, staff_client):
    url = reverse("analysis:study", args=["subsets"])
    body = staff_client.get(url).content.decode()
    assert '<input type="checkbox" name="subset" value="Adversarial"' in body
    assert '<input type="checkbox" name="subset" value="Natural"' in body
    response = staff_client.get(url, {"subset": "Adversarial", "bootstrap": 20})
    assert response.status_code == 200
    assert response.context["result"]["filters"]["n_votes_counted"] == 4
    assert staff_client.get(url, {"subset": "Imaginary"}).status_code == 400


def test_the_api_takes_the_subset_parameter_as_analyze_takes_the_option(subset_study, token_client):
    metrics = reverse("api:study-metrics", args=["subsets"])
    body = token_client.get(metrics + "?bootstrap=20&subset=Natural").json()
    computed = {key: body.pop(key) for key in ("computed_at", "n_votes", "updating")}  # the API's own
    assert body == analyze_json("--subset", "Natural") and computed["updating"] is False
    response = token_client.get(metrics, {"subset": "Imaginary"})
    assert response.status_code == 400 and list(response.json()) == ["detail", "subset"]


def test_a_study_without_subsets_offers_none_and_refuses_any(db, staff_client):
    make_study(slug="plain")
    url = reverse("analysis:study", args=["plain"])
    assert 'name="subset" value=' not in staff_client.get(url).content.decode()
    assert staff_client.get(url, {"subset": "Natural"}).status_code == 400
