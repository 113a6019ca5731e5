"""Bootstrap resamples, seeds and votes per item have one bound each (biasstudy.limits), and the
commands, the API and the admin's forms all refuse the first value past it and take the bound."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from biasstudy.limits import BOOTSTRAP_MAX, SEED_MAX, VOTES_PER_ITEM_MAX
from judges.admin import StartRunForm
from judges.models import JudgeRun
from judges.services import JudgeRunError, judge_run_start
from perturbations.forms import GenerateForm
from tests.factories import make_llm_judge, make_question, make_study


@pytest.fixture
def world(db):
    study = make_study(slug="lim")
    make_question(study)
    return study, make_llm_judge(name="lim-judge", base_url="http://127.0.0.1:9/v1")


COMMANDS = [
    ("analyze", ["--study", "lim", "--bootstrap"], BOOTSTRAP_MAX, "--bootstrap"),
    ("analyze", ["--study", "lim", "--bootstrap", "0", "--seed"], SEED_MAX, "--seed"),
    ("simulate", ["--study", "lim", "--seed"], SEED_MAX, "--seed"),
    ("simulate", ["--study", "lim", "--votes-per-item"], VOTES_PER_ITEM_MAX, "--votes-per-item"),
    ("perturb", ["--study", "lim", "--kind", "reference", "--dry-run", "--seed"], SEED_MAX, "--seed"),
    (
        "run_judge",
        ["--study", "lim", "--judge", "lim-judge", "--votes-per-item"],
        VOTES_PER_ITEM_MAX,
        "--votes-per-item",
    ),
]


@pytest.mark.parametrize(("command", "args", "bound", "option"), COMMANDS)
def test_a_command_refuses_the_value_past_the_shared_bound(world, command, args, bound, option):
    with pytest.raises(CommandError, match=rf"{option}: must be at least \d and at most {bound}, got {bound + 1}"):
        call_command(command, *args, str(bound + 1), verbosity=0)


@pytest.mark.parametrize(("command", "args", "bound", "option"), [c for c in COMMANDS if c[2] != BOOTSTRAP_MAX])
def test_a_command_takes_the_bound_itself(world, command, args, bound, option):
    call_command(command, *args, str(bound), verbosity=0)
    if command == "run_judge":
        assert JudgeRun.objects.get().total == VOTES_PER_ITEM_MAX


def test_the_metrics_api_has_the_same_bounds(world, token_client):
    url = reverse("api:study-metrics", args=["lim"])
    for name, bound in (("bootstrap", BOOTSTRAP_MAX), ("seed", SEED_MAX)):
        response = token_client.get(url, {name: bound + 1})
        assert response.status_code == 400 and name in response.json()
    assert token_client.get(url, {"seed": SEED_MAX, "bootstrap": 0}).status_code == 200


def test_the_runs_api_and_the_service_have_the_votes_per_item_bound(world, token_client):
    study, config = world
    body = {"study": study.slug, "judge": config.judge.pk, "votes_per_item": VOTES_PER_ITEM_MAX + 1}
    response = token_client.post(reverse("api:runs"), body, format="json")
    assert response.status_code == 400 and "votes_per_item" in response.json()
    with pytest.raises(JudgeRunError, match=f"at most {VOTES_PER_ITEM_MAX}"):
        judge_run_start(study=study, judge=config.judge, votes_per_item=VOTES_PER_ITEM_MAX + 1, enqueue=False)


def test_the_perturbation_api_has_the_seed_bound(world, token_client):
    url = reverse("api:study-perturbations", args=["lim"])
    response = token_client.post(url, {"kind": "reference", "seed": SEED_MAX + 1}, format="json")
    assert response.status_code == 400 and "seed" in response.json()


def test_the_admin_forms_have_the_same_bounds(world):
    study, config = world
    start = StartRunForm({"study": study.pk, "judge": config.judge.pk, "votes_per_item": VOTES_PER_ITEM_MAX + 1})
    assert not start.is_valid() and "votes_per_item" in start.errors
    generate = GenerateForm({"kind": "reference", "seed": SEED_MAX + 1, "method": "rule", "of": "a2"}, studies=[study])
    assert not generate.is_valid() and "seed" in generate.errors
