"""biasstudy.bulk: the lean INSERT stores exactly what bulk_create stores, and skips conflicts."""

from datetime import UTC, datetime

import pytest
from django.forms.models import model_to_dict

from annotations.models import Answer, Question, Vote
from biasstudy.bulk import insert_ignoring_conflicts, insert_prepared, insert_prepared_returning_ids, prepare_rows
from judges.models import CachedResponse
from tests.factories import make_question, make_study

pytestmark = pytest.mark.django_db


def _entry(key: str, **kw) -> CachedResponse:
    fields = {
        "backend": "openai_compatible",
        "model": "m",
        "text": "Answer 2 — «quoted»\n**bold**",
        "option_probs": {"a1": 0.25, "a2": 0.75, "tie": 0.0},
        "logprobs": [["Answer", -0.1, [["Answer", -0.1], ["The", -2.5]]]],
        "tokens_in": 12,
        "tokens_out": 3,
        "created_at": datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC),
    }
    return CachedResponse(key=key, **{**fields, **kw})


def _stored(key: str) -> dict:
    row = model_to_dict(CachedResponse.objects.get(key=key))
    row.pop("id")
    row.pop("key")
    return row


def test_rows_come_out_as_bulk_create_writes_them():
    CachedResponse.objects.bulk_create([_entry("by-django"), _entry("by-django-null", option_probs=None)])
    insert_ignoring_conflicts(CachedResponse, [_entry("ours"), _entry("ours-null", option_probs=None)])
    assert _stored("ours") == _stored("by-django")
    assert _stored("ours-null") == _stored("by-django-null")
    assert CachedResponse.objects.get(key="ours-null").option_probs is None


def test_a_conflicting_row_is_skipped_and_the_rest_are_written():
    insert_ignoring_conflicts(CachedResponse, [_entry("k1", text="first")])
    insert_ignoring_conflicts(CachedResponse, [_entry("k1", text="second"), _entry("k2")])
    assert CachedResponse.objects.get(key="k1").text == "first"
    assert CachedResponse.objects.count() == 2


def test_votes_take_their_model_defaults():
    study = make_study()
    make_question(study)
    item = study.items.get()
    judge = study.judges.create(name="j", kind="imported")
    insert_ignoring_conflicts(Vote, [Vote(item=item, judge=judge, shown_first="a2", choice_shown="first", choice="a2")])
    vote = Vote.objects.get()
    assert (vote.choice, vote.round, vote.not_familiar, vote.meta) == ("a2", Vote().round, False, Vote().meta)
    assert vote.received_at is not None


def test_plain_rows_come_out_as_bulk_create_writes_them_and_a_broken_one_raises():
    from django.db import IntegrityError, transaction

    from biasstudy.bulk import insert_rows

    fields = {"backend": "openai_compatible", "model": "m", "text": "t", "option_probs": {"a1": 0.5}, "tokens_in": 1}
    CachedResponse.objects.bulk_create([_entry("by-django", **fields)])
    row = {f.attname: getattr(_entry("ours", **fields), f.attname) for f in CachedResponse._meta.concrete_fields}
    del row["id"]
    insert_rows(CachedResponse, [row])
    assert _stored("ours") == _stored("by-django")
    with pytest.raises(IntegrityError), transaction.atomic():
        insert_rows(CachedResponse, [{**row, "text": "again"}])  # the same key twice
    assert CachedResponse.objects.get(key="ours").text == "t"


def test_rows_given_back_their_ids_in_order_across_statements_and_as_bulk_create_writes_them():
    from django.db import connection

    fields = {"backend": "openai_compatible", "model": "m", "option_probs": {"a1": 0.5}, "tokens_in": 1}
    CachedResponse.objects.bulk_create([_entry("by-django", text="t", **fields)])
    columns = [f for f in CachedResponse._meta.concrete_fields if not f.primary_key]
    # More rows than one statement takes on SQLite (999 parameters) or than a chunk, so the ids
    # of several statements are joined; each id must name the row given at its place.
    n = 2 * connection.ops.bulk_batch_size(columns, [None] * 5_000) + 3 if connection.vendor == "sqlite" else 2_003
    rows = [{f.attname: getattr(_entry(f"k{i}", text=f"t{i}", **fields), f.attname) for f in columns} for i in range(n)]
    ids = insert_prepared_returning_ids(prepare_rows(CachedResponse, rows))
    assert len(ids) == len(set(ids)) == n
    assert dict(CachedResponse.objects.filter(pk__in=ids).values_list("pk", "key")) == {
        pk: f"k{i}" for i, pk in enumerate(ids)
    }
    assert {**_stored("k0"), "text": "t"} == _stored("by-django")
    assert insert_prepared_returning_ids(prepare_rows(CachedResponse, [])) == []


def test_a_prepared_row_takes_the_id_its_parent_got_after_it_was_prepared():
    study = make_study()
    question = Question(study=study, external_id="q", text="Q?", bloom_level="remembering")
    prepared = prepare_rows(
        Question, [{"study_id": study, "external_id": "late", "text": "Q", "bloom_level": "creating"}]
    )
    unsaved = prepare_rows(Answer, [{"question_id": question, "external_id": "a", "text": "A"}])
    with pytest.raises(ValueError, match="not saved"):
        insert_prepared(unsaved)
    question.save()
    insert_prepared(prepared)
    insert_prepared(prepare_rows(Answer, [{"question_id": question, "external_id": "a", "text": "A"}]))
    assert Question.objects.get(external_id="late").study == study
    assert Answer.objects.get(external_id="a").question == question
