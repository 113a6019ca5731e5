import pytest
from django.db import IntegrityError, transaction

from annotations.models import Choice, ChoiceShown, ComparisonItem, Shown, Vote, choice_from_shown
from tests.factories import human_pool, make_question, make_rater, make_study, make_variant, originals


@pytest.mark.parametrize(
    ("shown_first", "choice_shown", "meaning"),
    [
        (Shown.A1_FIRST, ChoiceShown.FIRST, Choice.A1),
        (Shown.A1_FIRST, ChoiceShown.SECOND, Choice.A2),
        (Shown.A2_FIRST, ChoiceShown.FIRST, Choice.A2),
        (Shown.A2_FIRST, ChoiceShown.SECOND, Choice.A1),
        (Shown.A2_FIRST, ChoiceShown.TIE, Choice.TIE),
    ],
)
def test_a_choice_as_shown_maps_back_to_its_meaning(shown_first, choice_shown, meaning):
    assert choice_from_shown(shown_first, choice_shown) == meaning


def test_a_vote_stores_its_meaning_from_the_order_shown(db):
    study = make_study()
    item = make_question(study).items.get()
    vote = Vote.objects.create(item=item, judge=human_pool(study), shown_first="a2", choice_shown="first")
    assert vote.choice == "a2"


def test_the_database_rejects_a_meaning_that_contradicts_the_order_shown(db):
    study = make_study()
    item = make_question(study).items.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(item=item, judge=human_pool(study), shown_first="a1", choice_shown="first", choice="a2")


def test_a_rater_can_vote_on_an_item_only_once(db):
    study = make_study()
    item = make_question(study).items.get()
    rater = make_rater(study)
    Vote.objects.create(item=item, judge=human_pool(study), rater=rater, shown_first="a1", choice_shown="tie")
    with pytest.raises(IntegrityError), transaction.atomic():
        Vote.objects.create(item=item, judge=human_pool(study), rater=rater, shown_first="a2", choice_shown="tie")


def test_a_question_has_exactly_one_control_item(db):
    study = make_study()
    question = make_question(study)
    first, second = originals(question)
    with pytest.raises(IntegrityError), transaction.atomic():
        ComparisonItem.objects.create(study=study, question=question, answer_a1=second, answer_a2=first)


def test_a_variant_must_name_its_perturbation(db):
    study = make_study()
    question = make_question(study)
    first, _ = originals(question)
    from annotations.models import Answer

    with pytest.raises(IntegrityError), transaction.atomic():
        Answer.objects.create(question=question, external_id="x", text="t", derived_from=first)


def test_the_perturbed_slot_can_differ_per_perturbation(db):
    study = make_study()
    question = make_question(study)
    first, second = originals(question)
    fe = make_variant(question, kind="factual_error", of="a1")
    ref = make_variant(question, kind="reference", of="a2")
    fe_item = question.items.get(kind__slug="factual_error")
    ref_item = question.items.get(kind__slug="reference")
    assert (fe_item.answer_a1, fe_item.answer_a2) == (second, fe)
    assert (ref_item.answer_a1, ref_item.answer_a2) == (first, ref)


def test_answer_lengths_are_cached_on_save(db):
    study = make_study()
    question = make_question(study, a1="one two three", a2="four")
    first, second = originals(question)
    assert (first.len_words, first.len_chars) == (3, 13)
    first.text = "one two"
    first.save(update_fields=["text"])
    first.refresh_from_db()
    assert first.len_words == 2


def test_each_study_has_at_most_one_human_pool(db):
    study = make_study()
    human_pool(study)
    from annotations.models import Judge

    with pytest.raises(IntegrityError), transaction.atomic():
        Judge.objects.create(study=study, kind="human", name="Other humans")


@pytest.mark.django_db
def test_questions_and_answers_keep_their_render_and_never_show_a_stale_one():
    study = make_study()
    question = make_question(study, text="Why **bold**?", a1="First <script>alert(1)</script> answer.")
    answer, _ = originals(question)
    assert "<strong>bold</strong>" in question.text_html
    assert "<script" not in answer.text_html and str(answer.html) == answer.text_html
    # A text changed behind save()'s back (a queryset update) is rendered afresh, not shown stale.
    type(answer).objects.filter(pk=answer.pk).update(text="Now *changed*.")
    answer.refresh_from_db()
    assert "<em>changed</em>" in answer.html
    assert "<em>changed</em>" not in answer.text_html
    answer.save()
    assert "<em>changed</em>" in answer.text_html


def test_a_studys_instructions_are_stored_rendered_and_rendered_afresh_when_changed_behind_save(db, client):
    study = make_study(slug="instr", instructions="Read **both** answers.<script>alert(1)</script>")
    make_question(study)
    assert "<strong>both</strong>" in study.instructions_html and "<script" not in study.instructions_html
    assert str(study.instructions_rendered) == study.instructions_html
    # The task page shows the stored render (no render per request).
    client.post("/s/instr/", {"participant_id": "I1", "consent": "on"})
    assert "Read <strong>both</strong> answers." in client.get("/s/instr/task/").content.decode()
    type(study).objects.filter(pk=study.pk).update(instructions="Now *changed*.")
    study.refresh_from_db()
    assert "<em>changed</em>" in study.instructions_rendered and "<em>changed</em>" not in study.instructions_html
    assert "Now <em>changed</em>." in client.get("/s/instr/task/").content.decode()
    study.save(update_fields=["instructions"])
    study.refresh_from_db()
    assert "<em>changed</em>" in study.instructions_html
