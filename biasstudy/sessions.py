"""Django's database sessions, read by one written-out statement.

Every rater request reads its session; through the ORM that read cost more than a third of the
task page's own work (docs/BENCHMARKS.md, section 1.5). The stored sessions, their format, key
rotation, expiry and clearing are Django's (`django.contrib.sessions.backends.db`); only the
read differs.
"""

from __future__ import annotations

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from biasstudy import rawsql

_SESSION = rawsql.Columns(Session, "s")


class SessionStore(DatabaseSessionStore):
    def _get_session_from_db(self) -> Session | None:
        row = rawsql.fetchone(
            f"SELECT {_SESSION.sql} FROM {rawsql.table(Session)} s"  # noqa: S608
            " WHERE s.session_key = %s AND s.expire_date > %s",
            [self.session_key, rawsql.datetime_param(timezone.now())],
        )
        if row is None:
            self._session_key = None
            return None
        return _SESSION.build(row)
