"""Generating, reviewing and editing variants: pending until approved, items only on approval,
provenance for every step and edit, and no vote ever detached.
"""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotations.models import Answer, ComparisonItem, Vote
from perturbations.models import AnswerRevision
from perturbations.services import (
    PerturbationError,
    answer_edit,
    answer_review,
    answers_review,
    perturbation_generate,
    question_originals,
)
from tests.factories import make_judge, make_question, make_staff, make_study, originals

A1 = "Plants need light to grow. They use it to make food from water and carbon dioxide."
A2 = (
    "Plants grow toward light because they need it for photosynthesis. In this process, leaves turn water "
    "and carbon dioxide into sugar. Without light, a plant becomes pale and weak. Gardeners therefore put "
    "seedlings near a bright window."
)


@pytest.fixture
def study(db):
    study = make_study(slug="plants")
    for _ in range(3):
        make_question(study, a1=A1, a2=A2)
    return study


def vote_on(item):
    return Vote.objects.create(item=item, judge=make_judge(), shown_first="a1", choice_shown="first")


def test_it_creates_pending_variants_of_a2_with_provenance_and_checks_but_no_items(study):
    items_before = ComparisonItem.objects.count()
    result = perturbation_generate(study=study, kind="reference_rich_content", seed=4, user=make_staff(username="ann"))
    assert len(result.created) == 3 and not result.failed
    for variant in result.created:
        variant.refresh_from_db()
        assert variant.review_status == Answer.Review.PENDING
        assert variant.derived_from.external_id.endswith("-a2")
        assert variant.external_id == f"{variant.derived_from.external_id}-reference_rich_content-r4"
        assert variant.provenance["created_by"] == "ann"
        assert [s["kind"] for s in variant.provenance["steps"]] == ["reference", "rich_content"]
        assert variant.checks["preservation"]["words_added"] == 0
        assert variant.len_words > variant.derived_from.len_words
    assert ComparisonItem.objects.count() == items_before


def test_it_can_perturb_a1_instead(study):
    result = perturbation_generate(study=study, kind="reference", seed=1, of="a1")
    assert all(v.derived_from.external_id.endswith("-a1") for v in result.created)


def test_it_picks_the_second_original_by_id_when_ids_have_no_suffix(study):
    question = study.questions.first()
    first, second = originals(question)
    first.external_id, second.external_id = "x-one", "x-two"
    first.save()
    second.save()
    assert question_originals(question) == (second, first)


def test_running_it_again_skips_what_exists_and_a_dry_run_writes_nothing(study):
    perturbation_generate(study=study, kind="reference", seed=1)
    again = perturbation_generate(study=study, kind="reference", seed=1)
    assert not again.created and len(again.skipped) == 3
    count = Answer.objects.count()
    dry = perturbation_generate(study=study, kind="rich_content", seed=1, dry_run=True)
    assert len(dry.created) == 3 and Answer.objects.count() == count


def test_it_refuses_unknown_kinds_and_rules_that_do_not_exist(study):
    with pytest.raises(PerturbationError, match="unknown perturbation kind 'nope'"):
        perturbation_generate(study=study, kind="nope", seed=1)
    with pytest.raises(PerturbationError, match="factual_error has no rule generator"):
        perturbation_generate(study=study, kind="factual_error", seed=1)
    with pytest.raises(PerturbationError, match="method must be one of"):
        perturbation_generate(study=study, kind="reference", seed=1, method="magic")


def test_approving_creates_the_item_with_the_other_original_as_a1(study):
    variant = perturbation_generate(study=study, kind="reference", seed=1).created[0]
    staff = make_staff()
    item = answer_review(answer=variant, decision="approve", user=staff, note="fine")
    first, _ = originals(variant.question)
    assert (item.answer_a1, item.answer_a2, item.kind.slug) == (first, variant, "reference")
    variant.refresh_from_db()
    assert variant.review_status == Answer.Review.APPROVED
    revision = AnswerRevision.objects.get(answer=variant)
    assert (revision.action, revision.user, revision.note) == ("approve", staff, "fine")


def test_approving_another_variant_replaces_the_item_only_while_it_has_no_votes(study):
    first = perturbation_generate(study=study, kind="reference", seed=1).created[0]
    second = perturbation_generate(study=study, kind="reference", seed=2).created[0]
    item = answer_review(answer=first, decision="approve")
    assert answer_review(answer=second, decision="approve").pk == item.pk
    item.refresh_from_db()
    assert item.answer_a2 == second
    vote_on(item)
    with pytest.raises(PerturbationError, match="already has 1 vote"):
        answer_review(answer=first, decision="approve")
    item.refresh_from_db()
    assert item.answer_a2 == second


def test_rejecting_removes_an_unvoted_item_and_refuses_to_detach_votes(study):
    one, two = perturbation_generate(study=study, kind="rich_content", seed=1).created[:2]
    item_one = answer_review(answer=one, decision="approve")
    answer_review(answer=one, decision="reject", note="too flashy")
    assert not ComparisonItem.objects.filter(pk=item_one.pk).exists()
    one.refresh_from_db()
    assert one.review_status == Answer.Review.REJECTED

    item_two = answer_review(answer=two, decision="approve")
    vote = vote_on(item_two)
    with pytest.raises(PerturbationError, match=r"cannot reject .* already has 1 vote"):
        answer_review(answer=two, decision="reject")
    two.refresh_from_db()
    assert two.review_status == Answer.Review.APPROVED
    assert Vote.objects.filter(pk=vote.pk, item=item_two).exists()


def test_originals_are_not_reviewed(study):
    first, _ = originals(study.questions.first())
    with pytest.raises(PerturbationError, match="original answer"):
        answer_review(answer=first, decision="approve")
    with pytest.raises(PerturbationError, match="decision must be"):
        answer_review(answer=first, decision="maybe")


def test_bulk_review_decides_each_and_reports_refusals(study):
    variants = perturbation_generate(study=study, kind="reference", seed=1).created
    answer_review(answer=variants[0], decision="approve")
    vote_on(ComparisonItem.objects.get(answer_a2=variants[0]))
    result = answers_review(answers=variants, decision="reject")
    assert result.done == variants[1:]
    assert [a for a, _ in result.refused] == [variants[0]]


def test_editing_keeps_a_revision_records_provenance_and_reruns_the_checks(study):
    variant = perturbation_generate(study=study, kind="reference", seed=1).created[0]
    assert variant.checks["preservation"]["words_added"] == 0
    staff = make_staff(username="editor")
    new_text = variant.text.replace("**References**", "Also, extra words appear here.\n\n**References**")
    edited = answer_edit(answer=variant, text=new_text, user=staff, note="test")
    assert edited.checks["preservation"]["words_added"] == 5
    revision = AnswerRevision.objects.get(answer=variant, action="edit")
    assert revision.text_before == variant.text and revision.text_after == edited.text and revision.user == staff
    assert edited.provenance["edits"] == [
        {"revision": revision.pk, "by": "editor", "at": revision.created_at.isoformat()}
    ]
    assert edited.provenance["method"] == "rule"  # the generation record stays
    with pytest.raises(PerturbationError, match="empty"):
        answer_edit(answer=variant, text="   ", user=staff)


def test_editing_is_refused_once_the_item_has_votes(study):
    variant = perturbation_generate(study=study, kind="reference", seed=1).created[0]
    vote_on(answer_review(answer=variant, decision="approve"))
    with pytest.raises(PerturbationError, match="cannot edit"):
        answer_edit(answer=variant, text="Something else.")
    assert not AnswerRevision.objects.filter(action="edit").exists()


def test_the_perturb_command_generates_and_reports(study):
    out = StringIO()
    call_command("perturb", "--study", "plants", "--kind", "reference", "--seed", "3", "--verbosity", "2", stdout=out)
    text = out.getvalue()
    assert "created 3 variant(s)" in text
    assert "q" in text and "-reference-r3:" in text
    assert Answer.objects.filter(external_id__endswith="-reference-r3").count() == 3


def test_the_perturb_command_dry_run_writes_nothing(study):
    out = StringIO()
    call_command("perturb", "--study", "plants", "--kind", "rich_content", "--dry-run", stdout=out)
    assert "would create 3 variant(s)" in out.getvalue()
    assert not Answer.objects.filter(kind__slug="rich_content").exists()


def test_the_perturb_command_rejects_bad_arguments(study):
    with pytest.raises(CommandError, match="no study with slug 'nope'"):
        call_command("perturb", "--study", "nope", "--kind", "reference")
    with pytest.raises(CommandError, match="unknown perturbation kind"):
        call_command("perturb", "--study", "plants", "--kind", "bogus")
    with pytest.raises(CommandError, match="no rule generator"):
        call_command("perturb", "--study", "plants", "--kind", "gender")
