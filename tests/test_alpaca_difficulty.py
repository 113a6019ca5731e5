"""A study's frozen AlpacaEval difficulty (analysis.alpaca_difficulty): frozen when the LC is
first computed, named in the report, kept when models are added (their votes imported into the
study), refitted on request (the command and the admin's action), saved to and loaded from a
file; a bad file is refused by name and writes nothing."""

import io
import json

import numpy as np
import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse
from scipy.special import expit

from analysis import alpaca_difficulty
from analysis.models import AlpacaDifficulty
from tests.factories import make_staff_with, make_study

INSTRUCTIONS = 40
JUDGE = "judge-x"


def records(model: str, theta: float, seed: int) -> list[dict]:
    """A model's AlpacaEval annotations of INSTRUCTIONS instructions against the baseline, its
    preferences drawn from a logistic model with a length effect (known strength θ)."""
    rng = np.random.default_rng(seed)
    gamma = np.random.default_rng(0).normal(0, 1, INSTRUCTIONS)  # the same instructions for every model
    out = []
    for i in range(INSTRUCTIONS):
        length = int(rng.integers(20, 400))
        p = expit(theta + gamma[i] + 0.8 * np.tanh((length - 200) / 150))
        out.append(
            {
                "instruction": f"Instruction number {i}.",
                "output_1": "b" * 200,
                "generator_1": "base",
                "output_2": "m" * length,
                "generator_2": model,
                "annotator": JUDGE,
                "preference": round(1 + float(rng.beta(4 * p + 0.1, 4 * (1 - p) + 0.1)), 6),
            }
        )
    return out


def import_models(tmp_path, slug, models):
    paths = []
    for k, (model, theta) in enumerate(models):
        path = tmp_path / f"{model}.json"
        path.write_text(json.dumps(records(model, theta, seed=k + 10 * len(model))), encoding="utf-8")
        paths.append(str(path))
    call_command("import_votes", *paths, "--format", "alpaca_eval", "--study", slug, verbosity=0)


FIRST = [("m-a", -1.0), ("m-b", 0.0), ("m-c", 0.7)]


@pytest.fixture
def study(db, tmp_path):
    study = make_study(status="draft", slug="ae")
    import_models(tmp_path, "ae", FIRST)
    return study


def test_the_first_lc_freezes_the_difficulty_and_an_added_model_moves_no_other(study, tmp_path):
    before = alpaca_difficulty.study_lc_alpaca(study=study)[JUDGE]
    row = AlpacaDifficulty.objects.get(study=study, judge=JUDGE)
    assert sorted(row.fitted_models) == ["m-a", "m-b", "m-c"] and len(row.difficulty) == INSTRUCTIONS
    assert all(key.startswith("prompt-") for key in row.difficulty)  # kept by prompt key, the same in every import
    assert before.difficulty_source.startswith("frozen ") and "fitted on the 3 models" in before.difficulty_source
    import_models(tmp_path, "ae", [("m-d", 1.5)])  # a second import of the same judge: a new model
    after = alpaca_difficulty.study_lc_alpaca(study=study)[JUDGE]
    assert sorted(after.models) == ["m-a", "m-b", "m-c", "m-d"]
    for model in before.models:
        assert after.lc_winrate[model] == before.lc_winrate[model]
    assert AlpacaDifficulty.objects.get(study=study).pk == row.pk
    # Refitting is asked for: now on four models, and the others' LC move.
    out, err = io.StringIO(), io.StringIO()
    call_command("analyze", "--study", "ae", "--lc", "alpaca_eval", "--refit-difficulty", stdout=out, stderr=err)
    assert "fitted on the 4 models" in err.getvalue() and "fitted on the 4 models" in out.getvalue().splitlines()[0]
    refitted = alpaca_difficulty.study_lc_alpaca(study=study)[JUDGE]
    assert max(abs(refitted.lc_winrate[m] - before.lc_winrate[m]) for m in before.models) > 1e-6


def test_a_saved_difficulty_loaded_into_another_study_scores_the_same(study, tmp_path):
    fits = alpaca_difficulty.study_lc_alpaca(study=study)
    path = tmp_path / "difficulty.json"
    call_command(
        "analyze",
        "--study",
        "ae",
        "--lc",
        "alpaca_eval",
        "--judge",
        JUDGE,
        "--save-difficulty",
        str(path),
        stdout=io.StringIO(),
    )
    other = make_study(status="draft", slug="other")
    import_models(tmp_path, "other", FIRST[:1])  # one model alone: its own fit would differ
    err = io.StringIO()
    call_command(
        "analyze",
        "--study",
        "other",
        "--lc",
        "alpaca_eval",
        "--load-difficulty",
        str(path),
        stdout=io.StringIO(),
        stderr=err,
    )
    assert "loaded from difficulty.json" in err.getvalue()
    loaded = alpaca_difficulty.study_lc_alpaca(study=other)[JUDGE]
    assert loaded.lc_winrate["m-a"] == pytest.approx(fits[JUDGE].lc_winrate["m-a"], abs=1e-9)
    assert AlpacaDifficulty.objects.get(study=other).fitted_models == sorted(m for m, _ in FIRST)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("common_slope"), "'common_slope' is missing"),
        (lambda d: d.update(difficulty={"prompt-1": "hard"}), "'difficulty' must be an object"),
        (lambda d: d.update(slope_penalty=-1), "'slope_penalty' must be a number ≥ 0"),
        (lambda d: d.update(judge=""), "'judge' must be the judge's name"),
    ],
)
def test_a_bad_difficulty_file_is_refused_naming_the_field_and_writes_nothing(study, tmp_path, change, message):
    alpaca_difficulty.study_lc_alpaca(study=study)
    data = alpaca_difficulty.alpaca_difficulty_export(difficulty=AlpacaDifficulty.objects.get())
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    before = list(AlpacaDifficulty.objects.values())
    with pytest.raises(CommandError, match=message):
        call_command("analyze", "--study", "ae", "--lc", "alpaca_eval", "--load-difficulty", str(path))
    assert list(AlpacaDifficulty.objects.values()) == before


def test_the_admin_action_refits_with_the_change_permission_only(study, tmp_path, client):
    alpaca_difficulty.study_lc_alpaca(study=study)
    import_models(tmp_path, "ae", [("m-d", 1.5)])
    row = AlpacaDifficulty.objects.get()
    url = reverse("admin:analysis_alpacadifficulty_changelist")
    post = {"action": "refit", "_selected_action": [row.pk]}
    client.force_login(make_staff_with("analysis.view_alpacadifficulty"))
    client.post(url, post)
    assert AlpacaDifficulty.objects.get().pk == row.pk  # not refitted: no change permission
    client.force_login(make_staff_with("analysis.view_alpacadifficulty", "analysis.change_alpacadifficulty"))
    response = client.post(url, post, follow=True)
    assert "1 difficulty refitted" in response.content.decode()
    assert sorted(AlpacaDifficulty.objects.get().fitted_models) == ["m-a", "m-b", "m-c", "m-d"]
