"""Errors as JSON: DRF's own shapes for what it knows, and a logged, bodied 500 as a last resort.

Shapes (documented in docs/API.md and in the schema):
- 400 from a serializer: {"field": ["message", ...], ...}
- 400 from a study file: {"detail": "...", "file": "...", "line": 3, "field": "questions[0].bloom"}
- 401/403/404/405/429: {"detail": "..."}
"""

from __future__ import annotations

import logging

from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

logger = logging.getLogger(__name__)


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    response = exception_handler(exc, context)
    if response is not None:
        return response
    # A bug, not a bad request: log it with the traceback and answer in the API's own shape
    # rather than with Django's HTML error page. Tests treat any 500 as a defect to fix.
    view = context.get("view")
    logger.exception("Unhandled error in API view %s", type(view).__name__ if view else "?", exc_info=exc)
    set_rollback()
    return Response({"detail": "Internal server error."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)
