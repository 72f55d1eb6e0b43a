"""The heartbeat's statements on each backend: what they answer, and what they leave behind.

``update_heartbeat`` runs outside a transaction (``Database.autocommit``); on PostgreSQL it is
one ``UPDATE ... RETURNING`` whose commit does not wait for the WAL flush. These tests check that
none of this leaks into the pooled connections the next transaction gets.
"""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from tests.store.conftest import make_world
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityNotFoundError
from wharf.store.models import StepRunUpdate
from wharf.store.sql import SqlStore


def test_the_answer_carries_the_resource_request_of_live_and_final_steps(
    backend: SqlStore,
) -> None:
    world = make_world(backend)
    steps = backend.steps
    request_id = uuid.uuid4()
    step = world.step()
    steps.update(step.id, StepRunUpdate(resource_request_id=request_id))
    beat = steps.update_heartbeat(step.id, 30)
    assert (beat.status, beat.run_status, beat.resource_request_id) == (
        S.RUNNING,
        S.RUNNING,
        request_id,
    )
    assert world.step().id != step.id  # another step: its answer names no request
    steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
    final = steps.update_heartbeat(step.id, 30)  # not beaten: answered by the second read
    assert (final.status, final.resource_request_id) == (S.COMPLETED, request_id)
    assert steps.get(step.id).heartbeat_deadline is None
    with pytest.raises(EntityNotFoundError):
        steps.update_heartbeat(uuid.uuid4(), 30)


def test_many_beats_on_one_pool_leave_write_transactions_intact(backend: SqlStore) -> None:
    """Beats and transactions alternate on the same pooled connections: a failed write
    transaction still rolls back completely afterwards."""
    world = make_world(backend)
    step = world.step()
    for _ in range(20):
        backend.steps.update_heartbeat(step.id, 30)

    class Boom(Exception):
        pass

    def rename_then_fail(conn: object) -> None:
        _rename(conn, step.id)
        raise Boom

    before = backend.steps.get(step.id)
    for _ in range(3):
        with pytest.raises(Boom):
            backend._db.write(rename_then_fail)
    assert backend.steps.get(step.id).name == before.name  # rolled back
    backend.steps.update_heartbeat(step.id, 30)


def _rename(conn: object, step_id: uuid.UUID) -> None:
    from sqlalchemy import Connection

    from wharf.store.sql import tables as t

    assert isinstance(conn, Connection)
    conn.execute(t.step_run.update().where(t.step_run.c.id == step_id).values(name="renamed"))


@pytest.mark.parametrize("backend_name", ["postgresql"])  # a PostgreSQL setting
def test_postgresql_relaxes_only_the_beats_own_commit(backend: SqlStore, backend_name: str) -> None:
    world = make_world(backend)
    step = world.step()
    engine = backend._db.engine
    pool_size = engine.pool.size()  # type: ignore[attr-defined]
    for _ in range(pool_size + 2):
        backend.steps.update_heartbeat(step.id, 30)
    for _ in range(pool_size + 2):
        setting = backend._db.read(
            lambda conn: conn.exec_driver_sql("SHOW synchronous_commit").scalar()
        )
        assert setting == "on"


def test_sqlite_beats_hold_no_lock_once_answered(sqlite_store: SqlStore) -> None:
    world = make_world(sqlite_store)
    step = world.step()
    path = sqlite_store.url.removeprefix("sqlite:///")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        sqlite_store.steps.update_heartbeat(step.id, 30)
        other.execute("BEGIN IMMEDIATE")  # would raise "database is locked"
        other.execute("ROLLBACK")

        def write_lock_taken_first(conn: object) -> str:
            try:
                other.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as exc:
                return str(exc)
            other.execute("ROLLBACK")
            return "acquired"

        # The pooled connection the beat used still starts write transactions with the lock.
        for _ in range(3):
            assert sqlite_store._db.write(write_lock_taken_first) == "database is locked"
    finally:
        other.close()
