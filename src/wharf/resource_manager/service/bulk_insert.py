"""Many-row INSERTs handed to the database driver in as few calls as possible, for the hot tables.

Owns: :func:`insert_many`.

Each scheduling transaction inserts the rows of the requests it created (requests, demands,
subjects, metadata) and of the allocations it granted: about ten rows per admission. SQLAlchemy
builds an execution context per row of an ``executemany`` (parameter mapping, type processing
through several layers), which costs as much as the driver's own work. Here the INSERT is
compiled once per (dialect, table, column set); each row is turned into the driver's
parameters with the very bind processors SQLAlchemy would apply (each column type's
``dialect_impl(dialect).bind_processor(dialect)``), and the batch goes to the driver through
``Connection.exec_driver_sql`` — so events, error translation and retries are unchanged.

On SQLite the rows go as one multi-row ``INSERT ... VALUES (...), (...)`` (per chunk of at
most :data:`MAX_PARAMETERS` parameters) rather than an ``executemany``: the driver then releases
the GIL once instead of once per row, and each release lets a waiting caller thread take the GIL
away from the combining thread. On PostgreSQL (psycopg) they go as one ``COPY ... FROM STDIN``
(text format, values adapted by psycopg as it adapts query parameters): the server parses and
plans nothing per row, where a pipelined ``executemany`` runs one prepared INSERT per row.
PyMySQL already rewrites an ``executemany`` INSERT into multi-row statements itself. ``COPY``
is not a statement SQLAlchemy executes, so no cursor events fire for it; its driver errors are
wrapped as SQLAlchemy would wrap them (``direct.driver_error``), so they map to the same
Wharf errors, and a lost connection is invalidated.

The processors are pure functions of the value, so two shortcuts keep their results exact:
instants are converted once per distinct value in a call (a batch's rows share a handful of
them: its ``now`` and the deadlines computed from it, and formatting one costs microseconds),
and a JSON column's empty object and ``None`` are encoded once, when the statement is compiled.

Invariants: the values the driver receives are those SQLAlchemy would send (the same processors,
in the compiled statement's parameter order); rows of one call have the same keys; when the
compiled statement does not have the expected shape, the call falls back to SQLAlchemy's own
``executemany``, so this module can only be faster, never different.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, DateTime, Table
from sqlalchemy.engine import Dialect

from wharf.store.sql.direct import driver_error
from wharf.store.sql.types import JsonText

Processor = Callable[[Any], Any] | None
_MISSING = object()
MAX_PARAMETERS = 30_000 if sqlite3.sqlite_version_info >= (3, 32) else 999
"""Most parameters in one multi-row INSERT (SQLite allows 32,766 since 3.32, 999 before)."""


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Processor, ...]
    memoized: tuple[bool, ...]
    """Per parameter: its processor is memoized per call (instants)."""
    positional: bool
    head: str | None
    """``INSERT INTO t (...) VALUES `` when rows go as multi-row statements, else None."""
    group: str
    """One row's ``(...)`` with positional markers, its parameters in :attr:`names` order."""
    copy: str | None = None
    """``COPY t (...) FROM STDIN`` (columns in :attr:`names` order) on PostgreSQL + psycopg."""
    by_rows: dict[int, str] = field(default_factory=dict, compare=False)
    """Row count -> its multi-row statement (batch sizes are bounded, so is this)."""

    def multi_row_sql(self, rows: int) -> str:
        sql = self.by_rows.get(rows)
        if sql is None:
            sql = self.by_rows[rows] = f"{self.head}{', '.join([self.group] * rows)}"
        return sql


_CACHE: dict[tuple[str, str, str, str, tuple[str, ...]], _Compiled | None] = {}
"""(dialect, driver, paramstyle, table, columns) -> the compiled INSERT, or None (use
SQLAlchemy's executemany)."""


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """``INSERT INTO table`` every row (all with the same keys) in as few driver calls as
    possible (one per chunk of :data:`MAX_PARAMETERS` parameters, or one ``executemany``)."""
    if not rows:
        return
    compiled = _compiled(conn.dialect, table, rows)
    if compiled is None:
        conn.execute(table.insert(), list(rows))
        return
    values = _values(compiled, rows)
    if compiled.copy is not None:
        _copy(conn, compiled.copy, values)
    elif compiled.head is not None:
        per_statement = max(1, MAX_PARAMETERS // len(compiled.names))
        for start in range(0, len(values), per_statement):
            chunk = values[start : start + per_statement]
            flat = tuple(chain.from_iterable(chunk))
            conn.exec_driver_sql(compiled.multi_row_sql(len(chunk)), flat)
    elif compiled.positional:
        conn.exec_driver_sql(compiled.sql, values)
    else:
        conn.exec_driver_sql(
            compiled.sql, [dict(zip(compiled.names, row, strict=True)) for row in values]
        )


def _compiled(
    dialect: Dialect, table: Table, rows: Sequence[Mapping[str, Any]]
) -> _Compiled | None:
    keys = tuple(rows[0])
    cache_key = (dialect.name, dialect.driver, dialect.paramstyle, table.name, keys)
    if cache_key not in _CACHE:
        _CACHE[cache_key] = _compile(table, keys, dialect)
    return _CACHE[cache_key]


def _values(compiled: _Compiled, rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    """Each row's driver parameters, in the statement's order, through the processors."""
    get = itemgetter(*compiled.names)
    processors = _per_call(compiled.processors, compiled.memoized)
    processed = [(i, fn) for i, fn in enumerate(processors) if fn is not None]
    # itemgetter of one name returns the value itself, not a 1-tuple
    single = len(compiled.names) == 1
    raw = [(get(row),) for row in rows] if single else [get(row) for row in rows]
    if not processed:
        return raw
    values: list[tuple[Any, ...]] = []
    for row_values in raw:
        row = list(row_values)
        for i, fn in processed:
            row[i] = fn(row[i])
        values.append(tuple(row))
    return values


def _copy(conn: Connection, sql: str, values: list[tuple[Any, ...]]) -> None:
    driver = conn.connection.driver_connection
    dbapi = conn.dialect.loaded_dbapi
    try:
        with driver.cursor() as cursor, cursor.copy(sql) as copy:  # type: ignore[union-attr]
            for row in values:
                copy.write_row(row)
    except dbapi.Error as error:
        raise driver_error(conn, sql, None, error) from error


def _compile(table: Table, keys: tuple[str, ...], dialect: Dialect) -> _Compiled | None:
    statement = table.insert().compile(dialect=dialect, column_keys=list(keys))
    sql = statement.string
    if statement.positional:
        names = tuple(statement.positiontup or ())
        if sorted(names) != sorted(keys):
            return None
    else:
        names = keys
        if dialect.paramstyle not in ("pyformat", "named"):
            return None
        marker = "%({})s" if dialect.paramstyle == "pyformat" else ":{}"
        if any(marker.format(name) not in sql for name in names):
            return None
    head, group = _multi_row_parts(sql, statement.positional, dialect)
    processors: list[Processor] = []
    memoized: list[bool] = []
    for name in names:
        column_type = table.c[name].type
        processor: Processor = column_type.dialect_impl(dialect).bind_processor(dialect)
        if processor is not None and isinstance(column_type, JsonText):
            processor = _json_constants(processor)
        processors.append(processor)
        impl = getattr(column_type, "impl_instance", column_type)
        memoized.append(processor is not None and isinstance(impl, DateTime))
    copy = None
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        quote = dialect.identifier_preparer.quote
        columns = ", ".join(quote(name) for name in names)
        copy = f"COPY {dialect.identifier_preparer.format_table(table)} ({columns}) FROM STDIN"
    return _Compiled(
        sql,
        names,
        tuple(processors),
        tuple(memoized),
        statement.positional,
        head,
        group,
        copy,
    )


def _multi_row_parts(sql: str, positional: bool, dialect: Dialect) -> tuple[str | None, str]:
    """(``INSERT ... VALUES ``, one row's group) on SQLite with ``?`` markers, else (None, "")."""
    if dialect.name != "sqlite" or not positional or dialect.paramstyle != "qmark":
        return None, ""
    head, separator, group = sql.rpartition(" VALUES ")
    if not separator or not group.startswith("(") or not group.endswith(")"):
        return None, ""
    return f"{head}{separator}", group


def _json_constants(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``processor`` with the encodings of ``None`` and of an empty object computed once."""
    null, empty = processor(None), processor({})

    def process(value: Any) -> Any:
        if value is None:
            return null
        if type(value) is dict and not value:
            return empty
        return processor(value)

    return process


def _per_call(
    processors: tuple[Processor, ...], memoized: tuple[bool, ...]
) -> tuple[Processor, ...]:
    """The processors for one call: memoized ones get a fresh cache (it lives for one call)."""
    return tuple(
        _memo(fn) if fn is not None and memo else fn
        for fn, memo in zip(processors, memoized, strict=True)
    )


def _memo(processor: Callable[[Any], Any]) -> Callable[[Any], Any]:
    seen: dict[Any, Any] = {}

    def process(value: Any) -> Any:
        result = seen.get(value, _MISSING)
        if result is _MISSING:
            result = seen[value] = processor(value)
        return result

    return process
