"""Pooled connections on PostgreSQL and MariaDB: checked before use only after sitting idle.

``engine.PING_AFTER_IDLE_SECONDS`` decides: a connection idle for longer is pinged on checkout
and replaced when the server closed it; one in recent use is not pinged, so the first statement
on it fails after a restart -- and that failure invalidates the pool, so the next call works.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from wharf.core.errors import EntityNotFoundError, StoreError
from wharf.sql import engine as engine_module
from wharf.store.sql import SqlStore


def _pooled_connection_id(store: SqlStore) -> int:
    query = "SELECT CONNECTION_ID()" if store._db.is_mysql else "SELECT pg_backend_pid()"
    return int(store._db.read(lambda conn: conn.exec_driver_sql(query).scalar_one()))


def _kill(store: SqlStore, connection_id: int) -> None:
    """End one connection of ``store`` from the server side, as a server restart would."""
    killer = sa.create_engine(store._db.engine.url, poolclass=sa.NullPool)
    try:
        with killer.connect() as conn:
            if store._db.is_mysql:
                conn.exec_driver_sql(f"KILL CONNECTION {connection_id}")
            else:
                conn.exec_driver_sql(f"SELECT pg_terminate_backend({connection_id})")
    finally:
        killer.dispose()


# SQLite connections are files, not sessions a server can end: the database servers only.
SERVERS = pytest.mark.parametrize("backend_name", ["postgresql", "mariadb"])


@pytest.fixture
def server_store(backend: SqlStore) -> SqlStore:
    return backend


@SERVERS
def test_a_connection_closed_while_idle_is_replaced_unnoticed(
    server_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 0.0)
    first = _pooled_connection_id(server_store)  # the store's single pooled connection
    _kill(server_store, first)
    assert server_store.projects.create("after-restart").name == "after-restart"
    assert _pooled_connection_id(server_store) != first


@SERVERS
def test_a_connection_in_recent_use_is_not_pinged_and_fails_once(
    server_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 3600.0)
    _kill(server_store, _pooled_connection_id(server_store))
    with pytest.raises(StoreError):
        server_store.projects.create("lost")
    assert server_store.projects.create("next").name == "next"  # the pool was invalidated


@SERVERS
def test_a_lost_connection_under_a_direct_statement_is_invalidated_too(
    server_store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step-run hot path runs on the driver's cursor (``direct.py``); its failure on a
    closed connection must invalidate the pool just as ``Connection.execute``'s does."""
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 3600.0)
    missing = uuid.uuid4()
    _kill(server_store, _pooled_connection_id(server_store))
    with pytest.raises(StoreError) as raised:
        server_store.steps.get(missing)
    assert not isinstance(raised.value, EntityNotFoundError)
    with pytest.raises(EntityNotFoundError):  # answered on a new connection
        server_store.steps.get(missing)
