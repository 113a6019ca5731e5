""" "How many votes do I need?" starts from the study's own design (its questions, its groups,
its raters so far or what its votes per item need) and says what to choose: votes per item,
raters, and their cost at the pay per rater the researcher enters."""

from decimal import Decimal

from django.urls import reverse

from analysis import services
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
    assert k % 2 == 0 and k <= services.POWER_REFERENCE
    assert rec["width"] <= rec["floor"] + services.POWER_TOLERANCE
    assert rec["raters"] == -(-k * 200 * 2 // 40) and rec["cost"] == rec["raters"] * Decimal("7.50")
    body = response.content.decode()
    assert (
        f"Choose {k} votes per item</strong> (the study is set to 6)" in body
        and f"{rec['raters']} raters</strong>" in body
    )
    assert f"{rec['cost']:.2f}</strong> at 7.50 per rater" in body


def test_few_questions_are_named_as_the_limit(db):
    table = services.power_table(
        n_questions=20, raters=10, items_per_rater=20, susceptibility=0.5, noise=1.0, tie_rate=0.1
    )
    assert table["recommended"]["questions_limit"] is True
