"""The systems' ratings against a known truth: simulated studies with known system strengths and
a known reward for length, where the weakest system writes the longest answers. The
style-controlled ratings recover the strengths (small bias, intervals covering at about the
nominal rate); the plain ones are pulled by length. Style counts by hand; the frozen scaling.
"""

import numpy as np
import pandas as pd
import pytest

from analysis import ratings
from analysis.models import StyleScaling
from analysis.ratings_service import study_style_scaling, study_style_scaling_refresh

STRENGTH = {"s0": 0.0, "s1": 40.0, "s2": 80.0, "s3": 120.0, "s4": 160.0}  # printed points, s0 anchor
MEAN_TOKENS = {"s0": 300, "s1": 250, "s2": 200, "s3": 150, "s4": 100}  # the weakest writes longest
LENGTH_REWARD = 1.5  # log-odds per unit of (a1 − a2)/(a1 + a2 + 1)


def simulated_votes(rng, systems=STRENGTH, prompts=150, pairs_per_prompt=8) -> pd.DataFrame:
    names = list(systems)
    rows = []
    for prompt in range(prompts):
        tokens = {s: rng.lognormal(np.log(MEAN_TOKENS.get(s, 200)), 0.3) for s in names}
        for _ in range(pairs_per_prompt):
            a, b = rng.choice(names, size=2, replace=False)
            diff = (tokens[a] - tokens[b]) / (tokens[a] + tokens[b] + 1)
            logit = np.log(10) * (systems[a] - systems[b]) / 400 + LENGTH_REWARD * diff
            won = rng.random() < 1 / (1 + np.exp(-logit))
            rows.append((a, b, "a1" if won else "a2", prompt, round(tokens[a]), round(tokens[b])))
    frame = pd.DataFrame(rows, columns=["a1_system", "a2_system", "choice", "cluster_id", "ta", "tb"])
    for side, col in (("a1", "ta"), ("a2", "tb")):
        frame[f"style_{side}_tokens"] = frame.pop(col).astype(float)
        for f in ("headers", "lists", "bold"):
            frame[f"style_{side}_{f}"] = 0.0
    return frame


def test_style_controlled_ratings_recover_the_strengths_where_plain_ones_are_pulled_by_length():
    # 40 studies × 100 bootstrap rounds: 4 non-anchor systems give 160 intervals, so a coverage
    # of 0.95 is seen within about ±0.035 (two standard errors), in about 15 s here.
    rng = np.random.default_rng(7)
    errors = {False: [], True: []}
    covered = []
    for study in range(40):
        votes = simulated_votes(rng)
        for style in (False, True):
            fit = ratings.rate(votes, style=style, anchor="s0", rounds=100, seed=study)
            for s in ("s1", "s2", "s3", "s4"):
                truth = ratings.INIT + STRENGTH[s]
                errors[style].append(fit.ratings[s] - truth)
                if style:
                    lo, hi = fit.ci[s]
                    covered.append(lo <= truth <= hi)
                    assert fit.scaling.left_out == ["headers", "lists", "bold"]
    bias_style, bias_plain = np.mean(errors[True]), np.mean(errors[False])
    # Arena's ridge penalty (0.5 over ~1,200 votes) shrinks the ratings a little towards one another.
    assert abs(bias_style) < 6
    assert bias_plain < -25  # the strong, short-answer systems are pulled down
    assert 0.90 <= np.mean(covered) <= 0.99


def test_adding_a_system_leaves_the_others_where_they_were_with_the_frozen_scaling():
    rng = np.random.default_rng(3)
    votes = simulated_votes(rng, prompts=300)
    frozen = ratings.scaling_of(ratings.battles(votes).diff)
    before = ratings.rate(votes, style=True, anchor="s0", scaling=frozen, rounds=0)
    # A very verbose newcomer, rated against the anchor only and always shown second (as an
    # import that puts a baseline first does): the features' mean and spread change a lot.
    newcomer = simulated_votes(rng, systems={"s0": 0.0, "verbose": 60.0}, prompts=300, pairs_per_prompt=2)
    swap = (newcomer["a1_system"] == "verbose").to_numpy()
    for f in ratings.FEATURES:
        first, second = f"style_a1_{f}", f"style_a2_{f}"
        newcomer.loc[swap, [first, second]] = newcomer.loc[swap, [second, first]].to_numpy()
    newcomer.loc[swap, ["a1_system", "a2_system"]] = [["s0", "verbose"]] * int(swap.sum())
    newcomer.loc[swap, "choice"] = newcomer.loc[swap, "choice"].map({"a1": "a2", "a2": "a1"})
    newcomer["style_a1_tokens"] = np.where(newcomer["a1_system"] == "verbose", 3000.0, newcomer["style_a1_tokens"])
    newcomer["style_a2_tokens"] = np.where(newcomer["a2_system"] == "verbose", 3000.0, newcomer["style_a2_tokens"])
    more = pd.concat([votes, newcomer], ignore_index=True)
    kept = ratings.rate(more, style=True, anchor="s0", scaling=frozen, rounds=0)
    recomputed = ratings.rate(more, style=True, anchor="s0", rounds=0)
    moved_kept = max(abs(kept.ratings[s] - before.ratings[s]) for s in STRENGTH)
    moved_recomputed = max(abs(recomputed.ratings[s] - before.ratings[s]) for s in STRENGTH)
    # What remains moves through the shared length coefficient and the anchor's new votes.
    assert moved_kept < 3
    assert moved_recomputed > 3 * moved_kept
    assert kept.scaling is frozen


def test_style_counts_are_arenas_by_hand():
    text = "# Title\n\nSome **bold** and __also__.\n\n- one\n* two\n1. three\n```\n# not a header\n- no\n```\n"
    found = ratings.style_counts(text)
    assert (found["headers"], found["lists"], found["bold"]) == (1, 3, 2)
    assert found["tokens"] == ratings.count_tokens(text) > 20
    assert ratings.count_tokens("hello world") == 2  # cl100k_base: "hello", " world"


def test_a_tie_counts_half_a_win_and_the_anchor_is_at_1000():
    # a beats b twice, b beats a once, one tie: p = 2.5/4, so b − a = −400·log10(2.5/1.5).
    votes = pd.DataFrame(
        {
            "a1_system": ["a", "a", "a", "a"],
            "a2_system": ["b", "b", "b", "b"],
            "choice": ["a1", "a1", "a2", "tie"],
            "cluster_id": [1, 2, 3, 4],
        }
    )
    fit = ratings.rate(votes, anchor="a", rounds=0)
    assert fit.ratings["a"] == 1000
    assert fit.ratings["b"] == pytest.approx(1000 - 400 * np.log10(2.5 / 1.5), abs=1e-6)


def test_a_system_that_never_lost_is_noted():
    votes = pd.DataFrame(
        {"a1_system": ["a", "a"], "a2_system": ["b", "b"], "choice": ["a1", "a1"], "cluster_id": [1, 2]}
    )
    assert "no finite optimum" in ratings.rate(votes, rounds=0).note


def test_an_unknown_bootstrap_is_refused():
    with pytest.raises(ValueError, match="bootstrap 'rows'"):
        ratings.rate(pd.DataFrame(), bootstrap="rows")


@pytest.mark.django_db
def test_the_study_scaling_is_frozen_until_refreshed():
    from tests.factories import make_study

    study = make_study()
    rng = np.random.default_rng(0)
    first = simulated_votes(rng, prompts=20)
    stored = study_style_scaling(study=study, frame=_counted(first))
    assert StyleScaling.objects.get(study=study).scaling == stored.as_dict()
    again = study_style_scaling(study=study, frame=_counted(simulated_votes(rng, prompts=5)))
    assert again.as_dict() == stored.as_dict()
    # The study has no votes in the database: refreshing recomputes from them, and finds none.
    assert study_style_scaling_refresh(study=study) is None
    assert not StyleScaling.objects.filter(study=study).exists()


def _counted(votes: pd.DataFrame) -> pd.DataFrame:
    """The simulated votes as a full votes frame (every vote counted)."""
    from analysis.frame import COLUMNS, normalise

    frame = votes.copy()
    n = len(frame)
    defaults = {c: "" for c in COLUMNS}
    defaults.update(
        vote_id=np.arange(n),
        question_id=frame["cluster_id"],
        item_id=np.arange(n),
        group="control",
        semantics="control",
        a1_root=0,
        a2_root=0,
        judge="people",
        judge_kind="human",
        shown_first="a1",
        choice_shown="first",
        order_known=True,
        is_gold=False,
        rater_flagged=False,
        not_familiar=False,
        labels_swapped=False,
        client_ms=10_000.0,
        threshold_ms=0.0,
        words=0,
        run_id=np.nan,
        received_at=pd.Timestamp("2026-12-07", tz="UTC"),
    )
    for col in COLUMNS:
        if col not in frame.columns:
            frame[col] = defaults[col] if not col.startswith("len_") else np.nan
    return normalise(frame)


@pytest.mark.django_db
def test_the_admin_recomputes_a_study_scaling_on_request(client):
    from django.contrib.auth.models import User

    from tests.factories import make_study

    study = make_study()
    StyleScaling.objects.create(study=study, scaling={"features": [], "mean": [], "std": [], "n": 0})
    staff = User.objects.create_superuser("boss", "boss@example.org", "pw-0123456789")
    client.force_login(staff)
    stored = StyleScaling.objects.get(study=study)
    response = client.post(
        "/admin/analysis/stylescaling/", {"action": "recompute", "_selected_action": [stored.pk]}, follow=True
    )
    assert response.status_code == 200
    assert "Recomputed the style scaling of 1 studies." in response.content.decode()
    # No votes between systems: nothing to standardise, so the study has no scaling any more.
    assert not StyleScaling.objects.filter(study=study).exists()
