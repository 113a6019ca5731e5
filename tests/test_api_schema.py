"""The OpenAPI schema is valid and true: schemathesis sends generated requests to every GET
endpoint and to the import, through the real WSGI application, and finds no server error and
no response the schema does not describe."""

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.validation import validate_schema
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
# Requests the schema forbids are refused (a page_size that is not a number, a slug that is not
# one, were answered as if valid). Not the converse: a cursor is opaque, so a schema-valid string
# can still be a bad cursor (a documented 400).
NEGATIVE_CHECKS = [not_a_server_error, negative_data_rejection, response_schema_conformance]
POSITIVE_EXAMPLES = 20
NEGATIVE_EXAMPLES = 25


def test_the_schema_is_valid_openapi_3(token_client):
    response = token_client.get("/api/schema/?format=json")
    assert response.status_code == 200
    schema = response.json()
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    assert {"/api/v1/votes/", "/api/v1/studies/{slug}/export/", "/api/v1/answers/{id}/"} <= paths
    assert "post" in schema["paths"]["/api/v1/studies/"]


@pytest.fixture
def api_schema(voted_study, api_token):
    """The schema as served to staff, with requests going to the app in this process (so they
    see this test's database) and a staff token on each."""
    headers = {"Authorization": f"Token {api_token.key}"}
    # As Django's own test client does: a request must not close the connection that holds
    # the test's transaction (PostgreSQL would lose the fixture's rows).
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", get_wsgi_application(), headers=headers)
        yield schema, headers
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def operations(schema):
    for result in schema.get_all_operations():
        operation = result.ok()
        if operation.path.startswith("/api/v1/") and (
            operation.method.upper() == "GET" or operation.path == "/api/v1/studies/"
        ):
            yield operation


def run(operation, headers, *, mode, examples, checks):
    @hypothesis_settings(
        max_examples=examples,
        derandomize=True,  # the same requests on every run
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def check(case):
        case.call_and_validate(headers=headers, checks=checks)

    check()


@pytest.mark.slow
def test_generated_requests_find_no_server_error_and_no_undocumented_response(api_schema, settings):
    schema, headers = api_schema
    settings.API_THROTTLE_RATE = "100000/minute"  # many requests from one token, by design
    tested = []
    for operation in operations(schema):
        tested.append(f"{operation.method.upper()} {operation.path}")
        run(operation, headers, mode=GenerationMode.POSITIVE, examples=POSITIVE_EXAMPLES, checks=CHECKS)
    assert len(tested) == 27, tested


@pytest.mark.slow
def test_requests_outside_the_schema_are_refused_without_a_server_error(api_schema, settings):
    schema, headers = api_schema
    settings.API_THROTTLE_RATE = "100000/minute"
    for operation in operations(schema):
        run(operation, headers, mode=GenerationMode.NEGATIVE, examples=NEGATIVE_EXAMPLES, checks=NEGATIVE_CHECKS)


def test_answers_about_real_objects_match_the_schema_too(api_schema, voted_study):
    """Generated ids and slugs rarely name a row, so each new endpoint is also asked about real
    ones, writes included, and its answer checked against the schema."""
    from judges.services import judge_run_start
    from perturbations.services import perturbation_generate
    from tests.factories import make_llm_judge

    schema, headers = api_schema
    slug = voted_study.study.slug
    config = make_llm_judge()
    run = judge_run_start(study=voted_study.study, judge=config.judge, enqueue=False)
    other = make_llm_judge()
    hosted = make_llm_judge(base_url="", api_key_env="OPENAI_API_KEY")  # blank: the provider's own URL
    variant = perturbation_generate(study=voted_study.study, kind="rich_content", seed=1).created[0]
    cases = [
        ("GET", "/api/v1/llm-judges/", {}, {}, None, 200),
        ("GET", "/api/v1/llm-judges/{id}/", {"id": config.pk}, {}, None, 200),
        ("GET", "/api/v1/llm-judges/{id}/", {"id": hosted.pk}, {}, None, 200),
        ("GET", "/api/v1/runs/", {}, {"study": slug}, None, 200),
        ("GET", "/api/v1/runs/{id}/", {"id": run.pk}, {}, None, 200),
        ("GET", "/api/v1/studies/{slug}/metrics/", {"slug": slug}, {"bootstrap": 20, "group": "reference"}, None, 200),
        ("GET", "/api/v1/studies/{slug}/metrics/", {"slug": slug}, {"bloom": "guessing"}, None, 400),
        ("GET", "/api/v1/studies/{slug}/export/votes.csv", {"slug": slug}, {}, None, 200),
        ("GET", "/api/v1/studies/{slug}/export/items.csv", {"slug": slug}, {}, None, 200),
        ("GET", "/api/v1/studies/{slug}/export/metrics.csv", {"slug": slug}, {"measure": "chars"}, None, 200),
        ("GET", "/api/v1/studies/{slug}/perturbations/", {"slug": slug}, {"flagged": True}, None, 200),
        ("POST", "/api/v1/runs/", {}, {}, {"study": slug, "judge": other.judge.pk, "votes_per_item": 1}, 201),
        ("POST", "/api/v1/runs/", {}, {}, {"study": slug, "judge": voted_study.bot.pk}, 400),
        ("POST", "/api/v1/runs/{id}/cancel/", {"id": run.pk}, {}, None, 200),
        ("POST", "/api/v1/runs/{id}/resume/", {"id": run.pk}, {}, {"retry_failed": False}, 200),
        ("POST", "/api/v1/studies/{slug}/perturbations/", {"slug": slug}, {}, {"kind": "reference", "seed": 3}, 201),
        (
            "POST",
            "/api/v1/studies/{slug}/perturbations/",
            {"slug": slug},
            {},
            {"kind": "factual_error", "seed": 3},
            400,
        ),
        ("POST", "/api/v1/answers/{id}/review/", {"id": variant.pk}, {}, {"decision": "approve"}, 200),
    ]
    for method, path, path_parameters, query, body, expected in cases:
        operation = schema[path][method]
        extra = {} if body is None else {"body": body, "media_type": "application/json"}
        case = operation.Case(path_parameters=path_parameters, query=query, **extra)
        response = case.call_and_validate(headers=headers, checks=CHECKS)
        assert response.status_code == expected, (method, path, response.text[:300])
