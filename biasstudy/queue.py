"""Queueing work for the task worker as part of an operation: either the operation's rows and
its job both exist, or neither does.

A job is queued once the transaction that wrote its rows commits (a worker must find them), so
the queue can refuse it after the rows are there: Redis away, or the database queue's database.
`enqueue_on_commit` then undoes what the transaction wrote and raises QueueUnavailable to the
caller, who says "try again" (the admin in a message, the API with a 503, a command as an error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial

from django.db import transaction

log = logging.getLogger(__name__)

# What the API sends in Retry-After with its 503.
RETRY_AFTER_SECONDS = 5


class QueueUnavailable(Exception):
    """The task queue did not take the job; the operation was undone. The message says so."""


def enqueue_on_commit(enqueue: Callable[[], object], *, undo: Callable[[], object], what: str) -> None:
    """Call `enqueue` once the current transaction commits. If it raises, call `undo` (a write
    of its own, conditional on the rows being as the transaction left them) and raise
    QueueUnavailable from the commit, naming `what` was not done. If the undo fails too (the
    database away as well), the rows stay behind: /health/ reports a queued judge run no
    worker took."""

    transaction.on_commit(partial(enqueue_or_undo, enqueue, undo=undo, what=what))


def enqueue_or_undo(enqueue: Callable[[], object], *, undo: Callable[[], object], what: str) -> None:
    """`enqueue`; if the queue refuses it, `undo` and raise QueueUnavailable."""
    try:
        enqueue()
    except Exception as exc:  # noqa: BLE001 - whatever the queue's client raises, the job is not queued
        log.warning("the task queue refused a job (%s); undoing it", what, exc_info=True)
        try:
            undo()
        except Exception:  # noqa: BLE001
            log.exception("could not undo %s after the task queue refused its job", what)
        raise QueueUnavailable(
            f"The task queue is unavailable ({type(exc).__name__}), so {what} did not happen. Try again in a moment."
        ) from exc
