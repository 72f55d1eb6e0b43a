"""Hot statements run on the driver's cursor, below SQLAlchemy's execution layer
(:class:`DirectStatement`): the store's per-step path and the Resource Manager's request inserts
(kept for the goals in docs/benchmarks.md).

Invariants:
- statements run on the caller's DBAPI connection, inside the transaction its ``Connection``
  began (``Database.read``/``write`` always do);
- parameters and result columns are converted exactly as ``Connection.execute`` converts them,
  and driver errors are raised as the ``sqlalchemy.exc.DBAPIError`` subclass SQLAlchemy would
  raise; the contract suite runs both ways on all backends;
- only fixed sets of plain bind parameters (no expanding ``IN``, no Python-side defaults).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Column, Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.dml import UpdateBase

from wharf.sql.parameter_checks import check_parameters

Processor = Callable[[Any], Any] | None


class _Compiled:
    """One statement compiled for one dialect and one set of given values."""

    __slots__ = ("columns", "fixed", "names", "plan", "positional", "results", "sql")

    def __init__(
        self,
        statement: ClauseElement,
        dialect: Dialect,
        keys: Sequence[str],
        returning: Sequence[Column[Any]] = (),
    ) -> None:
        compiled = statement.compile(dialect=dialect, column_keys=list(keys))
        assert isinstance(compiled, SQLCompiler)
        if compiled.insert_prefetch or compiled.update_prefetch:
            # Python-side column defaults are computed by SQLAlchemy's execution context,
            # bypassed here. Values the database computes (SQL expressions in the statement,
            # server defaults) need nothing from it: SQLAlchemy only lists them to fetch back.
            raise ValueError(f"A direct statement cannot fill column defaults: {compiled}")
        self.sql = compiled.string
        binds = compiled.binds
        self.positional = compiled.positiontup is not None
        self.names: tuple[str, ...] = tuple(
            compiled.positiontup if compiled.positiontup is not None else binds
        )
        # Values the statement carries itself (literals, LIMIT): SQLAlchemy sends them as
        # parameters with their own values; the caller gives only the others.
        self.fixed: dict[str, Any] = {
            n: binds[n].effective_value for n in self.names if not binds[n].required
        }
        self.plan: tuple[tuple[str, Processor], ...] = tuple(
            (n, binds[n].type.dialect_impl(dialect).bind_processor(dialect)) for n in self.names
        )
        selected = getattr(statement, "selected_columns", None) or returning or None
        self.columns: tuple[str, ...] = ()
        self.results: tuple[Processor, ...] = ()
        if selected is not None:
            self.columns = tuple(c.key for c in selected)
            if len(set(self.columns)) != len(self.columns):
                raise ValueError(f"A direct select needs distinct column keys: {self.columns}")
            self.results = tuple(
                c.type.dialect_impl(dialect).result_processor(dialect, None) for c in selected
            )

    def parameters(self, values: Mapping[str, Any]) -> Any:
        if self.fixed:
            values = {**self.fixed, **values}
        try:
            converted = [values[n] if proc is None else proc(values[n]) for n, proc in self.plan]
        except (TypeError, ValueError) as error:  # e.g. a value that is not JSON-serialisable
            raise exc.StatementError(str(error), self.sql, values, error) from error
        return converted if self.positional else dict(zip(self.names, converted, strict=True))

    def row(self, raw: Sequence[Any]) -> dict[str, Any]:
        return {
            name: v if proc is None else proc(v)
            for name, proc, v in zip(self.columns, self.results, raw, strict=True)
        }


class DirectStatement:
    """A Core statement executed on the DBAPI cursor of a SQLAlchemy connection, compiled once
    per dialect and set of given value names (an insert or update writes exactly the columns
    it is given, as ``Connection.execute`` does). SQLAlchemy compiles it for the connection's
    dialect and the column types' own processors convert its values; only the sending bypasses
    ``Connection.execute`` and its per-call bookkeeping.

    ``returning``: for an INSERT, UPDATE or DELETE, columns it returns (``RETURNING``), read by
    :meth:`rows` like a select's. They are given here rather than with ``.returning()``, whose
    copy of the statement can carry a stale memo of the columns it exports."""

    def __init__(self, statement: ClauseElement, *, returning: Sequence[Column[Any]] = ()) -> None:
        if returning:
            assert isinstance(statement, UpdateBase)
            statement = statement.returning(*returning)
        self._statement = statement
        self._returning = tuple(returning)
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def _for(self, dialect: Dialect, values: Mapping[str, Any]) -> _Compiled:
        key = (dialect.name, frozenset(values))
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = _Compiled(
                self._statement, dialect, list(values), self._returning
            )
        return compiled

    def rows(self, conn: Connection, values: Mapping[str, Any]) -> list[dict[str, Any]]:
        """Run a select (or a write with ``RETURNING``); its rows as dicts keyed by column key."""
        compiled = self._for(conn.dialect, values)
        found = _run(conn, compiled.sql, compiled.parameters(values))[0]
        return [compiled.row(r) for r in found]

    def first(self, conn: Connection, values: Mapping[str, Any]) -> dict[str, Any] | None:
        found = self.rows(conn, values)
        return found[0] if found else None

    def execute(self, conn: Connection, values: Mapping[str, Any]) -> int:
        """Run an insert, update or delete; the driver's row count (rows matched)."""
        compiled = self._for(conn.dialect, values)
        return _run(conn, compiled.sql, compiled.parameters(values), fetch=False)[1]

    def execute_many(self, conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run an insert once per row (all rows give the same value names)."""
        if not rows:
            return
        compiled = self._for(conn.dialect, rows[0])
        _run(conn, compiled.sql, [compiled.parameters(r) for r in rows], fetch=False, many=True)


def _run(
    conn: Connection, sql: str, params: Any, *, fetch: bool = True, many: bool = False
) -> tuple[list[Any], int]:
    """(the rows fetched, if ``fetch``; the driver's row count)"""
    # The connection of the caller's transaction (``Connection.connection`` never begins one).
    check_parameters(params, many=many)  # as the engine's listener does for Connection.execute
    dbapi = conn.connection.driver_connection
    assert dbapi is not None
    cursor = dbapi.cursor()
    try:
        if many:
            cursor.executemany(sql, params)
        else:
            cursor.execute(sql, params)
        rows = list(cursor.fetchall()) if fetch else []
        return rows, cursor.rowcount
    except conn.dialect.loaded_dbapi.Error as error:
        raise driver_error(conn, sql, params, error) from error
    finally:
        cursor.close()


def driver_error(conn: Connection, sql: str, params: Any, error: Any) -> exc.StatementError:
    """A driver's ``error`` from a statement sent past SQLAlchemy, as SQLAlchemy would raise it;
    a lost connection is invalidated, as SQLAlchemy does."""
    dialect = conn.dialect
    lost = dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
    if lost:
        conn.invalidate(error)
    wrapped: exc.StatementError = exc.DBAPIError.instance(
        sql, params, error, dialect.loaded_dbapi.Error, dialect=dialect, connection_invalidated=lost
    )
    return wrapped
