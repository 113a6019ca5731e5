"""Staff editing a question or an answer in the admin are held to what a study file may hold: text
no longer than MAX_TEXT_CHARS, and JSON fields of the types the review page and the checks
read (a `checks` of [1, 2] once broke the variant list for every study)."""

import pytest
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.test import RequestFactory

from annotations.models import Answer, Question
from biasstudy.rendering import MAX_TEXT_CHARS
from tests.factories import make_question, make_study


@pytest.fixture
def answer(db):
    return make_question(make_study(slug="adm")).answers.order_by("id").first()


def staff_request():
    request = RequestFactory().post("/admin/")
    request.user = get_user_model().objects.create_superuser("boss", "boss@example.org", "pw")
    return request


def answer_form(answer, **changes):
    form_class = admin.site.get_model_admin(Answer).get_form(staff_request(), obj=answer)
    data = {
        "question": answer.question_id,
        "external_id": answer.external_id,
        "text": answer.text,
        "review_status": answer.review_status,
        "inserted_errors": "[]",
        "provenance": "{}",
        "checks": "{}",
        **changes,
    }
    return form_class(data, instance=answer)


def test_the_answer_form_takes_well_typed_values(answer):
    form = answer_form(answer, checks='{"ok": false, "warnings": ["longer"]}', provenance='{"method": "hand"}')
    assert form.is_valid(), form.errors


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("checks", "[1, 2]", "checks: must be an object"),
        ("checks", '{"warnings": 5}', "checks.warnings: must be a list of text"),
        ("inserted_errors", "[3]", "inserted_errors[0]: must be an object"),
        ("inserted_errors", '[{"error": 1}]', "inserted_errors[0].error: must be text"),
        ("provenance", '{"edits": 3}', "provenance.edits: must be a list"),
        ("text", "a" * (MAX_TEXT_CHARS + 1), f"at most {MAX_TEXT_CHARS} characters"),
    ],
)
def test_the_answer_form_refuses_what_a_study_file_may_not_hold(answer, field, value, message):
    form = answer_form(answer, **{field: value})
    assert not form.is_valid()
    assert message in " ".join(form.errors[field])
    answer.refresh_from_db()
    assert answer.checks == {} and len(answer.text) < MAX_TEXT_CHARS


def test_the_question_form_caps_its_text(answer):
    question = answer.question
    form_class = admin.site.get_model_admin(Question).get_form(staff_request(), obj=question)
    data = {
        "study": question.study_id,
        "external_id": "q",
        "bloom_level": "remembering",
        "text": "a" * (MAX_TEXT_CHARS + 1),
    }
    form = form_class(data, instance=question)
    assert not form.is_valid() and "text" in form.errors
