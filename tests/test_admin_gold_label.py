"""The answer known to be better (an item's gold label) can be given where a researcher writes
their own material: the question form, each question's page, and the study-upload preview
shows it with every question's text and answers, rendered safely."""

import json

import pytest
from django.urls import reverse

from analysis import current_report, rows
from annotations.models import ComparisonItem, Question
from tests.factories import human_pool, make_rater, make_study, make_vote
from tests.test_admin_study_forms import question_data
from tests.test_admin_study_upload import post_file
from tests.test_study_import import minimal_document


@pytest.fixture(autouse=True)
def upload_dir(settings, tmp_path):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"


def test_the_question_form_says_which_answer_is_better_and_accuracy_against_it_follows(staff_client):
    study = make_study(slug="sky")
    page = staff_client.get(reverse("admin:annotations_question_add")).content.decode()
    assert 'name="gold_label"' in page and "Which answer is better?" in page
    response = staff_client.post(reverse("admin:annotations_question_add"), question_data(study, gold_label="a1"))
    assert response.status_code == 302, response.context["adminform"].form.errors
    item = ComparisonItem.objects.get(question__external_id="sky-1")
    assert item.gold_label == "a1"

    make_vote(item, human_pool(study), rater=make_rater(study), client_ms=5000)  # a vote for A1, shown first
    result = current_report.study_analyze(study=study)
    judge = result["judges"][0]["judge"]
    shown_a1_first = rows.one(result["rows"], judge=judge, metric="gold_accuracy_a1_first", subset="")
    assert (shown_a1_first["n"], shown_a1_first["estimate"]) == (1, 1.0)


def test_leaving_it_unknown_keeps_no_gold_label(staff_client):
    study = make_study(slug="sky")
    staff_client.post(reverse("admin:annotations_question_add"), question_data(study))
    assert ComparisonItem.objects.get(question__external_id="sky-1").gold_label == ""


def test_a_questions_page_sets_the_better_answer_of_each_item(staff_client):
    from tests.test_better_answer_inherited import post_question_page

    study = make_study(slug="sky")
    staff_client.post(reverse("admin:annotations_question_add"), question_data(study))
    question = Question.objects.get(external_id="sky-1")
    item = ComparisonItem.objects.get(question=question)
    post_question_page(staff_client, question, {item.pk: "a2"})
    item.refresh_from_db()
    assert item.gold_label == "a2"


def test_the_upload_preview_shows_texts_rendered_safely_and_the_better_answer(staff_client):
    document = minimal_document()
    question = document["questions"][0]
    question["text"] = "What colour is the **sky**? <script>alert('q')</script>"
    question["answers"][0]["text"] = "Blue, because air scatters *blue* light most. <img src=x onerror=alert(1)>"
    question["items"] = [{"a1": "q1-a1", "a2": "q1-a2", "gold_label": "a1"}]
    response = post_file(staff_client, "mini.json", json.dumps(document).encode())
    html = staff_client.get(response["Location"]).content.decode()
    assert "<strong>sky</strong>" in html and "<em>blue</em>" in html
    assert "<script>alert" not in html and "onerror" not in html
    assert "It looks blue: short wavelengths scatter more." in html
    assert "A1 is better" in html
