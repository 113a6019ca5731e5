"""Inserting many rows where Django's bulk_create costs more than the work itself.

`insert_ignoring_conflicts` writes what `bulk_create(objs, ignore_conflicts=True)` writes, with
the same per-field conversion (`pre_save` and `get_db_prep_save`, so defaults, JSON and time
zones come out identical), but as one `executemany` of a prepared INSERT instead of compiling
every value through the SQL compiler: about a third of the CPU for a judge run's votes and cache
entries (docs/BENCHMARKS.md, judge-run overhead). Rows that would break a unique constraint are skipped,
as with bulk_create; no primary keys are set on the objects.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connections, models, router

# Rows per statement: one executemany per chunk keeps memory flat for large batches.
CHUNK = 1000


def _insert(model: type[models.Model], suffix: str = "") -> tuple:
    """(connection, fields, statement): one row's INSERT of every concrete field but the id."""
    connection = connections[router.db_for_write(model)]
    fields = [f for f in model._meta.concrete_fields if not isinstance(f, models.AutoField)]
    quote = connection.ops.quote_name
    columns = ", ".join(quote(f.column) for f in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({placeholders}){suffix}"  # noqa: S608 - names from the model, values bound
    return connection, fields, sql


def insert_ignoring_conflicts(model: type[models.Model], objs: Sequence[models.Model]) -> None:
    """INSERT the objects' rows, skipping any that conflicts with a unique constraint."""
    if not objs:
        return
    # PostgreSQL and SQLite (3.24+) both understand ON CONFLICT DO NOTHING.
    connection, fields, sql = _insert(model, " ON CONFLICT DO NOTHING")
    with connection.cursor() as cursor:
        for start in range(0, len(objs), CHUNK):
            rows = [
                [f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields]
                for obj in objs[start : start + CHUNK]
            ]
            cursor.executemany(sql, rows)


def insert_rows(model: type[models.Model], rows: Sequence[dict]) -> None:
    """INSERT plain rows (field attname → value; a missing field takes its default) as one
    prepared statement per chunk, without building model instances: the conversion of each
    value is the field's own ``get_db_prep_save``. A row that breaks a constraint raises
    (``IntegrityError``), so run it inside the caller's transaction."""
    if not rows:
        return
    connection, fields, sql = _insert(model)
    defaults = {f.attname: f.get_default() for f in fields if not callable(f.default)}
    with connection.cursor() as cursor:
        for start in range(0, len(rows), CHUNK):
            chunk = []
            for row in rows[start : start + CHUNK]:
                values = []
                for f in fields:
                    value = row[f.attname] if f.attname in row else defaults.get(f.attname, f.get_default())
                    values.append(f.get_db_prep_save(value, connection))
                chunk.append(values)
            cursor.executemany(sql, chunk)
