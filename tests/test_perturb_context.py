"""Context kinds are generated, reviewed and edited the way answer kinds are (admin, `perturb`,
API: one service), with the answer's text kept and a context that favours A2; a study file
carries the context both ways."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command
from django.urls import reverse
from hypothesis import given, settings
from hypothesis import strategies as st

from annotations import context as context_text
from annotations.models import Answer, ComparisonItem, Slot
from annotations.study_files import StudyFileError, study_export, study_import
from perturbations.context_rules import context_rule
from perturbations.kinds import CONTEXT_KINDS
from perturbations.models import AnswerRevision
from perturbations.services import PerturbationError, answer_context_edit, answer_review, perturbation_generate
from tests.factories import make_judge, make_question, make_study, make_variant, make_vote

pytestmark = pytest.mark.django_db


@settings(max_examples=30, deadline=None)
@given(slug=st.sampled_from(sorted(CONTEXT_KINDS)), seed=st.integers(0, 10**6), question=st.text(max_size=80))
def test_a_context_rule_is_the_same_for_the_same_seed_and_always_names_a2(slug, seed, question):
    made = context_rule(slug, seed, question)
    assert made == context_rule(slug, seed, question)
    context_text.check(made.context)  # a valid one-line template naming {A2}
    assert "{A2}" in made.context and "{share}" not in made.context and "{model}" not in made.context


def test_one_seed_varies_the_wording_between_questions():
    wordings = {context_rule("bandwagon", 1, f"Question {n}?").context for n in range(20)}
    assert len(wordings) > 1


@pytest.fixture
def study():
    study = make_study(slug="ctx", votes_per_item=2)
    for n in range(3):
        make_question(study, a1=f"First answer {n}.", a2=f"Second answer {n}.")
    return study


@pytest.mark.parametrize("slug", sorted(CONTEXT_KINDS))
def test_the_perturb_command_makes_pending_variants_that_keep_the_text_and_carry_a_context(study, slug):
    call_command("perturb", study="ctx", kind=slug, seed=2, verbosity=0)
    variants = Answer.objects.filter(kind__slug=slug)
    assert variants.count() == 3
    for variant in variants:
        assert variant.review_status == "pending" and variant.text == variant.derived_from.text
        assert variant.derived_from.external_id.endswith("-a2")
        assert variant.context == context_rule(slug, 2, variant.question.text).context
        assert variant.checks["ok"], variant.checks
        assert variant.provenance["steps"][0]["generator"] == "perturbations.context_rules.context_rule"
    # Nothing for raters before the review.
    assert not ComparisonItem.objects.filter(kind__slug=slug).exists()
    item = answer_review(answer=variants[0], decision="approve")
    assert (item.answer_a1, item.answer_a2) == (
        variants[0].question.answers.get(external_id__endswith="-a1"),
        variants[0],
    )
    assert item.context == variants[0].context
    rater_slots = Slot.objects.filter(item=item).count()
    assert rater_slots == (0 if slug == "self_enhancement" else study.votes_per_item)


def test_a_context_kind_is_made_by_rule_only(study):
    with pytest.raises(PerturbationError, match="made by rule"):
        perturbation_generate(study=study, kind="sycophancy", seed=1, method="model")


def test_the_review_page_shows_the_context_escaped_beside_the_answers_and_edits_it(staff_client, study):
    perturbation_generate(study=study, kind="bandwagon", seed=1)
    variant = Answer.objects.filter(kind__slug="bandwagon").order_by("id").first()
    Answer.objects.filter(pk=variant.pk).update(context="<i>Most</i> readers preferred {A2}.")
    page = staff_client.get(reverse("admin:perturbations_review", args=[study.pk])).content.decode()
    assert "&lt;i&gt;Most&lt;/i&gt; readers preferred Answer 2." in page and "<i>Most</i>" not in page
    assert "Edit context" in page
    # The text is the original's: no word diff of two equal texts, no length table without rows.
    assert "word for word: only the context above differs" in page
    assert "Word diff of the markdown source" not in page and "<th>ratio</th>" not in page

    edit = reverse("admin:perturbations_edit", args=[study.pk, variant.pk])
    assert 'name="context"' in staff_client.get(edit).content.decode()
    response = staff_client.post(edit, {"context": "Nearly everyone preferred {A1}", "note": "x"})
    assert response.status_code == 200 and "name the answer the context is about as {A2}" in response.content.decode()
    response = staff_client.post(edit, {"context": "Nine readers in ten preferred {A2}.", "note": "shorter"})
    assert response.status_code == 302
    variant.refresh_from_db()
    assert variant.context == "Nine readers in ten preferred {A2}." and variant.checks["ok"]
    revision = AnswerRevision.objects.get(answer=variant, action="edit")
    assert revision.text_after == variant.context and revision.note == "context: shorter"


def test_a_voted_context_is_not_edited_and_a_context_variants_text_is_not_either(study):
    question = study.questions.first()
    a2 = question.answers.get(external_id__endswith="-a2")
    variant = make_variant(question, kind="sycophancy", text=a2.text, context="I think {A2} is right.")
    make_vote(ComparisonItem.objects.get(answer_a2=variant), make_judge())
    with pytest.raises(PerturbationError, match="vote"):
        answer_context_edit(answer=variant, context="I am sure {A2} is right.")
    from perturbations.services import answer_edit

    with pytest.raises(PerturbationError, match="edit its context"):
        answer_edit(answer=variant, text="Something else.")


def test_the_api_generates_context_variants_and_refuses_the_model_method(study, token_client):
    url = reverse("api:study-perturbations", args=["ctx"])
    response = token_client.post(url, {"kind": "authority_source", "seed": 5}, format="json")
    assert response.status_code == 201, response.json()
    created = response.json()["created"]
    assert len(created) == 3 and all("{A2}" in variant["context"] for variant in created)
    response = token_client.post(url, {"kind": "authority_source", "seed": 5, "method": "model"}, format="json")
    assert response.status_code == 400 and "made by rule" in json.dumps(response.json())


def test_a_study_file_carries_the_context_both_ways(study, tmp_path):
    question = study.questions.first()
    a2 = question.answers.get(external_id__endswith="-a2")
    make_variant(question, kind="bandwagon", text=a2.text, context="78% of readers preferred {A2}.")
    document = study_export(study=study)
    document["study"]["slug"] = "ctx-copy"
    path = tmp_path / "study.json"
    path.write_text(json.dumps(document))
    copy = study_import(path=path, fmt="biasstudy")
    item = copy.items.get(kind__slug="bandwagon")
    assert item.context == "78% of readers preferred {A2}." and item.answer_a2.text == a2.text

    record = next(q for q in document["questions"] if q["id"] == question.external_id)
    record["answers"][0]["context"] = "Most readers preferred {A2}."  # an original
    document["study"]["slug"] = "ctx-bad"
    path.write_text(json.dumps(document))
    with pytest.raises(StudyFileError, match="only a variant"):
        study_import(path=path, fmt="biasstudy")
    record["answers"][0].pop("context")
    next(a for a in record["answers"] if a.get("kind") == "bandwagon")["context"] = "Most preferred {B}."
    path.write_text(json.dumps(document))
    with pytest.raises(StudyFileError, match="unknown field"):
        study_import(path=path, fmt="biasstudy")
