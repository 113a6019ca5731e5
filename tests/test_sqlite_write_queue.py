"""biasstudy.dbbackends.sqlite: write transactions on a file database queue on a file lock."""

import threading
import time

import pytest
from django.db import OperationalError, connections

from biasstudy.dbbackends.sqlite.base import DatabaseWrapper

# Lifts pytest-django's block on database access; these tests use their own database files.
pytestmark = pytest.mark.django_db


def _wrapper(path, *, timeout: float = 5) -> DatabaseWrapper:
    settings = {
        **connections.settings["default"],
        "ENGINE": "biasstudy.dbbackends.sqlite",
        "NAME": str(path),
        "OPTIONS": {"transaction_mode": "IMMEDIATE", "timeout": timeout},
    }
    wrapper = DatabaseWrapper(settings, alias="write-queue-test")
    wrapper.ensure_connection()
    return wrapper


def _begin(wrapper: DatabaseWrapper) -> None:
    wrapper._start_transaction_under_autocommit()


def test_a_second_writer_waits_for_the_first_and_goes_on_after_its_commit(tmp_path):
    path = tmp_path / "queue.sqlite3"
    first = _wrapper(path)
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE t (n INTEGER)")
    events = []

    def second_writer():
        second = _wrapper(path)
        _begin(second)
        events.append(("second began", time.monotonic()))
        with second.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (2)")
        second.commit()
        second.close()

    _begin(first)
    assert (tmp_path / "queue.sqlite3-writelock").exists()
    with first.cursor() as cursor:
        cursor.execute("INSERT INTO t VALUES (1)")
    thread = threading.Thread(target=second_writer)
    thread.start()
    time.sleep(0.3)
    assert events == [], "the second writer began while the first held the write lock"
    events.append(("first committed", time.monotonic()))
    first.commit()
    thread.join(timeout=10)
    assert [name for name, _ in events] == ["first committed", "second began"]
    with first.cursor() as cursor:
        cursor.execute("SELECT n FROM t ORDER BY n")
        assert cursor.fetchall() == [(1,), (2,)]
    first.close()


def test_waiting_longer_than_the_timeout_gives_the_usual_locked_error_and_holds_nothing(tmp_path):
    path = tmp_path / "queue.sqlite3"
    first = _wrapper(path)
    _begin(first)
    failures = []

    def impatient_writer():
        impatient = _wrapper(path, timeout=0.2)
        try:
            _begin(impatient)
        except OperationalError as exc:
            failures.append(str(exc))
        assert impatient._write_lock_fd is None
        impatient.close()

    thread = threading.Thread(target=impatient_writer)
    thread.start()
    thread.join(timeout=10)
    assert failures and "database is locked" in failures[0]
    first.rollback()
    assert first._write_lock_fd is None
    first.close()


@pytest.mark.parametrize("end", ["commit", "rollback", "close"])
def test_the_lock_is_given_back_however_the_transaction_ends(tmp_path, end):
    path = tmp_path / "queue.sqlite3"
    first = _wrapper(path)
    _begin(first)
    getattr(first, end)()
    assert first._write_lock_fd is None
    other = _wrapper(path, timeout=0.5)
    _begin(other)  # would time out if the lock were still held
    other.commit()
    other.close()
    first.close()
