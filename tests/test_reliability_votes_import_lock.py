"""A vote import holds the database's write lock only for its writes: reading the
file, every check, the answers' length measures and the votes' conversion happen before the
transaction opens, so raters go on voting while a large file (LLMBar: 98k votes) is prepared;
inside it only the study is looked up (or made), the judges' votes are checked again and the rows
are inserted. How long the lock is held is measured by bench/bench_import_lock.py --votes."""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection

from annotations import lengths
from annotations.models import Answer, Question, Rater, Study, Vote
from tests.factories import make_study
from tests.test_analysis_import import GOOD_ROWS, write_csv
from tests.test_reliability_import_lock import statement_kind
from vote_imports import importers, vote_import

pytestmark = pytest.mark.django_db(transaction=True)  # the import's own transaction, not the test's


def in_another_thread(work) -> None:
    """Run ``work`` on another connection (another thread) and wait at most 10 s for it: a
    write there needs the write lock, which on SQLite an open import transaction holds."""
    failed = []

    def run() -> None:
        try:
            work()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            failed.append(repr(exc))
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the other connection waited for the import's lock"
    assert failed == []


def test_inside_the_transaction_only_the_study_and_the_judges_votes_are_read_then_rows_inserted(tmp_path):
    study = make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    statements = []

    def record(execute, sql, params, many, context):
        statements.append((connection.in_atomic_block, statement_kind(sql)))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        vote_import.votes_import_path(slug="gen", fmt="csv", path=path)
    # BEGIN: SQLite only; savepoints are nested atomic blocks' bookkeeping.
    inside = [kind for atomic, kind in statements if atomic and kind not in {"BEGIN", "SAVEPOINT", "RELEASE"}]
    # The study found by its slug, the judges' votes checked again; then the inserts, and the
    # study's data version moved in the same transaction.
    assert inside[:2] == ["SELECT", "SELECT"]
    assert set(inside[2:]) == {"INSERT", "UPDATE data_version"}
    assert inside.count("UPDATE data_version") == 1
    assert sum(verb == "SELECT" for atomic, verb in statements if not atomic) > 2  # the reads came before
    assert Vote.objects.filter(item__study=study).count() == len(GOOD_ROWS)


def test_every_answer_is_measured_before_the_transaction_opens(tmp_path, monkeypatch):
    """A spy that calls the real measure and notes whether a transaction was open."""
    calls = []
    real = lengths.measure_all

    def spy(text, *args, **kwargs):
        calls.append(connection.in_atomic_block)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(lengths, "measure_all", spy)
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    study, counts = vote_import.votes_import_path(slug="new", fmt="csv", path=path, create=True)
    answers = Answer.objects.filter(question__study=study)
    assert counts["answers"] == answers.count() == len(calls) == 3
    assert calls == [False, False, False]
    assert not answers.filter(len_words=0).exists()


def test_another_connection_can_write_while_the_votes_are_prepared(tmp_path):
    """What a rater's vote needs: the write lock, taken from another connection while the
    import reads its file and prepares its rows, without waiting for the import."""
    make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)
    steps = []

    def progress(step: int) -> None:
        in_another_thread(lambda: User.objects.create(username=f"rater-{step}"))
        steps.append(step)

    study, counts = vote_import.votes_import_path(slug="gen", fmt="csv", path=path, progress=progress)
    assert steps == [0, 1, 2]  # the last just before the transaction opens
    assert User.objects.filter(username__startswith="rater-").count() == 3
    assert counts["votes"] == Vote.objects.filter(item__study=study).count() == len(GOOD_ROWS)


def test_an_import_of_the_same_judges_finished_meanwhile_makes_this_one_write_nothing(tmp_path):
    make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)

    def progress(step: int) -> None:
        if step == 2:  # prepared: the same file imported by someone else before this one writes
            in_another_thread(lambda: vote_import.votes_import_path(slug="gen", fmt="csv", path=path))

    with pytest.raises(importers.ImportProblem, match="got votes of crowd, gpt-x meanwhile"):
        vote_import.votes_import_path(slug="gen", fmt="csv", path=path, progress=progress)
    assert Vote.objects.count() == len(GOOD_ROWS)  # the other import's, once
    assert Question.objects.count() == 1 and Rater.objects.count() == 2


def test_more_votes_of_a_judge_imported_meanwhile_make_this_import_write_nothing(tmp_path):
    """The study has the judges' votes; the file adds one new vote and recognises the rest. The
    same file imported by someone else while this one was prepared: this one writes nothing
    (else the new vote would be there twice)."""
    study = make_study(status="draft", slug="gen")
    vote_import.votes_import_path(slug="gen", fmt="csv", path=write_csv(tmp_path / "votes.csv", GOOD_ROWS))
    extra = next(row for row in GOOD_ROWS if row[4] == "gpt-x")
    extra = ["q9", "Why is grass green?", *extra[2:]]
    more = write_csv(tmp_path / "more.csv", [*GOOD_ROWS, extra])

    def progress(step: int) -> None:
        if step == 2:
            in_another_thread(lambda: vote_import.votes_import_path(slug="gen", fmt="csv", path=more))

    with pytest.raises(importers.ImportProblem, match="got votes of gpt-x meanwhile"):
        vote_import.votes_import_path(slug="gen", fmt="csv", path=more, progress=progress)
    assert Vote.objects.filter(item__study=study).count() == len(GOOD_ROWS) + 1  # the other import's, once


def test_a_row_written_meanwhile_that_breaks_a_constraint_makes_the_import_write_nothing(tmp_path):
    study = make_study(status="draft", slug="gen")
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)

    def progress(step: int) -> None:
        if step == 2:
            in_another_thread(
                lambda: Question.objects.create(
                    study=study, external_id="q1", text="Other.", bloom_level="understanding"
                )
            )

    with pytest.raises(importers.ImportProblem, match="wrote the same rows meanwhile .* import it again"):
        vote_import.votes_import_path(slug="gen", fmt="csv", path=path, progress=progress)
    assert list(Question.objects.values_list("text", flat=True)) == ["Other."]
    assert Vote.objects.count() == 0 and Answer.objects.count() == 0


def test_a_study_made_meanwhile_by_someone_else_is_not_written_into(tmp_path):
    path = write_csv(tmp_path / "votes.csv", GOOD_ROWS)

    def progress(step: int) -> None:
        if step == 2:
            in_another_thread(lambda: make_study(status="draft", slug="new"))

    with pytest.raises(importers.ImportProblem, match="study 'new' was made by someone else meanwhile"):
        vote_import.votes_import_path(slug="new", fmt="csv", path=path, create=True, progress=progress)
    assert Study.objects.count() == 1 and Question.objects.count() == 0
