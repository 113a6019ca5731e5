"""A study from scratch in the admin's forms: the study's settings, then each question with its
two answers (the control item comes by itself), variants derived only from their own question's
answers, and an LLM judge's label schemes ticked rather than typed as JSON."""

from django.urls import reverse

from annotations.models import Answer, ComparisonItem, PerturbationKind, Question, Study
from tests.factories import make_question, make_study


def study_data(**kw):
    data = {
        "title": "Sky questions", "slug": "sky", "status": "draft", "instructions": "Pick the better answer.",
        "consent": "", "completion_code": "", "prolific_completion_url": "", "votes_per_item": "6",
        "target_per_rater": "10", "lease_seconds": "900", "min_response_ms": "3000", "ms_per_word": "0",
        "gold_every": "10", "gold_min_accuracy": "0.75", "max_length_ratio": "1.3",
    }  # fmt: skip
    data.update(kw)
    return data


def question_data(study, **kw):
    data = {
        "study": str(study.pk), "external_id": "sky-1", "bloom_level": "remembering",
        "text": "Why is the sky blue?", "answer_a1": "Rayleigh scattering.", "answer_a2": "Because of the sea.",
    }  # fmt: skip
    data.update(kw)
    return data


def test_staff_make_a_study_then_a_question_whose_control_item_is_made_for_them(staff_client):
    response = staff_client.post(reverse("admin:annotations_study_add"), study_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    study = Study.objects.get(slug="sky")

    page = staff_client.get(reverse("admin:annotations_question_add"))
    html = page.content.decode()
    assert 'name="answer_a1"' in html and 'name="answer_a2"' in html

    response = staff_client.post(reverse("admin:annotations_question_add"), question_data(study))
    assert response.status_code == 302, response.context["adminform"].form.errors
    question = Question.objects.get(study=study, external_id="sky-1")
    a1, a2 = question.answers.order_by("external_id")
    assert (a1.external_id, a1.text, a2.external_id, a2.text) == (
        "sky-1-a1", "Rayleigh scattering.", "sky-1-a2", "Because of the sea."
    )  # fmt: skip
    item = ComparisonItem.objects.get(question=question)
    assert (item.kind, item.answer_a1, item.answer_a2) == (None, a1, a2)


def form_as_sent(page, **changes):
    """What the browser sends back from an admin form page: its initial values, with `changes`."""
    form = page.context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {name: ("on" if value is True else value) for name, value in data.items() if value is not None}
    data = {name: value for name, value in data.items() if value is not False}  # an unticked box is not sent
    data.update({"created_at_0": "2026-01-01", "created_at_1": "00:00:00", **changes})
    return data


def test_a_study_made_with_only_a_slug_and_a_title_gets_the_protocols_defaults_and_its_next_save_works(
    staff_client,
):
    add = reverse("admin:annotations_study_add")
    response = staff_client.post(add, form_as_sent(staff_client.get(add), title="Defaults", slug="defaults"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    study = Study.objects.get(slug="defaults")
    assert study.min_response_ms == 3000, "the too-fast filter is on"
    assert study.gold_every == 10, "attention checks come as soon as the study has some"
    for _ in range(12):
        make_question(study)
    gold = make_question(study, is_gold=True)
    assert study.most_items_per_rater() == 13 and study.target_per_rater == 45  # the gold one 11th
    # The next save, touching nothing: the target nobody can reach is lowered, with a warning.
    change = reverse("admin:annotations_study_change", args=[study.pk])
    saved = staff_client.post(change, form_as_sent(staff_client.get(change)), follow=True)
    assert saved.status_code == 200 and saved.redirect_chain, saved.context["adminform"].form.errors
    assert "lowered from 45 to 13: one rater can get at most 13 items" in saved.content.decode()
    study.refresh_from_db()
    assert study.target_per_rater == 13 and gold.is_gold


def test_a_question_with_two_identical_answers_is_refused_and_nothing_is_written(staff_client):
    study = make_study()
    data = question_data(study, answer_a2="Rayleigh scattering.")
    response = staff_client.post(reverse("admin:annotations_question_add"), data)
    assert "two answers are the same text" in response.context["adminform"].form.errors["answer_a2"][0]
    assert not Question.objects.exists() and not Answer.objects.exists()


def test_a_question_id_already_in_the_study_is_refused(staff_client):
    study = make_study()
    make_question(study, external_id="sky-1")
    response = staff_client.post(reverse("admin:annotations_question_add"), question_data(study))
    assert response.status_code == 200
    assert Question.objects.filter(study=study).count() == 1


def test_a_variant_can_be_derived_only_from_an_answer_of_its_own_question(staff_client):
    study = make_study()
    question = make_question(study)
    other = make_question(study)
    page = staff_client.get(reverse("admin:annotations_question_change", args=[question.pk]))
    inline = page.context["inline_admin_formsets"][0]
    choices = set(inline.formset.form.base_fields["derived_from"].queryset)
    assert choices == set(question.answers.all())
    assert not choices & set(other.answers.all())


def test_the_answer_page_refuses_an_original_from_another_question(staff_client):
    study = make_study()
    question, other = make_question(study), make_question(study)
    variant = Answer.objects.create(
        question=question,
        external_id="v",
        text="Changed.",
        derived_from=question.answers.get(external_id__endswith="-a2"),
        kind=PerturbationKind.objects.get(slug="reference"),
    )
    page = staff_client.get(reverse("admin:annotations_answer_change", args=[variant.pk]))
    assert set(page.context["adminform"].form.fields["derived_from"].queryset) == set(question.answers.all())
    foreign = other.answers.get(external_id__endswith="-a1")
    data = {
        "question": str(question.pk), "external_id": "v", "text": "Changed.", "derived_from": str(foreign.pk),
        "kind": str(variant.kind_id), "provenance": "{}", "review_status": "approved", "inserted_errors": "[]",
        "checks": "{}", "created_at_0": "2026-01-01", "created_at_1": "00:00:00",
    }  # fmt: skip
    response = staff_client.post(reverse("admin:annotations_answer_change", args=[variant.pk]), data)
    assert response.status_code == 200
    assert "derived_from" in response.context["adminform"].form.errors
    variant.refresh_from_db()
    assert variant.derived_from.question_id == question.pk


def test_label_schemes_are_boxes_to_tick_not_json(staff_client):
    page = staff_client.get(reverse("admin:judges_llmjudge_add"))
    html = page.content.decode()
    assert 'type="checkbox" name="label_schemes" value="answer12"' in html
    assert 'type="checkbox" name="label_schemes" value="ab"' in html


def test_the_study_page_links_to_adding_its_questions_and_another_keeps_the_study(staff_client):
    study = make_study()
    page = staff_client.get(reverse("admin:annotations_study_change", args=[study.pk])).content.decode()
    add = f"{reverse('admin:annotations_question_add')}?study={study.pk}"
    assert f'href="{add}"' in page
    assert staff_client.get(add).context["adminform"].form.initial["study"] == str(study.pk)
    response = staff_client.post(
        reverse("admin:annotations_question_add"), {**question_data(study), "_addanother": "1"}
    )
    assert response["Location"] == add


def kind_data(**kw):
    data = {
        "slug": "ref-then-rich", "name": "References, then rich content", "semantics": "non_semantic",
        "steps": "reference, rich_content", "study": "", "description": "", "model_prompt": "Rewrite {answer}.",
    }  # fmt: skip
    data.update(kw)
    return data


def test_a_compound_kinds_steps_and_prompt_are_typed_in_fields_not_json(staff_client):
    response = staff_client.post(reverse("admin:annotations_perturbationkind_add"), kind_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    kind = PerturbationKind.objects.get(slug="ref-then-rich")
    assert (kind.steps, kind.model_prompt) == (["reference", "rich_content"], "Rewrite {answer}.")
    page = staff_client.get(reverse("admin:annotations_perturbationkind_change", args=[kind.pk])).content.decode()
    assert 'value="reference, rich_content"' in page


def test_a_step_that_is_no_kind_is_refused_by_name(staff_client):
    response = staff_client.post(
        reverse("admin:annotations_perturbationkind_add"), kind_data(steps="reference, sarcasm")
    )
    assert "unknown kind(s): sarcasm" in response.context["adminform"].form.errors["steps"][0]
    assert not PerturbationKind.objects.filter(slug="ref-then-rich").exists()


def test_saving_a_built_in_kinds_prompt_keeps_its_steps(staff_client):
    kind = PerturbationKind.objects.get(slug="reference_rich_content")
    steps = list(kind.steps)
    data = {"name": kind.name, "description": kind.description, "model_prompt": "New wording {answer}."}
    response = staff_client.post(reverse("admin:annotations_perturbationkind_change", args=[kind.pk]), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    kind.refresh_from_db()
    assert (kind.steps, kind.model_prompt) == (steps, "New wording {answer}.")
