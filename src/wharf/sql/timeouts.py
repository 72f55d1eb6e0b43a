"""How long a PostgreSQL or MySQL/MariaDB connection may take to connect, to run a statement and to
answer at all, so a database that stops answering fails requests in seconds instead of hanging
them: :class:`Timeouts`, :func:`connect_args`, :func:`install` (per-driver wiring on an engine)
and :func:`lifted` (no statement or socket limit, for migrations).

Invariants: Wharf's timeout query parameters are removed from the URL before the driver sees it;
a socket timeout the URL does not set stays above the statement timeout. SQLite has none of
these (its busy timeout bounds lock waits).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.engine import URL

from wharf.core.errors import InputError

CONNECT_SECONDS = 5.0
STATEMENT_SECONDS = 15.0
SOCKET_SECONDS = 20.0
_PARAMETERS = {"connect_timeout": "connect", "statement_timeout": "statement"}
_PARAMETERS["socket_timeout"] = "socket"
_WAIT_TIMEOUT = "_wharf_wait_timeout"


@dataclass(frozen=True, slots=True)
class Timeouts:
    """The three limits, in seconds; a database URL may set each as the ``connect_timeout``,
    ``statement_timeout`` and ``socket_timeout`` query parameter.

    - ``connect``: opening a connection (libpq / PyMySQL ``connect_timeout``);
    - ``statement``: the server cancels a statement running longer (PostgreSQL
      ``statement_timeout``, MariaDB ``max_statement_time``, MySQL ``max_execution_time``);
    - ``socket``: the client gives up on a connection that sent nothing back for this long while
      a statement or commit waits (psycopg's wait loop; PyMySQL's read/write timeouts), closes
      it, and the error is a disconnect: SQLAlchemy invalidates the connection and its pool, and
      the next checkout opens a fresh one. It is longer than ``statement``, so a statement that
      is merely slow is cancelled by the server first and the connection stays usable.
    """

    connect: float = CONNECT_SECONDS
    statement: float = STATEMENT_SECONDS
    socket: float = SOCKET_SECONDS

    def __post_init__(self) -> None:
        if min(self.connect, self.statement, self.socket) <= 0:
            raise InputError("Database timeouts must be positive numbers of seconds.")

    @classmethod
    def from_url(cls, url: URL) -> tuple[URL, Timeouts]:
        """``url`` without Wharf's timeout parameters, and the timeouts it sets (defaults for
        the others; a socket timeout not set stays above the statement timeout)."""
        given: dict[str, float] = {}
        for name, field in _PARAMETERS.items():
            if name not in url.query:
                continue
            raw = url.query[name]
            text = raw if isinstance(raw, str) else raw[-1]
            try:
                given[field] = float(text)
            except ValueError:
                raise InputError(
                    f"Invalid database URL parameter {name}={text!r}: give seconds, e.g. 10."
                ) from None
        stripped = url.difference_update_query(list(_PARAMETERS))
        timeouts = replace(cls(), **given)
        if "socket" not in given and timeouts.socket <= timeouts.statement:
            timeouts = replace(timeouts, socket=timeouts.statement + 5.0)
        return stripped, timeouts


def connect_args(backend: str, url: URL, timeouts: Timeouts) -> dict[str, Any]:
    """The driver's connect arguments for ``timeouts`` (``url``: what it sets already)."""
    if backend == "postgresql":
        statement_ms = int(timeouts.statement * 1000)
        options = f"-c statement_timeout={statement_ms}"
        given = url.query.get("options")
        if isinstance(given, str) and given:
            options = f"{given} {options}"
        return {
            # libpq's minimum is 2 s
            "connect_timeout": max(2, round(timeouts.connect)),
            "options": options,
            # A peer that vanished (no FIN, no RST) is noticed without the wait loop's help.
            "keepalives": 1,
            "keepalives_idle": max(1, round(timeouts.socket / 2)),
            "keepalives_interval": max(1, round(timeouts.socket / 8)),
            "keepalives_count": 3,
            "tcp_user_timeout": int(timeouts.socket * 1000),
        }
    return {
        "connect_timeout": max(1, round(timeouts.connect)),
        "read_timeout": max(1, round(timeouts.socket)),
        "write_timeout": max(1, round(timeouts.socket)),
    }


def install(engine: Engine, timeouts: Timeouts) -> None:
    """Wire the statement and socket timeouts that connect arguments cannot set."""
    if engine.dialect.name == "postgresql":
        _install_psycopg(engine, timeouts)
    else:
        _install_mysql(engine, timeouts)


def _install_psycopg(engine: Engine, timeouts: Timeouts) -> None:
    import psycopg
    from psycopg import errors as pg_errors

    wait_timeout: type[Exception] | None = getattr(pg_errors, "_WaitTimeout", None)
    takes_timeout = "timeout" in inspect.signature(psycopg.Connection.wait).parameters
    if wait_timeout is None or not takes_timeout:
        return  # an older psycopg: keepalives and tcp_user_timeout only (connect arguments)
    timed_out: type[Exception] = wait_timeout

    class TimedConnection(psycopg.Connection[Any]):
        """psycopg's connection whose every wait for the server is bounded (psycopg has no
        read timeout of its own; its wait loop takes one)."""

        def wait(self, gen: Any, interval: float = 0.1, timeout: float | None = None) -> Any:
            if timeout is None:
                timeout = getattr(self, _WAIT_TIMEOUT, None)
            try:
                return super().wait(gen, interval, timeout)
            except timed_out:
                # The connection is in an unknown state: close it, so that the error is a
                # disconnect (SQLAlchemy checks ``closed``) and the pool replaces it.
                self.pgconn.finish()
                raise psycopg.OperationalError(
                    f"The database sent nothing for {timeout:g} s; the connection was closed."
                ) from None

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
        connection = TimedConnection.connect(*cargs, **cparams)
        setattr(connection, _WAIT_TIMEOUT, timeouts.socket)
        return connection


def _install_mysql(engine: Engine, timeouts: Timeouts) -> None:
    @event.listens_for(engine, "connect")
    def _limit_statements(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if "mariadb" in dbapi_connection.get_server_info().lower():
                cursor.execute(f"SET SESSION max_statement_time = {timeouts.statement:.3f}")
            else:  # MySQL bounds SELECTs only
                cursor.execute(f"SET SESSION max_execution_time = {int(timeouts.statement * 1000)}")
        finally:
            cursor.close()


@contextlib.contextmanager
def lifted(conn: Connection) -> Iterator[None]:
    """No statement or socket limit on ``conn`` while inside (migrations, which may take long
    or wait long for another process's migration lock); restored on the way out."""
    dialect = conn.dialect.name
    if dialect == "sqlite":
        yield
        return
    driver = conn.connection.driver_connection
    assert driver is not None  # a checked-out connection
    if dialect == "postgresql":
        before = getattr(driver, _WAIT_TIMEOUT, None)
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")  # until the transaction ends
        setattr(driver, _WAIT_TIMEOUT, None)
        try:
            yield
        finally:
            setattr(driver, _WAIT_TIMEOUT, before)
        return
    read, write = driver._read_timeout, driver._write_timeout  # PyMySQL's own attributes
    variable = _mysql_limit_variable(conn)
    previous = conn.exec_driver_sql(f"SELECT @@SESSION.{variable}").scalar()
    conn.exec_driver_sql(f"SET SESSION {variable} = 0")
    driver._read_timeout = driver._write_timeout = None
    try:
        yield
    finally:
        driver._read_timeout, driver._write_timeout = read, write
        with contextlib.suppress(Exception):  # a broken connection is discarded anyway
            conn.exec_driver_sql(f"SET SESSION {variable} = {previous}")


def _mysql_limit_variable(conn: Connection) -> str:
    driver = conn.connection.driver_connection
    assert driver is not None
    info = str(driver.get_server_info())
    return "max_statement_time" if "mariadb" in info.lower() else "max_execution_time"
