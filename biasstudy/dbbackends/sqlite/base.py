"""Django's SQLite backend, with write transactions queued on a file lock.

Every transaction here begins IMMEDIATE (settings), i.e. takes SQLite's one write lock. A
writer that finds it taken is left to SQLite's busy handler, which sleeps 1, 2, 5, 10, … up to
100 ms between tries: the lock then stays free while the waiters sleep, and an unlucky request
waits seconds while the CPU idles (docs/BENCHMARKS.md, section 1). Here a transaction first
takes an exclusive `flock` on `<database>-writelock`, so writers of every process and thread
wait their turn and the next one starts within a fraction of a millisecond of the commit; the
lock is given back at commit, rollback or close. Waiting is bounded by the same timeout as
SQLite's own (DATABASE_SQLITE_TIMEOUT), after which the caller gets the "database is locked"
OperationalError it would have had from SQLite. In-memory databases are not locked.

The cursor also remembers how it rewrote each statement's `%s` placeholders into SQLite's `?`
(a regular expression per statement in Django's, through a lazy object; 5 % of the rater's task
view): the same few statements run on every request.
"""

from __future__ import annotations

import fcntl
import functools
import os
import time

from django.db import OperationalError
from django.db.backends.sqlite3 import base


@functools.lru_cache(maxsize=1024)
def _qmark(query: str) -> str:
    return base.FORMAT_QMARK_REGEX.sub("?", query).replace("%%", "%")


class CursorWrapper(base.SQLiteCursorWrapper):
    def convert_query(self, query, *, param_names=None):
        if param_names is None:
            return _qmark(query)
        return super().convert_query(query, param_names=param_names)


class DatabaseWrapper(base.DatabaseWrapper):
    _write_lock_fd: int | None = None

    def create_cursor(self, name=None):
        return self.connection.cursor(factory=CursorWrapper)

    def _write_lock_path(self) -> str | None:
        if self.is_in_memory_db():
            return None
        return f"{self.settings_dict['NAME']}-writelock"

    def _write_lock_acquire(self) -> None:
        path = self._write_lock_path()
        if path is None or self._write_lock_fd is not None:
            return
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + float(self.settings_dict["OPTIONS"].get("timeout", 5))
        pause = 0.0002
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise OperationalError("database is locked (waiting for the write queue)") from None
                    time.sleep(pause)
                    pause = min(pause * 2, 0.002)
        except BaseException:
            os.close(fd)
            raise
        self._write_lock_fd = fd

    def _write_lock_release(self) -> None:
        fd, self._write_lock_fd = self._write_lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor lets go of its flock

    def _start_transaction_under_autocommit(self):
        self._write_lock_acquire()
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._write_lock_release()
            raise

    def _commit(self):
        try:
            return super()._commit()
        finally:
            self._write_lock_release()

    def _rollback(self):
        try:
            return super()._rollback()
        finally:
            self._write_lock_release()

    def _close(self):
        try:
            return super()._close()
        finally:
            self._write_lock_release()
