"""A question's better answer (its control item's gold label) is a property of the question: its
perturbed items inherit it, named from their own side, and a degrading kind makes A1 the better
answer by design. They inherit it when made (the review page's approval, the API, a study file),
when the question's changes in the admin (those set by hand keep theirs), and once, by migration,
for the items made before."""

import json

import pytest
from django.urls import reverse

from analysis import current_report, rows
from annotations.models import ComparisonItem
from annotations.study_files import study_import
from perturbations.services import answer_review
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, make_vote
from tests.test_study_import import minimal_document, write


def better_answered(**kw):
    """A question whose control item says A2 is the better answer."""
    question = make_question(make_study(**kw))
    question.items.filter(kind=None).update(gold_label="a2")
    return question


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("kind", "of", "expected"),
    [
        ("reference", "a2", "a2"),  # the better original was perturbed: A2p in the item
        ("reference", "a1", "a1"),  # A1 was perturbed: the better original is the item's A1
        ("rich_content", "a2", "a2"),
        ("factual_error", "a2", "a1"),  # a factual error makes A2p the worse by design
        ("factual_error", "a1", "a1"),
    ],
)
def test_an_approved_variants_item_inherits_the_questions_better_answer(kind, of, expected):
    question = better_answered()
    variant = make_variant(question, kind=kind, of=of, item=False, review_status="pending")
    item = answer_review(answer=variant, decision="approve")
    assert item.gold_label == expected


@pytest.mark.django_db
def test_an_item_whose_question_has_no_better_answer_gets_none_and_one_set_by_hand_keeps_its_own():
    question = make_question(make_study())
    assert ComparisonItem.objects.get(answer_a2=make_variant(question, kind="factual_error")).gold_label == ""
    other = better_answered()
    variant = make_variant(other, kind="reference", item=False)
    (first,) = other.answers.originals().filter(external_id__endswith="-a1")
    item = ComparisonItem.objects.create(
        study=other.study, question=other, kind=variant.kind, answer_a1=first, answer_a2=variant, gold_label="a1"
    )
    assert item.gold_label == "a1"


@pytest.mark.django_db
def test_accuracy_against_the_better_answer_counts_the_perturbed_items_votes_too():
    question = better_answered()
    study = question.study
    item = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="reference", of="a2"))
    humans, rater = human_pool(study), make_rater(study)
    for voted in (question.items.get(kind=None), item):
        make_vote(voted, humans, rater=rater, shown_first="a2", choice_shown="first", client_ms=5000)  # for A2
    result = current_report.study_analyze(study=study)
    judge = result["judges"][0]["judge"]
    shown_a2_first = rows.one(result["rows"], judge=judge, metric="gold_accuracy_a2_first", subset="")
    assert (shown_a2_first["n"], shown_a2_first["estimate"]) == (2, 1.0)


@pytest.mark.django_db
def test_a_study_files_perturbed_items_inherit_the_control_items_better_answer_unless_they_name_one(tmp_path):
    document = minimal_document()
    document["questions"][0]["items"] = [
        {"a1": "q1-a1", "a2": "q1-a2", "gold_label": "a2"},
        {"kind": "factual_error", "a1": "q1-a2", "a2": "q1-a1-fe"},
        {"kind": "reference", "a1": "q1-a1", "a2": "q1-a2-ref"},
    ]
    items = study_import(path=write(tmp_path, document), fmt="biasstudy").items
    assert dict(items.values_list("kind__slug", "gold_label")) == {None: "a2", "factual_error": "a1", "reference": "a2"}

    document["study"]["slug"] = "mini-2"
    document["questions"][0]["items"][2]["gold_label"] = "a1"  # the file's own word for this item
    items = study_import(path=write(tmp_path, document), fmt="biasstudy").items
    assert items.get(kind__slug="reference").gold_label == "a1"


def post_question_page(client, question, labels: dict[int, str]):
    """The question's admin page sent back as it is, with the items' better answers `labels`."""
    url = reverse("admin:annotations_question_change", args=[question.pk])
    page = client.get(url)
    data = {"study": str(question.study_id), "external_id": question.external_id}
    data |= {"bloom_level": question.bloom_level, "text": question.text}
    for inline in page.context["inline_admin_formsets"]:
        formset = inline.formset
        data |= {f"{formset.prefix}-{k}": v for k, v in formset.management_form.initial.items()}
        for i, form in enumerate(formset.forms):
            for name, field in form.fields.items():
                value = form.initial.get(name, field.initial)
                if value is not None and name != "DELETE":
                    data[f"{formset.prefix}-{i}-{name}"] = value.pk if hasattr(value, "pk") else value
            if formset.model is ComparisonItem:
                data[f"{formset.prefix}-{i}-gold_label"] = labels.get(form.instance.pk, form.instance.gold_label)
            else:
                for name, empty in (("provenance", {}), ("inserted_errors", [])):
                    data[f"{formset.prefix}-{i}-{name}"] = json.dumps(form.initial.get(name) or empty)
    response = client.post(url, data)
    assert response.status_code == 302, response.context and response.context["errors"]
    return client.get(response["Location"])


def test_a_new_better_answer_on_the_control_item_reaches_the_perturbed_items_but_not_one_set_by_hand(
    staff_client,
):
    question = make_question(make_study())
    control = question.items.get(kind=None)
    ref = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="reference", of="a2"))
    rich = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="rich_content", of="a2"))
    fe = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="factual_error", of="a2"))
    post_question_page(staff_client, question, {control.pk: "a2", rich.pk: "a1"})  # rich: the researcher's own
    labels = dict(question.items.values_list("pk", "gold_label"))
    assert labels == {control.pk: "a2", ref.pk: "a2", rich.pk: "a1", fe.pk: "a1"}

    page = post_question_page(staff_client, question, {control.pk: "a1"})
    labels = dict(question.items.values_list("pk", "gold_label"))
    assert labels == {control.pk: "a1", ref.pk: "a1", rich.pk: "a1", fe.pk: "a1"}
    assert "perturbed item(s) of" in page.content.decode()


def test_the_questions_page_names_the_better_answer_and_the_attention_check_apart(staff_client):
    question = make_question(make_study())
    html = staff_client.get(reverse("admin:annotations_question_change", args=[question.pk])).content.decode()
    assert "Better answer" in html and "perturbed items inherit it" in html
    assert "Attention check" in html and "Is gold" not in html


@pytest.mark.django_db(transaction=True)
def test_items_made_before_inheritance_get_their_questions_better_answer_by_migration():
    from tests.test_migrations import _migrate_across

    question = better_answered()
    ref_a1 = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="reference", of="a1"))
    ref_a2 = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="rich_content", of="a2"))
    fe = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="factual_error", of="a2"))
    own = ComparisonItem.objects.get(answer_a2=make_variant(question, kind="distraction", of="a2"))
    unknown = make_question(question.study)
    unknown_ref = ComparisonItem.objects.get(answer_a2=make_variant(unknown, kind="reference"))
    ComparisonItem.objects.filter(kind__isnull=False).update(gold_label="")  # as they were made before
    ComparisonItem.objects.filter(pk=own.pk).update(gold_label="a1")
    _migrate_across("0030_study_data_version", "0031_study_defaults_and_inherited_better_answers")
    labels = dict(ComparisonItem.objects.values_list("pk", "gold_label"))
    assert (labels[ref_a1.pk], labels[ref_a2.pk], labels[fe.pk], labels[own.pk]) == ("a1", "a2", "a1", "a1")
    assert labels[unknown_ref.pk] == ""
