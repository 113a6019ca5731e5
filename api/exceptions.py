"""Errors as JSON: DRF's own shapes for what it knows, and a logged, bodied 500 as a last resort.

Shapes (documented in docs/API.md and in the schema):
- 400 from a serializer: {"detail": "field: message; ...", "field": ["message", ...], ...}
- 400 from a study file: {"detail": "...", "path": "...", "line": 3, "field": "questions[0].bloom",
  "problems": [every problem in that shape], "more": 0}
- 401/403/404/405/429: {"detail": "..."}
- 503 with Retry-After when the database cannot be reached, or the task queue did not take a
  job (a run started or resumed, a vote file to import; nothing was done): {"detail": "..."}
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler, set_rollback

from biasstudy.queue import RETRY_AFTER_SECONDS, QueueUnavailable

logger = logging.getLogger(__name__)

# Seconds a client is asked to wait when the database failed (as on the rater pages).
DATABASE_RETRY_AFTER = 5


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    response = exception_handler(exc, context)
    if response is not None:
        if response.status_code == status.HTTP_400_BAD_REQUEST:
            response.data = with_detail(response.data)
        return response
    if isinstance(exc, QueueUnavailable):
        # Raised once the operation's transaction committed and was undone: nothing to roll back.
        logger.warning("task queue unavailable for the API: %s", exc)
        return Response(
            {"detail": str(exc)},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is restarting, unreachable or locked too long: the transaction was rolled
        # back, so the client may send the same request again.
        logger.warning("database unavailable for the API: %s", exc)
        set_rollback()
        return Response(
            {"detail": "The database is unavailable; try again in a moment."},
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
        )
    # A bug, not a bad request: log it with the traceback and answer in the API's own shape
    # rather than with Django's HTML error page. Tests treat any 500 as a defect to fix.
    view = context.get("view")
    logger.exception("Unhandled error in API view %s", type(view).__name__ if view else "?", exc_info=exc)
    set_rollback()
    return Response({"detail": "Internal server error."}, status=status.HTTP_500_INTERNAL_SERVER_ERROR)


def with_detail(data) -> dict:
    """A 400's body with `detail`, as every other error has: a serializer's field lists
    ({"field": ["message"]}) get one line naming each field's first message beside them."""
    if isinstance(data, dict) and "detail" in data:
        return data
    if not isinstance(data, dict):  # a ValidationError raised with a message or a list of them
        data = {"non_field_errors": data if isinstance(data, list) else [data]}
    parts = [f"{name}: {_first_message(errors)}" for name, errors in data.items()]
    return {"detail": "; ".join(parts) or "Bad request.", **data}


def _first_message(errors) -> str:
    while isinstance(errors, (list, dict)) and errors:
        errors = errors[0] if isinstance(errors, list) else next(iter(errors.values()))
    return str(errors) if errors not in ([], {}) else "invalid"
