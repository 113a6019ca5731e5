"""A bonus is never paid twice: four presses of "pay the bonuses" at the same moment (two staff
members, each double-clicking; or a retried task), against the loopback Prolific, whose pay call
is not idempotent. On PostgreSQL (DATABASE_URL pointing to it), four threads on their own
connections to the test database; on SQLite, four processes (as gunicorn's workers would be) on a
fresh database file: the test runner's in-memory SQLite cannot be shared between processes, nor
between threads without "table is locked" errors that a database file does not give.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from decimal import Decimal

import pytest
from django.db import connection

from prolific import services
from tests.factories import make_staff
from tests.live import PYTHON, ROOT, live_env, prepare, run_django
from tests.prolific_helpers import TOKEN, draft, prolific, prolific_rater, study_for_prolific, vote_all
from tests.prolific_server import prolific_server

__all__ = ["prolific"]  # the fixture

PRESSES = 4
SLUG = "paid-once"
RATERS = 2


def seed() -> None:
    """Run in a subprocess on the fresh database: a study with its Prolific draft and two raters
    from Prolific who voted on everything; prints the draft's id and the participants."""
    from annotations.models import Rater
    from tests.factories import make_rater
    from tests.prolific_helpers import draft, study_for_prolific, vote_all

    study = study_for_prolific(slug=SLUG, votes_per_item=2)
    link = draft(study)
    raters = [make_rater(study, source=Rater.Source.PROLIFIC) for _ in range(RATERS)]
    for rater in raters:
        vote_all(rater)
    print(json.dumps({"prolific_id": link.prolific_id, "participants": [r.participant_id for r in raters]}))


PRESS = """
import json, time
from decimal import Decimal
from annotations.models import Study
from prolific.services import prolific_bonuses_pay
study = Study.objects.get(slug={slug!r})
while time.time() < {start}:
    time.sleep(0.002)
batch = prolific_bonuses_pay(study=study, user=None, per_vote=Decimal("0.10"))
print(json.dumps(batch.state if batch else None))
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="DATABASE_URL does not point to PostgreSQL")
def test_four_presses_at_once_on_postgresql_pay_each_bonus_once(prolific):
    study = study_for_prolific(votes_per_item=2)
    link = draft(study)
    raters = [prolific_rater(study, prolific, link)[0] for _ in range(RATERS)]
    for rater in raters:
        vote_all(rater)
    services.prolific_submissions_sync(study=study)
    staff = [make_staff() for _ in range(2)]
    start, outcomes, failures = threading.Barrier(PRESSES), [], []

    def press(n: int) -> None:
        try:
            start.wait(timeout=10)
            batch = services.prolific_bonuses_pay(study=study, user=staff[n % 2], per_vote=Decimal("0.10"))
            outcomes.append(batch.state if batch else None)
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press, args=(n,)) for n in range(PRESSES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not failures, failures
    assert "paid" in outcomes and set(outcomes) <= {"paid", None}, outcomes
    for rater in raters:
        assert prolific.amount_paid(rater.participant_id) == Decimal("0.30")
    assert len(prolific.paid) == RATERS


@pytest.mark.slow
def test_four_presses_at_once_in_four_processes_on_sqlite_pay_each_bonus_once(tmp_path):
    with prolific_server(token=TOKEN) as prolific:
        database = f"sqlite:///{tmp_path / 'paid-once.sqlite3'}"
        env = live_env(database, PROLIFIC_API_URL=prolific.base_url, PROLIFIC_API_TOKEN=TOKEN)
        prepare(env)
        seeded = json.loads(run_django("from tests.test_prolific_bonus_once import seed; seed()", env).splitlines()[-1])
        for participant in seeded["participants"]:
            prolific.participant_join(seeded["prolific_id"], participant)
        run_django(
            f"from annotations.models import Study; from prolific.services import prolific_submissions_sync; "
            f"prolific_submissions_sync(study=Study.objects.get(slug={SLUG!r}))",
            env,
        )
        # Each process waits for the same moment once Django is set up, then presses.
        start = time.time() + 8
        code = f"import django; django.setup(); {PRESS.format(slug=SLUG, start=start)}"
        presses = [
            subprocess.Popen(
                [PYTHON, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(PRESSES)
        ]
        outcomes = []
        for press in presses:
            out, err = press.communicate(timeout=120)
            assert press.returncode == 0, err[-3000:]
            outcomes.append(json.loads(out.splitlines()[-1]))
        assert "paid" in outcomes and set(outcomes) <= {"paid", None}, outcomes
        # Each rater paid exactly once, whichever press won them: three counted votes at 0.10.
        for participant in seeded["participants"]:
            assert prolific.amount_paid(participant) == Decimal("0.30")
        assert len(prolific.paid) == RATERS
