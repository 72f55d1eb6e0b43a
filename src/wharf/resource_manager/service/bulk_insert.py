"""Many-row INSERTs handed to the database driver in as few calls as possible, for the hot tables.

Owns: :func:`insert_many`, :func:`insert_tables`. The INSERT is compiled once per (dialect,
table, column set) and rows are converted with the bind processors SQLAlchemy would apply, then
sent on the connection's own cursor (``direct.execute_sql``), skipping SQLAlchemy's per-row
execution context: one multi-row ``INSERT`` per chunk of :data:`MAX_PARAMETERS` on SQLite (one
GIL release instead of one per row), ``COPY ... FROM STDIN`` on PostgreSQL from
:data:`COPY_FROM_ROWS` rows up, PyMySQL's own ``executemany`` rewrite on MySQL.

Invariants: the driver receives the values SQLAlchemy would send (same processors, compiled
parameter order; instants and empty JSON values converted once, as the processors are pure);
rows of one call have the same keys; driver errors are wrapped as SQLAlchemy wraps them; a
compiled statement of unexpected shape falls back to SQLAlchemy's own ``executemany``.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import Connection, DateTime, Table
from sqlalchemy.engine import Dialect

from wharf.sql.direct import RawWrite, driver_error, execute_sql, is_psycopg, pipelines
from wharf.sql.types import JsonText

Processor = Callable[[Any], Any] | None
_MISSING = object()
MAX_PARAMETERS = 30_000 if sqlite3.sqlite_version_info >= (3, 32) else 999
"""Most parameters in one multi-row INSERT (SQLite allows 32,766 since 3.32, 999 before)."""
_MAX_NUMBERED = 256
COPY_FROM_ROWS = 32
"""On PostgreSQL, fewer rows go as one multi-row INSERT: one round trip, where ``COPY`` takes
two (the command, then the data), which is what a small batch (an HTTP server's few concurrent
calls) waits for; from this many rows on, ``COPY``'s cheaper parsing on the server wins."""


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

    numbered: dict[tuple[int, int], str] = field(default_factory=dict, compare=False)
    """(row count, first marker) -> its multi-row statement with ``$n`` markers (psycopg); the
    first marker depends on the rows of the tables before it in a combined statement, so the
    cache is emptied when it reaches :data:`_MAX_NUMBERED` entries."""

    def multi_row_sql(self, rows: int) -> str:
        sql = self.by_rows.get(rows)
        if sql is None:
            sql = self.by_rows[rows] = f"{self.head}{', '.join([self.group] * rows)}"
        return sql

    def numbered_sql(self, rows: int, offset: int) -> str:
        """The multi-row statement with markers ``$offset+1`` ... (the group has ``%s``)."""
        sql = self.numbered.get((rows, offset))
        if sql is None:
            pieces = self.group.split("%s")
            width = len(pieces) - 1
            groups = []
            for row in range(rows):
                first = offset + row * width + 1
                markers = [f"${first + column}" for column in range(width)]
                groups.append(
                    "".join(chain.from_iterable(zip(pieces, [*markers, ""], strict=True)))
                )
            if len(self.numbered) >= _MAX_NUMBERED:
                self.numbered.clear()
            sql = self.numbered[(rows, offset)] = f"{self.head}{', '.join(groups)}"
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
    if compiled.copy is not None and (len(values) >= COPY_FROM_ROWS or compiled.head is None):
        _copy(conn, compiled.copy, values)
    elif compiled.copy is not None:  # psycopg, few rows: one multi-row statement
        sql = compiled.numbered_sql(len(values), 0)
        _raw_execute(conn, sql, tuple(chain.from_iterable(values)))
    elif compiled.head is not None:
        per_statement = max(1, MAX_PARAMETERS // len(compiled.names))
        for start in range(0, len(values), per_statement):
            chunk = values[start : start + per_statement]
            flat = tuple(chain.from_iterable(chunk))
            execute_sql(conn, compiled.multi_row_sql(len(chunk)), flat)
    elif compiled.positional:
        conn.exec_driver_sql(compiled.sql, values)
    else:
        conn.exec_driver_sql(
            compiled.sql, [dict(zip(compiled.names, row, strict=True)) for row in values]
        )


def insert_tables(
    conn: Connection,
    groups: Sequence[tuple[Table, Sequence[Mapping[str, Any]]]],
    *,
    later: bool = False,
) -> list[RawWrite]:
    """:func:`insert_many` for each (table, rows), in order; on PostgreSQL, when every group is
    small enough for a multi-row INSERT, all of them as *one* statement (data-modifying ``WITH``
    parts): one round trip instead of one per table. Foreign keys between the groups hold, as
    PostgreSQL checks them at the end of the statement.

    ``later``: that one statement is not sent but returned, for the caller to send with its
    transaction's last writes (:func:`~wharf.sql.direct.commit_with`), as its last
    statements or before them; everything else is inserted now, and nothing is returned."""
    groups = [(table, rows) for table, rows in groups if rows]
    if len(groups) > 1 and is_psycopg(conn.dialect):
        parts: list[str] = []
        params: list[Any] = []
        for table, rows in groups:
            compiled = _compiled(conn.dialect, table, rows)
            if compiled is None or compiled.head is None or len(rows) >= COPY_FROM_ROWS:
                break
            parts.append(compiled.numbered_sql(len(rows), len(params)))
            params.extend(chain.from_iterable(_values(compiled, rows)))
        else:
            heads = ", ".join(f"w{index} AS ({sql})" for index, sql in enumerate(parts[:-1]))
            write = RawWrite(f"WITH {heads} {parts[-1]}", tuple(params))
            if later and pipelines(conn):
                return [write]
            _raw_execute(conn, write.sql, write.params)
            return []
    for table, rows in groups:
        insert_many(conn, table, rows)
    return []


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


def _raw_execute(conn: Connection, sql: str, params: tuple[Any, ...]) -> None:
    """Run ``sql`` (``$n`` markers) on psycopg's raw cursor: psycopg parses a ``%s`` query with
    more than 50 parameters again on every call (it caches only small ones), which cost more
    CPU than the rest of a small batch's inserts; a raw query is sent as it is."""
    from psycopg import RawCursor  # only ever called on a psycopg connection

    driver = conn.connection.driver_connection
    dbapi = conn.dialect.loaded_dbapi
    try:
        with RawCursor(driver) as cursor:  # type: ignore[arg-type]
            cursor.execute(sql.encode(), params)
    except dbapi.Error as error:
        raise driver_error(conn, sql, params, error) from error


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
    if is_psycopg(dialect):
        head, group, names = _psycopg_multi_row_parts(sql, names)
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
    if is_psycopg(dialect):
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


_PYFORMAT = re.compile(r"%\((\w+)\)s")


def _psycopg_multi_row_parts(
    sql: str, names: tuple[str, ...]
) -> tuple[str | None, str, tuple[str, ...]]:
    """(``INSERT ... VALUES ``, one row's group with ``%s`` markers and SQLAlchemy's casts, the
    parameter names in marker order), or ``(None, "", names)`` if the statement is unexpected."""
    head, separator, group = sql.rpartition(" VALUES ")
    markers = tuple(_PYFORMAT.findall(group))
    if not separator or sorted(markers) != sorted(names) or "%" in _PYFORMAT.sub("", group):
        return None, "", names
    return f"{head}{separator}", _PYFORMAT.sub("%s", group), markers


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
