"""The OpenAPI schema states every answer an operation can give, errors included, so clients
(and the schemathesis run in the tests) can rely on it: 401/403/429 everywhere (no endpoint is
public, every one is throttled), 404 where the path names an object, 400 where the request
carries input."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers

from api.pagination import MAX_ID


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


BAD_REQUEST = OpenApiResponse(
    response=OpenApiTypes.OBJECT,
    description=(
        "Bad input. From a form or query string: one list of messages per field, "
        '{"field": ["message"]}. From a study file: {"detail", "path", "line", "field"}.'
    ),
)
ERRORS = {
    "401": OpenApiResponse(ErrorSerializer, description="No or invalid credentials."),
    "403": OpenApiResponse(ErrorSerializer, description="Authenticated, but not a staff member."),
    "429": OpenApiResponse(ErrorSerializer, description="Too many requests for this token; see Retry-After."),
}


class ApiAutoSchema(AutoSchema):
    def _resolve_path_parameters(self, variables):
        # Ids are positive and fit the database's 64-bit keys, slugs are slugs; saying so keeps
        # generated clients (and schemathesis) on URLs that can exist.
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            if parameter["schema"].get("type") == "integer":
                parameter["schema"].update(minimum=1, maximum=MAX_ID)
            elif parameter["name"] == "slug":
                parameter["schema"].setdefault("pattern", r"^[-a-zA-Z0-9_]+$")
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        extra = dict(ERRORS)
        if self.method in ("POST", "PUT", "PATCH") or self.get_override_parameters() or self._is_list_view():
            extra["400"] = BAD_REQUEST
        if "{" in self.path:
            extra["404"] = OpenApiResponse(ErrorSerializer, description="No such object.")
        for code, response in extra.items():
            if code not in responses:
                responses[code] = self._get_response_for_code(response, code, direction=direction)
        return responses
