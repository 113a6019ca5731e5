"""Cursor pagination for every list: pages are found by "id greater than the last one seen", so
the millionth vote costs what the first did, nothing is counted, and rows added while a client
pages through never shift what it has still to read."""

from __future__ import annotations

from base64 import b64decode
from urllib import parse

from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

MAX_ID = 2**63 - 1  # the largest primary key the databases store; bigger numbers match nothing


class IdCursorPagination(CursorPagination):
    ordering = "id"
    page_size = 100
    page_size_query_param = "page_size"
    max_page_size = 1000

    def get_page_size(self, request) -> int:
        # DRF reads a page_size it cannot parse as "the default": the schema says a whole
        # number, so anything else is refused by name. Above the maximum it is the maximum.
        given = request.query_params.get(self.page_size_query_param)
        if given is None:
            return self.page_size
        if not (given.isascii() and given.isdigit() and int(given) >= 1):
            raise ValidationError({self.page_size_query_param: ["A whole number of at least 1."]})
        return min(int(given), self.max_page_size)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        # The minimum get_page_size refuses below; no maximum: a larger page_size is served as
        # max_page_size, not refused (said in the description).
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"]["minimum"] = 1
                parameter["description"] += f" At least 1; above {self.max_page_size}, {self.max_page_size}."
        return parameters

    def decode_cursor(self, request):
        # DRF answers a bad cursor with 404 and passes the position it decodes to the query
        # unchecked (a crafted "p=abc" became a 500). A cursor is input like any other: 400.
        encoded = request.query_params.get(self.cursor_query_param)
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            cursor = None
            valid = False
        else:
            valid = cursor is None or (
                _only_cursor_keys(encoded) and (cursor.position is None or _is_id(cursor.position))
            )
        if not valid:
            raise ValidationError({self.cursor_query_param: ["Invalid cursor: use the next/previous links as given."]})
        return cursor


class VoteCursorPagination(IdCursorPagination):
    page_size = 500
    max_page_size = 5000


def _only_cursor_keys(encoded: str) -> bool:
    """Strictly base64, and only the keys DRF writes (DRF itself skips junk it cannot read)."""
    try:
        tokens = parse.parse_qs(
            b64decode(encoded.encode("ascii"), validate=True).decode("ascii"), keep_blank_values=True
        )
    except ValueError:
        return False
    return set(tokens) <= {"o", "r", "p"}


def _is_id(value: str) -> bool:
    return value.isascii() and value.isdigit() and int(value) <= MAX_ID
