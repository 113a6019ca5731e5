"""A vote file sent to the API is imported by a real task worker (`manage.py db_worker`, the
database queue of the production settings) in its own process, not by the web request: gunicorn
answers 202 and the import waits, queued, until a worker runs; then its URL gives the counts.
A bad file fails there with its file, line and field, and writes nothing.

Everything runs on a fresh file database (and on PostgreSQL when DATABASE_URL points to it), the
web server and the worker sharing the upload folder as docs/DEPLOY.md asks.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.live import db_worker, gunicorn, live_env, prepare, run_django, stop
from tests.test_analysis_import import GOOD_ROWS, write_csv

httpx = pytest.importorskip("httpx")

pytestmark = pytest.mark.slow

TOKEN = "votes-upload-worker-token-0123456789abcd"  # 40 characters, as DRF's tokens


def seed() -> None:
    """Run in a subprocess: the study the votes go into and a staff member's API token."""
    from rest_framework.authtoken.models import Token

    from tests.factories import make_staff, make_study

    make_study(status="draft", slug="there")
    Token.objects.create(user=make_staff(), key=TOKEN)


def vote_count() -> None:
    from annotations.models import Question, Vote

    print(json.dumps({"votes": Vote.objects.count(), "questions": Question.objects.count()}))


def _rows(env: dict) -> dict:
    return json.loads(run_django("from tests.test_votes_import_worker import vote_count; vote_count()", env))


def _post(client, path) -> str:
    with path.open("rb") as file:
        accepted = client.post("/api/v1/votes/import/", data={"study": "there"}, files={"file": (path.name, file)})
    assert accepted.status_code == 202, accepted.text
    return accepted.headers["Location"]


def _finished(client, url: str, worker: subprocess.Popen) -> dict:
    deadline = time.monotonic() + 60
    while (state := client.get(url).json())["state"] not in ("done", "failed"):
        assert worker.poll() is None, worker.stderr.read()[-3000:]
        assert time.monotonic() < deadline, f"the worker did not finish the import: {state}"
        time.sleep(0.2)
    return state


@pytest.mark.parametrize("live_database", ["sqlite", "postgres"], indirect=True)
def test_a_worker_process_imports_an_uploaded_vote_file_and_reports_a_bad_one(live_database, tmp_path):
    env = live_env(live_database, DJANGO_SETTINGS_MODULE="biasstudy.settings", STUDY_UPLOAD_DIR=str(tmp_path / "up"))
    prepare(env, seed="tests.test_votes_import_worker:seed")
    good = write_csv(tmp_path / "good.csv", GOOD_ROWS)
    rows = [list(r) for r in GOOD_ROWS]
    rows[1][5] = "both"
    bad = write_csv(tmp_path / "bad.csv", rows)

    with (
        gunicorn(env, workers=1, threads=2) as base,
        httpx.Client(base_url=base, headers={"Authorization": f"Token {TOKEN}"}, timeout=30) as client,
    ):
        good_url, bad_url = _post(client, good), _post(client, bad)
        # A web process importing by itself would have answered only once done.
        assert client.get(good_url).json()["state"] == "queued"
        assert _rows(env) == {"votes": 0, "questions": 0}

        worker = db_worker(env)
        try:
            done, failed = _finished(client, good_url, worker), _finished(client, bad_url, worker)
        finally:
            stop(worker)

    assert done["state"] == "done" and done["counts"]["votes"] == 4, done
    assert failed["state"] == "failed", failed
    assert (failed["path"], failed["line"], failed["field"]) == ("bad.csv", 3, "winner")
    assert _rows(env) == {"votes": 4, "questions": done["counts"]["questions"]}  # the bad file wrote nothing
