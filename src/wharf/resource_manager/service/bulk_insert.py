"""Many-row INSERTs handed to the database driver in one ``executemany``, for the hot tables.

Owns: :func:`insert_many`.

Each scheduling transaction inserts the rows of the requests it created (requests, demands,
subjects, metadata) and of the allocations it granted: about ten rows per admission. SQLAlchemy
builds an execution context per row of an ``executemany`` (parameter mapping, type processing
through several layers), which costs as much as the driver's own work. Here the INSERT is
compiled once per (dialect, table, column set); each row is turned into the driver's
parameters with the very bind processors SQLAlchemy would apply (each column type's
``dialect_impl(dialect).bind_processor(dialect)``), and the batch goes to the driver through
``Connection.exec_driver_sql`` — so events, error translation and retries are unchanged.

Invariants: the values the driver receives are those SQLAlchemy would send (the same processors,
in the compiled statement's parameter order); rows of one call have the same keys; when the
compiled statement does not have the expected shape, the call falls back to SQLAlchemy's own
``executemany``, so this module can only be faster, never different.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.engine import Dialect

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True, slots=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]
    processors: tuple[Processor, ...]
    positional: bool


_CACHE: dict[tuple[str, str, str, str, tuple[str, ...]], _Compiled | None] = {}
"""(dialect, driver, paramstyle, table, columns) -> the compiled INSERT, or None (use
SQLAlchemy's executemany)."""


def insert_many(conn: Connection, table: Table, rows: Sequence[Mapping[str, Any]]) -> None:
    """``INSERT INTO table`` every row (all with the same keys) in one driver call."""
    if not rows:
        return
    keys = tuple(rows[0])
    dialect = conn.dialect
    cache_key = (dialect.name, dialect.driver, dialect.paramstyle, table.name, keys)
    if cache_key not in _CACHE:
        _CACHE[cache_key] = _compile(table, keys, dialect)
    compiled = _CACHE[cache_key]
    if compiled is None:
        conn.execute(table.insert(), list(rows))
        return
    pairs = tuple(zip(compiled.names, compiled.processors, strict=True))
    values = [tuple(row[n] if fn is None else fn(row[n]) for n, fn in pairs) for row in rows]
    if compiled.positional:
        conn.exec_driver_sql(compiled.sql, values)
    else:
        conn.exec_driver_sql(
            compiled.sql, [dict(zip(compiled.names, row, strict=True)) for row in values]
        )


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
    processors = tuple(
        table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in names
    )
    return _Compiled(sql, names, processors, statement.positional)
