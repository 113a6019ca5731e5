"""A study made in any of the ways a researcher makes one (the admin's forms, the API, a file)
exports to a file that import_study takes back, giving the same study: DEPLOY.md promises plain
files that outlive any database, and one set of limits holds for every way in."""

import pytest
from django.urls import reverse

from annotations.models import Study
from annotations.study_files import study_export, study_import
from tests.test_admin_study_forms import question_data, study_data
from tests.test_study_import import minimal_document, write


def exported_again(study: Study, tmp_path) -> tuple[dict, dict]:
    first = study_export(study=study)
    copy = study_import(path=write(tmp_path, first), fmt="biasstudy", slug=f"{study.slug}-copy")
    second = study_export(study=copy)
    first["study"].pop("slug")
    second["study"].pop("slug")
    return first, second


def test_a_study_saved_in_the_admin_without_questions_round_trips(staff_client, tmp_path):
    response = staff_client.post(reverse("admin:annotations_study_add"), study_data())
    assert response.status_code == 302, response.context["adminform"].form.errors
    first, second = exported_again(Study.objects.get(slug="sky"), tmp_path)
    assert first == second and first["questions"] == []


def test_a_study_made_in_the_admin_forms_round_trips(staff_client, tmp_path):
    # A target one rater can reach in the study it becomes (one question, one attention check):
    # the import lowers one above that (tests/test_study_safe_defaults.py).
    data = study_data(instructions="# Read\n\n- a\n- b", target_per_rater="1")
    staff_client.post(reverse("admin:annotations_study_add"), data)
    study = Study.objects.get(slug="sky")
    staff_client.post(reverse("admin:annotations_question_add"), question_data(study))
    gold = question_data(study, external_id="gold-1", is_gold="on", answer_a1="Good.", answer_a2="Bad.")
    response = staff_client.post(reverse("admin:annotations_question_add"), gold)
    assert response.status_code == 302, response.context["adminform"].form.errors
    first, second = exported_again(study, tmp_path)
    assert first == second and len(first["questions"]) == 1 and len(first["gold_items"]) == 1


def test_a_study_made_through_the_api_round_trips(token_client, tmp_path):
    response = token_client.post("/api/v1/studies/", minimal_document(votes_per_item=4), format="json")
    assert response.status_code == 201, response.content
    first, second = exported_again(Study.objects.get(slug="mini"), tmp_path)
    assert first == second


@pytest.mark.parametrize("field", ["instructions", "consent"])
def test_the_admin_refuses_text_the_study_file_would_refuse(staff_client, field):
    response = staff_client.post(reverse("admin:annotations_study_add"), study_data(**{field: "x" * 100_000}))
    assert response.status_code == 200
    assert "at most 50,000 characters" in response.context["adminform"].form.errors[field][0]
    assert not Study.objects.exists()
