"""A study file's variants get their checks stored on import, however the file comes in (the
import command, the admin's upload, the API), so the review page's "with warnings only" filter
finds them; checks the file carries are kept."""

import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse

from annotations.models import Answer, Study
from perturbations.services import variant_checks
from tests.test_study_import import minimal_document, write

LONG = "q1-a2-long"


def document_with_a_long_variant() -> dict:
    """minimal_document, its reference variant four times the length of its original."""
    document = minimal_document()
    (reference,) = [a for a in document["questions"][0]["answers"] if a["id"] == "q1-a2-ref"]
    reference.update(id=LONG, text="It looks blue: short wavelengths scatter more [1]. " + "And more words. " * 12)
    return document


def flagged_on_the_review_page(client) -> list[str]:
    study = Study.objects.get(slug="mini")
    response = client.get(reverse("admin:perturbations_review", args=[study.pk]), {"flagged": "on"})
    assert response.status_code == 200
    return [variant.external_id for variant in response.context["page"]]


def stored_checks() -> dict[str, dict]:
    return dict(Answer.objects.variants().values_list("external_id", "checks"))


def test_the_import_command_stores_the_checks_and_the_review_page_lists_the_long_variant(staff_client, tmp_path):
    call_command(
        "import_study", str(write(tmp_path, document_with_a_long_variant())), "--format", "biasstudy", verbosity=0
    )
    checks = stored_checks()
    assert checks[LONG]["ok"] is False and "words" in checks[LONG]["length"]["over"]
    assert checks["q1-a1-fe"]["ok"] is True
    assert not any(Answer.objects.originals().values_list("checks", flat=True))  # only variants are checked
    assert flagged_on_the_review_page(staff_client) == [LONG]


def test_the_api_import_stores_the_checks_and_the_review_page_lists_the_long_variant(staff_client, token_client):
    body = json.dumps(document_with_a_long_variant())
    response = token_client.generic("POST", "/api/v1/studies/", body, content_type="application/json")
    assert response.status_code == 201, response.content
    assert stored_checks()[LONG]["ok"] is False
    assert flagged_on_the_review_page(staff_client) == [LONG]


def test_the_admin_upload_stores_the_checks_and_the_review_page_lists_the_long_variant(
    staff_client, settings, tmp_path
):
    settings.STUDY_UPLOAD_DIR = tmp_path / "uploads"
    content = json.dumps(document_with_a_long_variant()).encode()
    preview = staff_client.post(
        reverse("admin:annotations_study_upload"), {"file": SimpleUploadedFile("mini.json", content)}
    )
    assert preview.status_code == 302
    staff_client.post(preview["Location"])  # the confirmation imports it
    assert stored_checks()[LONG]["ok"] is False
    assert flagged_on_the_review_page(staff_client) == [LONG]


def test_checks_the_file_carries_are_kept_as_they_are(db, tmp_path):
    document = document_with_a_long_variant()
    carried = {"ok": True, "warnings": [], "note": "reviewed by hand"}
    for answer in document["questions"][0]["answers"]:
        if answer["id"] == LONG:
            answer["checks"] = carried
    call_command("import_study", str(write(tmp_path, document)), "--format", "biasstudy", verbosity=0)
    checks = stored_checks()
    assert checks[LONG] == carried
    assert checks["q1-a1-fe"]["ok"] is True  # the variant without checks in the file was checked


def test_the_checks_stored_on_import_are_those_the_admin_would_compute_for_the_saved_variants(db, tmp_path):
    """The import reuses the lengths it measured; running the checks afresh gives the same result."""
    call_command(
        "import_study", str(write(tmp_path, document_with_a_long_variant())), "--format", "biasstudy", verbosity=0
    )
    variants = Answer.objects.variants().select_related("question__study", "kind", "derived_from")
    assert len(variants) == 2
    for variant in variants:
        assert variant.checks == variant_checks(answer=variant)
