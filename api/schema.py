"""The OpenAPI schema states every answer an operation can give, errors included, so clients
(and the schemathesis run in the tests) can rely on it: 401/403/429 everywhere (no endpoint is
public, every one is throttled), 404 where the path names an object, 400 where the request
carries input."""

from __future__ import annotations

from django import forms
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers

from api.pagination import MAX_ID


class ErrorSerializer(serializers.Serializer):
    detail = serializers.CharField()


BAD_REQUEST = OpenApiResponse(
    # Every 400 has `detail` (api.exceptions.with_detail), and what the description says beside it.
    response={
        "type": "object",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
        "additionalProperties": True,
    },
    description=(
        "Bad input, said in `detail`. From a form or query string, also one list of messages per field, "
        '{"detail": "field: message", "field": ["message"]}. From a study file: the first problem as '
        '{"detail", "path", "line", "field"}, every problem in that shape in "problems" (at most 200) and how '
        'many more in "more".'
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


def form_parameters(form_class: type[forms.Form]) -> list[OpenApiParameter]:
    """Query-string parameters of a Django form that another app owns (the analysis filters),
    read from its fields so the schema follows the form."""
    parameters = []
    for name, field in form_class.base_fields.items():
        many = isinstance(field, forms.MultipleChoiceField)
        if isinstance(field, forms.IntegerField):
            schema: dict = {"type": "integer"}
            if field.min_value is not None:
                schema["minimum"] = field.min_value
            if field.max_value is not None:
                schema["maximum"] = field.max_value
        elif isinstance(field, forms.BooleanField):
            schema = {"type": "boolean"}
        elif isinstance(field, forms.DateTimeField):
            schema = {"type": "string", "format": "date-time"}
        else:
            schema = {"type": "string"}
            choices = getattr(field, "choices", [])
            if choices:
                schema["enum"] = [value for value, _ in choices if value != ""]
        if many:
            schema = {"type": "array", "items": schema}
        description = " ".join(str(part) for part in (field.label, field.help_text) if part)
        parameters.append(OpenApiParameter(name, schema, OpenApiParameter.QUERY, description=description, explode=many))
    return parameters
