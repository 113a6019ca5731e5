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
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
POSITIVE_EXAMPLES = 20
NEGATIVE_EXAMPLES = 8


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
        if operation.path.startswith("/api/v1/") and (operation.method.upper() == "GET" or operation.path == "/api/v1/studies/"):
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
    assert len(tested) == 16, tested


@pytest.mark.slow
def test_requests_outside_the_schema_find_no_server_error(api_schema, settings):
    schema, headers = api_schema
    settings.API_THROTTLE_RATE = "100000/minute"
    for operation in operations(schema):
        run(operation, headers, mode=GenerationMode.NEGATIVE, examples=NEGATIVE_EXAMPLES, checks=[not_a_server_error])
