"""A forked child of a process whose store is open (a multiprocessing pool forked by an inline
step) neither uses nor closes the parent's pooled connections: it opens its own.

Real forks (``tests.sql.forking``) of the test process, real databases: on PostgreSQL and
MariaDB a connection is a server session, told apart by its id on the server.
"""

from __future__ import annotations

import sqlite3

import pytest
from tests.sql.forking import exit_code_in_fork

from wharf.sql.engine import SQLITE_BUSY_TIMEOUT_SECONDS
from wharf.store.sql import SqlStore

SERVERS = pytest.mark.parametrize("backend_name", ["postgresql", "mariadb"])


def _session_id(store: SqlStore) -> int:
    """The server's id of the pooled connection a read of ``store`` runs on."""
    query = "SELECT CONNECTION_ID()" if store._db.is_mysql else "SELECT pg_backend_pid()"
    return int(store._db.read(lambda conn: conn.exec_driver_sql(query).scalar_one()))


@SERVERS
def test_a_forked_child_reads_on_a_session_of_its_own(backend: SqlStore) -> None:
    """Two processes on one session interleave their messages on its socket (a garbled result,
    "MySQL server has gone away", a query waiting for an answer the other process read)."""
    parents = _session_id(backend)

    def in_child() -> None:
        assert _session_id(backend) != parents
        assert backend.projects.create("made-by-the-child").name == "made-by-the-child"

    assert exit_code_in_fork(in_child) == 0
    assert _session_id(backend) == parents
    assert backend.projects.get_by_name("made-by-the-child").name == "made-by-the-child"


@SERVERS
def test_a_forked_child_closing_the_store_leaves_the_parents_sessions_open(
    backend: SqlStore,
) -> None:
    """Closing a connection says goodbye to the server (PostgreSQL's Terminate, MySQL's
    COM_QUIT), which ends the session for every process holding its socket: the parent's next
    statement failed with "server closed the connection unexpectedly" / "Lost connection"."""
    parents = _session_id(backend)

    def in_child() -> None:
        backend.projects.create("child")
        backend.close()  # as leaving ``with Client() as client:`` in the child does

    assert exit_code_in_fork(in_child) == 0
    assert backend.projects.create("parent").name == "parent"
    assert _session_id(backend) == parents


def test_a_forked_childs_sqlite_connections_are_its_own_and_configured_alike(
    sqlite_store: SqlStore,
) -> None:
    """The child starts with no pooled connection; the one it opens is set up as any (busy
    timeout, WAL, foreign keys) and its writes reach the file."""
    sqlite_store.projects.create("before")
    parent_pool = sqlite_store._db.engine.pool
    assert parent_pool.checkedin() >= 1  # type: ignore[attr-defined]

    def in_child() -> None:
        pool = sqlite_store._db.engine.pool
        assert pool is not parent_pool
        assert pool.checkedin() == 0  # type: ignore[attr-defined]
        sqlite_store.projects.create("child")

        def settings(conn: object) -> tuple[object, ...]:
            driver = conn.connection.driver_connection  # type: ignore[attr-defined]
            assert isinstance(driver, sqlite3.Connection)
            return tuple(
                driver.execute(f"PRAGMA {name}").fetchone()[0]
                for name in ("busy_timeout", "journal_mode", "foreign_keys")
            )

        busy, journal, foreign_keys = sqlite_store._db.read(settings)
        assert (busy, journal, foreign_keys) == (SQLITE_BUSY_TIMEOUT_SECONDS * 1000, "wal", 1)

    assert exit_code_in_fork(in_child) == 0
    assert sqlite_store._db.engine.pool is parent_pool
    assert sqlite_store.projects.get_by_name("child").name == "child"
