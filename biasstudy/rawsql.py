"""Hand-written SQL for the few statements on the rater's hot path, with Django's own value
conversion.

Building a query through the ORM costs 0.4–2 ms of Python on this project's machines (compiling
the query, resolving joins, instantiating models) against 0.03 ms for running the statement
itself; a page and a vote made 25 of them (docs/BENCHMARKS.md, section 1.5). The statements of
`annotations.assignment` and the rater views are therefore written out, and this module gives
them back what the ORM would: model instances whose values went through the same converters
(`Columns`), and rows inserted with the same per-field preparation as `save()` (`insert`).
Everything else in the project uses the ORM.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import cache, cached_property
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections, models


@cache
def vendor() -> str:
    """The default database's vendor ("sqlite", "postgresql"), fixed for the process by its
    settings; kept, because `connection.vendor` goes through the per-thread connection proxy
    (a few microseconds, and the hot path asked ~100 times a page and vote)."""
    return connection.vendor


@cache
def row_locks() -> bool:
    """Whether the default database locks rows (`SELECT ... FOR UPDATE`): PostgreSQL does;
    SQLite's write transactions hold the whole database instead."""
    return connection.features.has_select_for_update


class Columns:
    """Some columns of one model under a table alias in a SELECT: `sql` for the select list,
    `build(row, start)` for the instance made from those values (the other fields deferred, so
    reading one of them later is a query of its own, as with `.only()`)."""

    def __init__(self, model: type[models.Model], alias: str, attnames: Iterable[str] | None = None):
        fields = model._meta.concrete_fields
        if attnames is not None:
            wanted = list(attnames)
            by_attname = {f.attname: f for f in fields}
            unknown = [name for name in wanted if name not in by_attname]
            if unknown:
                raise ValueError(f"Columns: {model.__name__} has no field {', '.join(unknown)}")
            # In the model's own order: Model.from_db() takes a subset's values in that order.
            fields = [f for f in fields if f.attname in set(wanted)]
        self.model, self.alias, self.fields = model, alias, list(fields)
        self.attnames = [f.attname for f in self.fields]
        self.width = len(self.fields)

    # Both depend on the database vendor, which is fixed for the process (`vendor()`): worked
    # out on first use and kept.
    @cached_property
    def sql(self) -> str:
        quote = connection.ops.quote_name
        return ", ".join(f"{self.alias}.{quote(f.column)}" for f in self.fields)

    @cached_property
    def _converters(self) -> list[tuple[int, list, Any]]:
        """(position, converters, column) of each column that has converters, as the SQL
        compiler finds them (the backend's, then the field's)."""
        found = []
        for position, field in enumerate(self.fields):
            col = field.get_col(self.alias)
            converters = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
            if converters:
                found.append((position, converters, col))
        return found

    def values(self, row: Sequence[Any], start: int = 0) -> list[Any]:
        out = list(row[start : start + self.width])
        for position, converters, col in self._converters:
            value = out[position]
            for convert in converters:
                value = convert(value, col, connection)
            out[position] = value
        return out

    def build(self, row: Sequence[Any], start: int = 0) -> models.Model:
        return self.model.from_db(DEFAULT_DB_ALIAS, self.attnames, self.values(row, start))


def build_all(row: Sequence[Any], *columns: Columns) -> list[models.Model]:
    """One instance per `Columns`, from consecutive slices of one row (their SELECT order)."""
    built, start = [], 0
    for cols in columns:
        built.append(cols.build(row, start))
        start += cols.width
    return built


@cache
def table(model: type[models.Model]) -> str:
    """The model's table name, quoted for the database (kept: the hot path names ~20 a vote)."""
    return connection.ops.quote_name(model._meta.db_table)


def datetime_param(value: datetime) -> Any:
    """A datetime as the database takes it in a parameter (as the ORM would send it)."""
    return connection.ops.adapt_datetimefield_value(value)


def fetchone(sql: str, params: Sequence[Any]) -> tuple | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetchall(sql: str, params: Sequence[Any]) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def execute(sql: str, params: Sequence[Any]) -> int:
    """Run one statement; returns the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


Statement = tuple[str, Sequence[Any]]


@cache
def _insert_into(model: type[models.Model], with_pk: bool) -> tuple[list, str, str, str]:
    """The fields an INSERT of `model` writes (the primary key only `with_pk`), its
    `table (col, ...)`, RETURNING clause and placeholders: the same for every row of a model."""
    meta = model._meta
    fields = [f for f in meta.concrete_fields if with_pk or not f.primary_key]
    quote = connection.ops.quote_name
    into = f"{quote(meta.db_table)} ({', '.join(quote(f.column) for f in fields)})"
    return fields, into, f" RETURNING {quote(meta.pk.column)}", ", ".join(["%s"] * len(fields))


def _insert_parts(obj: models.Model) -> tuple[str, str, str, list[Any]]:
    """The table and columns of an INSERT of `obj` (`table (col, ...)`), the RETURNING clause,
    the placeholders, and the values as `save()` would prepare them."""
    fields, into, returning, placeholders = _insert_into(type(obj), obj.pk is not None)
    db = connections[DEFAULT_DB_ALIAS]  # the thread's connection itself, not the proxy
    values = [f.get_db_prep_save(f.pre_save(obj, True), db) for f in fields]
    return into, returning, placeholders, values


def _inserted(obj: models.Model, pk: Any) -> models.Model:
    obj.pk = pk
    obj._state.adding = False
    obj._state.db = DEFAULT_DB_ALIAS
    return obj


def _guarded(obj: models.Model, guard: Statement, name: str) -> tuple[str, list[Any]]:
    """PostgreSQL's WITH queries (and their parameters) that INSERT `obj` only if the `guard`
    UPDATE changes a row: `<name>_guard` runs the guard, `<name>` the INSERT, returning the new
    primary key (no row when the guard changed none)."""
    into, returning, placeholders, values = _insert_parts(obj)
    guard_sql, guard_params = guard
    sql = (
        f"{name}_guard AS ({guard_sql} RETURNING 1), {name} AS (INSERT INTO {into}"  # noqa: S608 - names from the model, values bound
        f" SELECT {placeholders} WHERE EXISTS (SELECT 1 FROM {name}_guard){returning})"
    )
    return sql, [*guard_params, *values]


def insert_if(obj: models.Model, guard: Statement) -> bool:
    """INSERT `obj` (as `insert` does) only if the `guard` UPDATE changes a row; returns whether
    it did. On PostgreSQL one statement (the guard as a data-modifying WITH query), elsewhere
    the UPDATE and then, when it changed a row, the INSERT. Either way both happen or neither,
    provided the caller is in a transaction."""
    with connection.cursor() as cursor:
        if vendor() == "postgresql":
            sql, params = _guarded(obj, guard, "guarded")
            cursor.execute(f"WITH {sql} SELECT * FROM guarded", params)  # noqa: S608
            row = cursor.fetchone()
            if row is None:
                return False
            _inserted(obj, row[0])
            return True
        cursor.execute(*guard)
        if cursor.rowcount != 1:
            return False
    insert(obj)
    return True


def insert(
    obj: models.Model, *, also: Sequence[Statement] = (), also_if: tuple[models.Model, Statement] | None = None
) -> bool | None:
    """INSERT one new object as `obj.save()` would (defaults, `pre_save`, `get_db_prep_save`),
    in one statement that returns its primary key; the object's own save() is not called, so a
    model that computes fields there must do it before.

    `also`: UPDATE or INSERT statements (without RETURNING) that go with this one. On
    PostgreSQL they run in the same statement, as data-modifying WITH queries, which saves a
    round trip each; elsewhere one after the other, after the INSERT. Either way they all
    happen or none does, provided the caller is in a transaction. They must not depend on one
    another's effects, nor change the same row twice: in one PostgreSQL statement they all see
    the database as it was before it.

    `also_if`: (another new object, a guard UPDATE ending in its WHERE clause): that object
    goes in as `insert_if` would put it, only if the guard changes a row, after the rest; on
    PostgreSQL in the same statement, where its guard (not its INSERT) also sees the database
    as it was before the statement. Returns whether it went in (None without `also_if`).
    """
    into, returning, placeholders, values = _insert_parts(obj)
    sql = f"INSERT INTO {into} VALUES ({placeholders}){returning}"  # noqa: S608 - names from the model, values bound
    together = vendor() == "postgresql" and (also or also_if)
    if together:
        # With `also_if`, its guard waits for every `also` statement to be done (it reads how
        # many rows each changed), so that its INSERT comes after them, as it does elsewhere: a
        # row they take out of a unique index no longer counts against the INSERT.
        after = " RETURNING 1" if also_if is not None else ""
        queries = [f"also_{n} AS ({text}{after})" for n, (text, _) in enumerate(also)]
        params = [param for _, statement_params in also for param in statement_params]
        if also_if is not None:
            obj_if, (guard_sql, guard_params) = also_if
            done = "".join(f" AND (SELECT COUNT(*) FROM also_{n}) >= 0" for n in range(len(also)))  # noqa: S608 - names of our own
            guarded, guarded_params = _guarded(obj_if, (guard_sql + done, guard_params), "also_if")
            queries.append(guarded)
            params += guarded_params
            sql += ", (SELECT * FROM also_if)"
        sql = f"WITH {', '.join(queries)} {sql}"
        values = [*params, *values]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        row = cursor.fetchone()
        _inserted(obj, row[0])
        if together:
            if also_if is None:
                return None
            if row[1] is not None:
                _inserted(also_if[0], row[1])
            return row[1] is not None
        for text, params in also:
            cursor.execute(text, params)
    return None if also_if is None else insert_if(*also_if)
