"""Attention checks that work as a researcher leaves them: a new study flags a rater below three
right in four, its page says when a rater cannot meet the three checks a flag needs, and a rater
whose vote came too fast is told by default."""

import pytest
from django.urls import reverse

from annotations import assignment
from annotations.models import Answer, ComparisonItem, Question, Study, checks_met
from tests.factories import make_question, make_rater, make_study


def add_attention_check(study: Study, n: int) -> Question:
    question = Question.objects.create(
        study=study, external_id=f"check-{n}", text="Which is right?", bloom_level="remembering", is_gold=True
    )
    better = Answer.objects.create(question=question, external_id=f"check-{n}-better", text="Two plus two is four.")
    worse = Answer.objects.create(question=question, external_id=f"check-{n}-worse", text="Two plus two is five.")
    ComparisonItem.objects.create(study=study, question=question, answer_a1=better, answer_a2=worse)
    return question


@pytest.mark.django_db
def test_a_new_study_flags_raters_below_three_right_in_four_and_tells_a_fast_rater():
    study = Study.objects.create(title="Plain", slug="plain")
    assert study.gold_min_accuracy == 0.75 and study.fast_notice is True
    rater = make_rater(study)
    for correct in (True, True, False):  # two of three: under 0.75
        rater.score_attention_check(correct=correct)
    assert rater.flagged and "2/3 correct, under 75%" in rater.flag_reason


@pytest.mark.parametrize(
    ("regular", "gold", "every", "target", "met"),
    [
        (6, 2, 10, 45, 0),  # six questions: the 11th item never comes
        (30, 5, 10, 45, 3),  # items 11, 22 and 33, when the regular items are done
        (30, 5, 10, 20, 1),  # the target ends it at 20
        (40, 5, 10, 45, 4),  # 11, 22, 33, 44
        (6, 2, 2, 45, 2),  # every third item, but only two checks
        (6, 3, 2, 45, 3),  # 3rd, 6th, 9th
        (6, 3, 0, 45, 0),
    ],
)
def test_checks_met_counts_the_checks_of_one_visit_as_the_hand_out_goes(regular, gold, every, target, met):
    assert checks_met(regular=regular, gold=gold, gold_every=every, target=target) == met


@pytest.mark.django_db
def test_the_hand_out_meets_as_many_checks_as_counted():
    study = make_study(gold_every=2, target_per_rater=9)
    for _ in range(6):
        make_question(study)
    for n in range(3):
        add_attention_check(study, n)
    rater = make_rater(study)
    checks = 0
    while (lease := assignment.lease_next(rater=rater)) is not None:
        checks += lease.is_gold
        assignment.vote_record(
            rater_id=rater.pk, slug=study.slug, token=lease.token, choice_shown="first", client_ms=9000,
            hand_out_next=False,
        )  # fmt: skip
        rater.refresh_from_db()
    assert checks == checks_met(regular=6, gold=3, gold_every=2, target=9) == 3


def study_page(client, study: Study) -> str:
    return client.get(reverse("admin:annotations_study_change", args=[study.pk])).content.decode()


def test_the_study_page_says_when_a_six_question_study_never_shows_its_two_checks(staff_client):
    study = make_study()
    for _ in range(6):
        make_question(study)
    for n in range(2):
        add_attention_check(study, n)
    html = study_page(staff_client, study)
    assert 'id="attention-check-problem"' in html
    assert "a rater is judged after 3 of them" in html and "a rater meets 0" in html
    assert "Add attention checks or questions" in html  # two checks can never make three

    add_attention_check(study, 2)
    html = study_page(staff_client, study)
    assert "a rater meets 0" in html and "An attention check after every 2 items would let them meet 3" in html

    Study.objects.filter(pk=study.pk).update(gold_every=2)
    assert 'id="attention-check-problem"' not in study_page(staff_client, study)


def test_the_study_page_says_a_bar_of_zero_flags_nobody_and_says_nothing_without_checks(staff_client):
    study = make_study(gold_min_accuracy=0, gold_every=1)
    for _ in range(6):
        make_question(study)
    assert 'id="attention-check-problem"' not in study_page(staff_client, study)
    for n in range(3):
        add_attention_check(study, n)
    assert "Attention checks flag nobody" in study_page(staff_client, study)


def test_an_attention_check_is_made_without_a_bloom_level_and_a_question_still_needs_one(staff_client):
    from tests.test_admin_study_forms import question_data

    study = make_study()
    add = reverse("admin:annotations_question_add")
    check = question_data(study, external_id="check-1", bloom_level="", is_gold="on", text="Which is right?")
    response = staff_client.post(add, check)
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert Question.objects.get(external_id="check-1").bloom_level == ""
    response = staff_client.post(add, question_data(study, external_id="q-1", bloom_level=""))
    assert response.status_code == 200
    assert "needs its Bloom level (an attention check does not)" in response.content.decode()


@pytest.mark.django_db
def test_a_study_files_attention_checks_need_no_bloom_level_and_export_without_one(tmp_path):
    from annotations.study_files import study_export, study_import
    from tests.test_study_import import minimal_document, write

    document = minimal_document()
    document["gold_items"] = [{"id": "g1", "text": "Two plus two?", "better": "Four.", "worse": "Five."}]
    study = study_import(path=write(tmp_path, document), fmt="biasstudy")
    assert study.questions.get(is_gold=True).bloom_level == ""
    exported = study_export(study=study)
    assert "bloom" not in exported["gold_items"][0]


def test_the_study_page_and_the_monitor_name_attention_checks_not_gold(staff_client):
    study = make_study()
    html = study_page(staff_client, study)
    assert "Attention check after every" in html and "Attention checks right, at least" in html
    assert "Gold every" not in html and "Gold min accuracy" not in html
    monitor = staff_client.get(reverse("analysis:raters", args=[study.slug])).content.decode()
    assert "Attention checks right</th>" in monitor and "Gold accuracy" not in monitor
