"""A study import holds the database's write lock only for its INSERTs: parsing,
validation, Markdown rendering, length measures and building every row happen before the
transaction opens, so raters go on voting while a large file is prepared. How long the lock is
held for a 60 MB file is measured by bench/bench_import_lock.py (docs/BENCHMARKS.md)."""

import json
import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection

from annotations import lengths
from annotations.models import Answer, ComparisonItem, Question, Slot, Study
from annotations.study_files import study_import
from biasstudy import rendering
from tests.test_study_import import DEMO

pytestmark = pytest.mark.django_db(transaction=True)  # the import's own transaction, not the test's


def statement_kind(sql: str) -> str:
    """A statement's verb, with the study's data version named apart from any other UPDATE."""
    verb = sql.lstrip().split(None, 1)[0].upper()
    if verb == "UPDATE" and '"annotations_study"' in sql and '"data_version"' in sql:
        return "UPDATE data_version"
    return verb


def questions_in(path) -> int:
    document = json.loads(path.read_text(encoding="utf-8"))
    return len(document["questions"]) + len(document.get("gold_items", []))


def test_only_inserts_run_inside_the_import_transaction():
    statements = []

    def record(execute, sql, params, many, context):
        statements.append((connection.in_atomic_block, statement_kind(sql)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        study = study_import(path=DEMO, fmt="biasstudy")
    inside = [kind for atomic, kind in statements if atomic]
    # BEGIN is a statement on SQLite only; the savepoint is a nested atomic block's bookkeeping.
    # Besides the inserts, the one write is the study's data version, moved in the same
    # transaction as the rows its reports read.
    assert set(inside) - {"BEGIN", "SAVEPOINT", "RELEASE"} == {"INSERT", "UPDATE data_version"}
    assert inside.count("UPDATE data_version") == 1
    assert [verb for atomic, verb in statements if not atomic] != []  # the reads came before
    assert Question.objects.filter(study=study).count() == questions_in(DEMO)
    assert (
        Slot.objects.filter(study=study).count()
        == study.votes_per_item * ComparisonItem.objects.filter(study=study, question__is_gold=False).count()
    )


def test_every_text_is_rendered_and_measured_before_the_transaction_opens(monkeypatch):
    """A spy that calls the real functions and notes whether a transaction was open."""
    calls = []
    for module, name in ((rendering, "render_markdown"), (lengths, "measure_all")):
        real = getattr(module, name)

        def spy(text, *args, _real=real, _name=name, **kwargs):
            calls.append((_name, connection.in_atomic_block))
            return _real(text, *args, **kwargs)

        monkeypatch.setattr(module, name, spy)
    study = study_import(path=DEMO, fmt="biasstudy")
    answers = Answer.objects.filter(question__study=study)
    assert {name for name, _ in calls} == {"render_markdown", "measure_all"}
    assert [name for name, atomic in calls if atomic] == []
    assert sum(name == "measure_all" for name, _ in calls) == answers.count()
    assert not answers.filter(text_html="").exists() and not answers.filter(len_words=0).exists()


def test_another_connection_can_write_while_the_file_is_prepared():
    """What a rater's vote needs: the write lock, taken from another connection (another thread)
    while each question is being prepared, without waiting for the import."""
    written, failed = [], []

    def write(done: int) -> None:
        try:
            User.objects.create(username=f"rater-{done}")
            written.append(done)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failed.append(repr(exc))
        finally:
            connection.close()

    def progress(done: int, total: int) -> None:
        writer = threading.Thread(target=write, args=(done,))
        writer.start()
        writer.join(timeout=10)
        assert not writer.is_alive(), "the other connection waited for the import's lock"

    study = study_import(path=DEMO, fmt="biasstudy", progress=progress)
    total = len(json.loads(DEMO.read_text(encoding="utf-8"))["questions"])
    assert failed == []
    assert written == list(range(1, total + 1))
    assert User.objects.filter(username__startswith="rater-").count() == total
    assert Study.objects.get() == study
