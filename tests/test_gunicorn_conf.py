"""The repository's gunicorn settings: one thread per worker on SQLite, whose single writer
makes every extra thread one more writer sleeping in its busy handler; four on PostgreSQL;
GUNICORN_THREADS wins over both."""

import runpy
from pathlib import Path

import pytest

CONF = Path(__file__).resolve().parent.parent / "gunicorn.conf.py"


@pytest.mark.parametrize(
    ("env", "threads"),
    [
        ({}, 1),
        ({"DATABASE_URL": "sqlite:////srv/biasstudy/db.sqlite3"}, 1),
        ({"DATABASE_URL": "postgres://u:p@db:5432/biasstudy"}, 4),
        ({"DATABASE_URL": "postgresql://u:p@db/biasstudy"}, 4),
        ({"DATABASE_URL": "postgres://u:p@db/biasstudy", "GUNICORN_THREADS": "8"}, 8),
        ({"GUNICORN_THREADS": "2"}, 2),
    ],
)
def test_threads_per_worker_follow_the_database(monkeypatch, env, threads):
    for name in ("DATABASE_URL", "GUNICORN_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert runpy.run_path(str(CONF))["threads"] == threads
