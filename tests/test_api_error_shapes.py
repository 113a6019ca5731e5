"""Every error the API gives is JSON with `detail`, as its schema says: a 400 from a serializer
too (beside its field lists), a POST to a path that is no endpoint, a body that is not JSON where
only JSON is read; and the schema states the bounds the API enforces (page_size at least 1)."""

import pytest
from django.test import Client
from django.urls import reverse

from judges.models import JudgeRun
from judges.services import judge_run_cancel, judge_run_start
from tests.factories import make_llm_judge, make_question, make_staff, make_study


@pytest.fixture
def schema(token_client):
    return token_client.get("/api/schema/?format=json").json()


def test_page_size_has_its_minimum_in_the_schema_on_every_list(schema):
    page_sizes = [
        (path, parameter["schema"])
        for path, operations in schema["paths"].items()
        for operation in operations.values()
        for parameter in operation.get("parameters", [])
        if parameter["name"] == "page_size"
    ]
    assert len(page_sizes) >= 6
    assert all(found == {"type": "integer", "minimum": 1} for _, found in page_sizes), page_sizes


def test_every_400_in_the_schema_has_detail(schema):
    components = schema["components"]["schemas"]
    bad_requests = [
        (path, operation["responses"]["400"]["content"]["application/json"]["schema"])
        for path, operations in schema["paths"].items()
        for operation in operations.values()
        if "400" in operation["responses"]
    ]
    assert bad_requests
    for path, body in bad_requests:
        body = components[body["$ref"].rsplit("/", 1)[1]] if "$ref" in body else body
        assert "detail" in body["required"], path


@pytest.fixture
def study(db):
    study = make_study(slug="shapes")
    make_question(study)
    return study


def test_a_400_from_a_serializer_says_what_is_wrong_in_detail_beside_the_fields(study, token_client):
    """Four operations whose schema promises `detail` on a 400 answered {"field": [...]} alone."""
    run = judge_run_start(study=study, judge=make_llm_judge().judge, enqueue=False)
    cases = [
        (reverse("api:runs"), {"study": "nope"}, ("study: ", "judge: This field is required.")),
        (reverse("api:run-resume", args=[run.pk]), {"retry_failed": "perhaps"}, ("retry_failed: ",)),
        (reverse("api:study-perturbations", args=[study.slug]), {"seed": "x"}, ("kind: ",)),
    ]
    variant_review = reverse("api:answer-review", args=[study.questions.get().answers.first().pk])
    cases.append((variant_review, {"decision": "maybe"}, ("decision: ",)))
    for url, body, parts in cases:
        response = token_client.post(url, body, format="json")
        assert response.status_code == 400, (url, response.content)
        found = response.json()
        assert all(part in found["detail"] for part in parts), (url, found)
        assert set(found) - {"detail"}, found  # the field lists are still there
    response = token_client.get(reverse("api:votes"), {"page_size": "0"})
    assert response.status_code == 400
    assert response.json() == {
        "detail": "page_size: A whole number of at least 1.",
        "page_size": ["A whole number of at least 1."],
    }


def test_a_post_to_a_path_that_is_no_endpoint_is_a_json_404_even_with_a_session_and_no_csrf_token(db):
    """Django's CSRF check answered it with its HTML 403 page."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_staff())
    client.get("/admin/")  # the CSRF cookie too, as a browser has it
    for path in ("/api/v1/nothing/", "/api/v2/runs/", "/api/nothing"):
        response = client.post(path, {"a": "1"})
        assert response.status_code == 404 and response["Content-Type"] == "application/json", path
        assert response.json() == {"detail": "No such API endpoint (see /api/docs/)."}


@pytest.mark.parametrize(
    ("content_type", "body"),
    [
        ("multipart/form-data; boundary=xyz", b"junk junk"),
        ("application/x-www-form-urlencoded", b"\xff\xfe=junk"),
        ("text/plain", b"retry_failed=true"),
    ],
)
def test_a_resume_whose_body_is_not_json_is_refused_and_the_run_stays_as_it_was(
    study, token_client, content_type, body
):
    """A multipart body that parses to nothing (any junk does) resumed the run as if asked."""
    run = judge_run_start(study=study, judge=make_llm_judge().judge, enqueue=False)
    judge_run_cancel(run=run)
    response = token_client.generic("POST", reverse("api:run-resume", args=[run.pk]), body, content_type=content_type)
    assert response.status_code == 415 and "Unsupported media type" in response.json()["detail"]
    run.refresh_from_db()
    assert run.status == JudgeRun.Status.CANCELLED
