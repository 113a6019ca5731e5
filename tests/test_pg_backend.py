"""biasstudy.dbbackends.postgresql: the health check of a kept connection asks the socket first,
and falls back to Django's `SELECT 1` when the server has said something (here: ended it)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from django.db import connection, connections

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="DATABASE_URL does not point to PostgreSQL"),
]


@pytest.fixture
def kept():
    """A connection of its own (outside the test's transaction), with health checks on."""
    wrapper = connections.create_connection("default")
    wrapper.health_check_enabled = True
    wrapper.ensure_connection()
    yield wrapper
    wrapper.close()


def _sent(wrapper, tmp_path: Path, action) -> str:
    """What the client sent the server (libpq's protocol trace, front-end lines) during `action`."""
    trace = tmp_path / "trace.txt"
    with trace.open("w") as out:
        wrapper.connection.pgconn.trace(out.fileno())
        try:
            action()
        finally:
            if wrapper.connection is not None:
                wrapper.connection.pgconn.untrace()
    return "\n".join(line for line in trace.read_text().splitlines() if "\tF\t" in line)


def test_an_idle_connection_is_checked_without_a_query(kept, tmp_path):
    kept.health_check_done = False
    sent = _sent(kept, tmp_path, kept.close_if_health_check_failed)
    assert sent == ""
    assert kept.health_check_done and kept.connection is not None


def test_a_connection_in_a_transaction_gets_django_s_query(kept, tmp_path):
    kept.connection.execute("BEGIN")
    kept.health_check_done = False
    sent = _sent(kept, tmp_path, kept.close_if_health_check_failed)
    assert "SELECT 1" in sent
    kept.connection.execute("ROLLBACK")


def test_a_connection_the_server_ended_is_closed_and_the_next_use_reconnects(kept):
    pid = kept.connection.info.backend_pid
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    deadline = time.monotonic() + 10
    while kept._idle_and_quiet():  # the server's goodbye is on its way
        assert time.monotonic() < deadline, "the ended connection never became readable"
        time.sleep(0.01)
    kept.health_check_done = False
    kept.close_if_health_check_failed()
    assert kept.connection is None
    with kept.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid
