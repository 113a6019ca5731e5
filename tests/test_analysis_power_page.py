""" "How many votes do I need?" starts from the study's own design (its questions, its groups,
its raters so far or what its votes per item need) and says what to choose: votes per item,
raters, and their cost at the pay per rater the researcher enters."""

from decimal import Decimal

import pytest
from django.urls import reverse

from analysis import power, simulate, stats
from tests.factories import make_question, make_rater, make_study, make_variant


def study_with_groups(n_questions: int = 12, **kw):
    study = make_study(slug="pw", target_per_rater=20, votes_per_item=6, **kw)
    for _ in range(n_questions):
        q = make_question(study)
        make_variant(q, kind="reference")
    return study


def test_the_page_starts_from_the_studys_questions_groups_and_the_raters_it_needs(staff_client):
    study = study_with_groups()
    response = staff_client.get(reverse("analysis:power", args=[study.slug]))
    form = response.context["form"]
    # 12 questions × (control + reference) × 6 votes per item / 20 items per rater = 7.2: 8 raters
    assert (form["n_questions"].value(), form["raters"].value(), form["items_per_rater"].value()) == (12, 8, 20)
    assert response.context["rows"]["groups"] == ["reference"]  # the study's group, not three made up
    body = response.content.decode()
    assert "its groups (reference)" in body and "the raters its 6 votes per item need" in body
    assert "Choose " in body and " votes per item</strong>" in body


def test_raters_who_came_through_the_link_are_the_starting_number(staff_client):
    study = study_with_groups()
    for _ in range(3):
        make_rater(study)
    response = staff_client.get(reverse("analysis:power", args=[study.slug]))
    assert response.context["form"]["raters"].value() == 3
    assert "the 3 raters who came through its link so far" in response.content.decode()


def test_a_study_without_perturbations_says_which_groups_it_assumes(staff_client):
    study = make_study(slug="bare")
    make_question(study)
    body = staff_client.get(reverse("analysis:power", args=[study.slug])).content.decode()
    assert "no perturbation groups yet, so three are assumed" in body


def test_the_recommendation_gives_votes_raters_and_cost(staff_client):
    study = study_with_groups()
    params = {"n_questions": 200, "raters": 50, "items_per_rater": 40, "susceptibility": 0.5, "noise": 0.2}
    response = staff_client.get(
        reverse("analysis:power", args=[study.slug]),
        {**params, "tie_rate": 0.1, "pay_per_rater": "7.50"},
    )
    rec = response.context["rows"]["recommended"]
    k = rec["votes_per_item"]
    assert k % 2 == 0 and k <= power.POWER_REFERENCE
    assert rec["width"] <= rec["floor"] + power.POWER_TOLERANCE
    assert rec["raters"] == -(-k * 200 * 2 // 40) and rec["cost"] == rec["raters"] * Decimal("7.50")
    body = response.content.decode()
    assert (
        f"Choose {k} votes per item</strong> (the study is set to 6)" in body
        and f"{rec['raters']} raters</strong>" in body
    )
    assert f"{rec['cost']:.2f}</strong> at 7.50 per rater" in body


def test_few_questions_are_named_as_the_limit(db):
    table = power.power_table(
        n_questions=20, raters=10, items_per_rater=20, susceptibility=0.5, noise=1.0, tie_rate=0.1
    )
    assert table["recommended"]["questions_limit"] is True


MAXIMA = {"n_questions": 2000, "raters": 10_000, "items_per_rater": 1000}


def many_kinds(n: int) -> dict[str, tuple[str, int]]:
    """The three built-in groups, then made-up kinds alternating non-semantic and degrading."""
    groups = dict(simulate.SYNTHETIC_GROUPS)
    for index in range(3, n):
        groups[f"kind_{index}"] = ("degrading" if index % 2 else "non_semantic", 0)
    return groups


@pytest.mark.parametrize("kinds", [3, 30, 100])
def test_the_simulation_draws_no_more_votes_than_its_bound_whatever_the_number_of_kinds(db, kinds):
    # At the form's maxima 100 kinds drew 2,000 × 101 × 48 = 9.7M votes (100 s in a web thread).
    groups = many_kinds(kinds)
    table = power.power_table(**MAXIMA, susceptibility=0.5, noise=1.0, tie_rate=0.15, groups=groups)
    assert 0 < table["simulated_votes"] <= power.MAX_SIMULATED_VOTES
    assert table["kinds"] == kinds
    # Every kind is simulated or stood for by a simulated kind of its sort; none is left out.
    covered = set(table["groups"]) | {g for alike in table["stands_for"].values() for g in alike}
    assert covered == set(groups) and not table["left_out"]
    if kinds == 3:
        assert table["groups"] == list(groups) and table["stands_for"] == {}
    else:  # one kind per semantics, each for the rest of its semantics
        assert table["groups"] == ["factual_error", "reference"]
        for g, alike in table["stands_for"].items():
            assert {groups[a][0] for a in alike} == {groups[g][0]}
    assert table["recommended"] is not None


def test_kinds_of_one_sort_have_the_interval_of_the_kind_simulated_for_them(db):
    # A known truth: a kind of the same semantics and pull is the same simulation, so its
    # interval is its representative's, up to simulation noise. Simulated all together (few
    # questions: they fit) and by representative (many questions: they do not), the widths agree.
    groups = many_kinds(8)
    design = {"raters": 100, "items_per_rater": 100, "susceptibility": 0.5, "noise": 1.0, "tie_rate": 0.15}
    whole = power.power_table(n_questions=200, **design, groups=groups)
    assert whole["groups"] == list(groups) and whole["simulated_votes"] == 200 * 9 * 2 * power.POWER_REFERENCE
    row = next(r for r in whole["rows"] if r["votes_per_item"] == 6)
    for g, (semantics, _) in groups.items():
        representative = "factual_error" if semantics == "degrading" else "reference"
        assert abs(row[g]["width"] - row[representative]["width"]) < 0.05, (g, row[g], row[representative])


def test_the_page_says_which_kinds_it_simulated_for_the_others(staff_client):
    study = make_study(slug="pw-kinds", target_per_rater=20, votes_per_item=6)
    kinds = ["factual_error", "reference", "rich_content", "bandwagon"]
    for _ in range(10):
        question = make_question(study)
        for kind in kinds:
            make_variant(question, kind=kind)
    params = {**MAXIMA, "susceptibility": 0.5, "noise": 1.0, "tie_rate": 0.15}
    response = staff_client.get(reverse("analysis:power", args=[study.slug]), params)
    rows = response.context["rows"]
    # The study's kinds in its order (by slug): the first of each sort is simulated for the rest.
    assert rows["kinds"] == 4 and rows["groups"] == ["bandwagon", "factual_error"]
    assert rows["simulated_votes"] <= power.MAX_SIMULATED_VOTES
    body = response.content.decode()
    assert "Simulating each of the 4 kinds at this size would take more than the 384000 simulated votes" in body
    assert "<strong>bandwagon</strong> for 2 more (reference, rich_content)" in body


SELF_ENHANCEMENT = "{A2} was written by {judge_family}; {A1} by {other_family}."


@pytest.mark.parametrize("judge_only", ["self_enhancement_context", "kept_from_raters_by_an_import"])
def test_items_no_rater_is_handed_are_not_in_the_rater_budget(staff_client, judge_only):
    study = study_with_groups()  # 12 questions, control + reference, 6 votes per item, 20 items per rater
    for question in study.questions.all():
        if judge_only == "self_enhancement_context":
            make_variant(question, kind="self_enhancement", text=question.answers.get(external_id__endswith="-a2").text,
                         context=SELF_ENHANCEMENT)  # fmt: skip
        else:
            make_variant(question, kind="rich_content")
    if judge_only == "kept_from_raters_by_an_import":
        study.items.filter(kind__slug="rich_content").update(offered_to_raters=False)
    hidden = "self_enhancement" if judge_only == "self_enhancement_context" else "rich_content"
    assert not any(item.for_raters for item in study.items.filter(kind__slug=hidden))  # the model's own rule
    assert list(power.power_groups(study=study)) == ["reference"]
    response = staff_client.get(reverse("analysis:power", args=[study.slug]))
    # 12 questions × 2 items raters see × 6 votes / 20 items per rater = 7.2: 8 raters, not 11.
    assert response.context["form"]["raters"].value() == 8
    assert response.context["rows"]["groups"] == ["reference"] and response.context["rows"]["items"] == 24
    body = response.content.decode()
    assert f"its groups (reference) (not {hidden}: judges only, no rater sees it)" in body


def test_a_study_whose_kinds_are_all_judge_only_plans_its_control_items_not_three_made_up_kinds(staff_client):
    study = make_study(slug="pw-judges", target_per_rater=10, votes_per_item=4)
    for _ in range(10):
        question = make_question(study)
        make_variant(question, kind="self_enhancement", text="Second answer.", context=SELF_ENHANCEMENT)
    assert power.power_groups(study=study) == {}
    response = staff_client.get(reverse("analysis:power", args=[study.slug]))
    assert response.context["form"]["raters"].value() == 4  # 10 control items × 4 votes / 10 per rater
    body = response.content.decode()
    assert "its control items only (not self_enhancement: judges only" in body and "three are assumed" not in body


def test_what_the_raters_supply_is_shown_as_it_is_not_rounded_up_to_one(staff_client):
    study = study_with_groups()
    # 6 raters × 8 items over 100 questions × (control + reference) = 48 / 200 = 0.24 votes per item.
    params = {"n_questions": 100, "raters": 6, "items_per_rater": 8, "susceptibility": 0.5, "noise": 1.0}
    response = staff_client.get(reverse("analysis:power", args=[study.slug]), {**params, "tie_rate": 0.15})
    rows = response.context["rows"]
    assert rows["supplied"] == 0.24 and rows["simulated"] is None
    body = response.content.decode()
    assert "Your raters supply about <strong>0.24</strong> votes per item: fewer than one, so most items" in body
    assert 'class="flag"' not in body  # no row is what they supply
    # 2.5 votes per item: shown with its decimals, and the row of 2 votes is theirs.
    more = staff_client.get(
        reverse("analysis:power", args=[study.slug]), {**params, "raters": 50, "items_per_rater": 10, "tie_rate": 0.15}
    )
    assert more.context["rows"]["supplied"] == 2.5 and more.context["rows"]["simulated"] == 2
    assert "about <strong>2.50</strong> votes per item." in more.content.decode()


def test_a_rate_of_0_or_1_gets_the_interval_the_dashboard_gives_not_one_of_width_0():
    # A hand computation: at rate 0 on 6 questions the analysis (stats.clustered_rates) gives
    # Wilson's interval on the 6 questions, [0, z²/(6 + z²)] = [0 %, 39 %].
    z2 = stats.Z95**2
    assert simulate.interval_width(0.0, 0.0, 6) == pytest.approx(z2 / (6 + z2))
    assert simulate.interval_width(1.0, 0.0, 6) == pytest.approx(z2 / (6 + z2))
    assert simulate.interval_width(0.3, 0.0, 6) == pytest.approx(stats.wilson(1.8, 6)[1] - stats.wilson(1.8, 6)[0])
    # Many effective votes: the interval is about 2 × 1.96 × sd, as before.
    assert simulate.interval_width(0.3, 0.0001, 6) == pytest.approx(2 * stats.Z95 * 0.01, rel=0.01)
    # A judge with no noise and a strong pull: every kind's ASR is 0 or 1, each with its width.
    table = power.power_table(
        n_questions=10, raters=10, items_per_rater=10, susceptibility=5.0, noise=0.0, tie_rate=0.0
    )
    cells = [row[g] for row in table["rows"] for g in table["groups"]]
    assert {cell["value"] for cell in cells} <= {0.0, 1.0}
    assert all(cell["width"] > 0.3 for cell in cells), cells


def test_with_too_few_questions_the_page_leads_with_more_questions_and_no_interval_is_0_or_100_pct_wide(
    staff_client,
):
    # Ten questions (the form's least) with a noisy judge: the code before showed factual_error's
    # interval 100 % wide at every votes per item (a normal interval cut at 100 %).
    study = study_with_groups()
    params = {"n_questions": 10, "raters": 10, "items_per_rater": 10, "susceptibility": 0.5, "noise": 5.0}
    response = staff_client.get(reverse("analysis:power", args=[study.slug]), {**params, "tie_rate": 0.15})
    rows = response.context["rows"]
    widths = [row[g]["width"] for row in rows["rows"] for g in rows["groups"] if row[g]["width"] is not None]
    assert widths and all(0 < width < 1 for width in widths), widths
    assert rows["recommended"]["questions_limit"]
    body = response.content.decode()
    assert body.index("More questions, not more votes:</strong> with 10 questions") < body.index("Choose ")
