"""Connect, statement and socket timeouts on PostgreSQL and MariaDB: a database that stops
answering fails a call in seconds with ``StoreUnavailableError``, and the pool replaces the
connection once it answers again. The database is cut away through a real TCP proxy
(:mod:`tests.faults.tcp_proxy`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from tests.faults.tcp_proxy import TcpProxy

from wharf.core.errors import InputError, StoreUnavailableError
from wharf.sql import timeouts
from wharf.sql.engine import Database, create_sql_engine, mask_url, normalize_url
from wharf.sql.errors import SCHEMA_MISSING

SERVERS = pytest.mark.parametrize("backend_name", ["postgresql", "mariadb"])
SHORT = {"connect_timeout": "2", "statement_timeout": "1", "socket_timeout": "2"}


def test_timeouts_come_from_the_url_and_leave_it() -> None:
    url, found = timeouts.Timeouts.from_url(
        normalize_url("postgresql://u@h/db?statement_timeout=3&socket_timeout=4&sslmode=disable")
    )
    assert found == timeouts.Timeouts(statement=3.0, socket=4.0)
    assert dict(url.query) == {"sslmode": "disable"}
    _, derived = timeouts.Timeouts.from_url(
        normalize_url("postgresql://u@h/db?statement_timeout=60")
    )
    assert derived.socket > derived.statement  # a slow statement is cancelled by the server first
    with pytest.raises(InputError, match="statement_timeout"):
        timeouts.Timeouts.from_url(normalize_url("postgresql://u@h/db?statement_timeout=soon"))
    with pytest.raises(InputError, match="positive"):
        timeouts.Timeouts.from_url(normalize_url("mysql://u@h/db?socket_timeout=0"))


@pytest.fixture
def proxied(
    backend_name: str, empty_database_url: Callable[[str], str]
) -> Iterator[tuple[TcpProxy, Database]]:
    real = make_url(empty_database_url(backend_name))
    assert real.host is not None and real.port is not None
    with TcpProxy(real.host, real.port) as proxy:
        url = real.set(host="127.0.0.1", port=proxy.port).update_query_dict(SHORT)
        db = Database(create_sql_engine(url), mask_url(url))
        try:
            yield proxy, db
        finally:
            db.dispose()


def _select_one(db: Database) -> Any:
    return db.read(lambda conn: conn.execute(sa.text("SELECT 1")).scalar_one())


def _fails_fast(call: Callable[[], Any], within: float) -> StoreUnavailableError:
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as raised:
        call()
    assert time.monotonic() - started < within
    return raised.value


@SERVERS
@pytest.mark.parametrize("mode", ["blackhole", "drop"])
def test_a_cut_database_fails_calls_in_seconds_and_the_pool_recovers(
    proxied: tuple[TcpProxy, Database], mode: Any
) -> None:
    proxy, db = proxied
    assert _select_one(db) == 1
    proxy.cut(mode)
    _fails_fast(lambda: _select_one(db), within=5)  # the pooled connection: socket timeout
    _fails_fast(lambda: _select_one(db), within=5)  # a new one: refused
    proxy.restore()
    assert _select_one(db) == 1  # a fresh connection replaced the broken one


@SERVERS
def test_a_statement_over_its_timeout_is_cancelled_and_the_connection_kept(
    proxied: tuple[TcpProxy, Database], backend_name: str
) -> None:
    _, db = proxied
    sleep = "SELECT pg_sleep(5)" if backend_name == "postgresql" else "SELECT SLEEP(5)"

    def slow() -> Any:
        return db.read(lambda conn: conn.exec_driver_sql(sleep).scalar())

    error = _fails_fast(slow, within=3)
    assert "did not answer in time" in str(error)
    assert _select_one(db) == 1


@SERVERS
def test_migrations_run_without_the_limits(
    proxied: tuple[TcpProxy, Database], backend_name: str
) -> None:
    _, db = proxied
    sleep = "SELECT pg_sleep(1.5)" if backend_name == "postgresql" else "SELECT SLEEP(1.5)"

    def long(conn: sa.Connection) -> Any:
        with timeouts.lifted(conn):
            return conn.exec_driver_sql(sleep).scalar()

    assert db.write(long) in (None, "", 0)  # pg_sleep returns void; SLEEP 0 when not cut short
    assert _select_one(db) == 1  # the limits are back on the pooled connection
    _fails_fast(lambda: db.read(lambda conn: conn.exec_driver_sql(sleep).scalar()), within=3)


@SERVERS
def test_a_missing_table_is_a_missing_schema(proxied: tuple[TcpProxy, Database]) -> None:
    _, db = proxied
    error = _fails_fast(
        lambda: db.read(lambda conn: conn.exec_driver_sql("SELECT * FROM wharf_nothing_here")),
        within=5,
    )
    assert SCHEMA_MISSING in str(error)
