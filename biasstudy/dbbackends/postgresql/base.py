"""Django's PostgreSQL backend, with the connection health check done without a round trip.

With CONN_HEALTH_CHECKS (on by default, docs/DEPLOY.md) Django checks a kept connection at the
start of every request that uses the database by running `SELECT 1`: one more round trip to
the server per request. On the rater's task page that was a third of the page's statements,
and every vote paid it too (docs/BENCHMARKS.md, section 1.7).

When the server ends a connection (a restart, `pg_terminate_backend`, an idle timeout) it
sends the client an error message and closes the socket, so a dead idle connection has
something to read. Here the check first asks the socket, without waiting, whether anything
came in: nothing to read on an idle connection means the server has said nothing since the
last answer, and the connection is used as it is. Anything else (data waiting, a transaction
left open, a closed connection) goes to Django's own `SELECT 1` check. A server that vanished
without a word (a host powered off, a network cut) is caught by neither check in time; the
request then fails and the rater gets the "try again" page (annotations/views.py).
"""

from __future__ import annotations

import select

from django.db.backends.postgresql import base
from psycopg.pq import TransactionStatus


class DatabaseWrapper(base.DatabaseWrapper):
    def close_if_health_check_failed(self) -> None:
        if (
            self.connection is not None
            and self.health_check_enabled
            and not self.health_check_done
            and self._idle_and_quiet()
        ):
            self.health_check_done = True
            return
        super().close_if_health_check_failed()

    def _idle_and_quiet(self) -> bool:
        """True when the connection is open, outside a transaction, and the server has sent
        nothing since its last answer."""
        connection = self.connection
        if connection.closed or connection.info.transaction_status != TransactionStatus.IDLE:
            return False
        try:
            readable, _, _ = select.select([connection.fileno()], [], [], 0)
        except (OSError, ValueError):
            return False
        return not readable
