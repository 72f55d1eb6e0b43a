"""The scheduling lock: what a transaction reads with it is what the previous holder committed
(the state row, and what it reads after it, such as the lapsed leases)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa

from tests.store.contract.test_concurrency import lock_waits
from wharf.resource_manager.service import ResourceManagerService, leader, request_store
from wharf.resource_manager.service import tables as t


def _wait_until_blocked(rm: ResourceManagerService) -> None:
    """Return once another transaction waits for a lock (servers). SQLite's waiter cannot even
    begin its transaction while the holder has the database: nothing to wait for."""
    if rm.dialect == "sqlite":
        return
    paced = threading.Event()  # never set: its wait() paces the polling
    for _ in range(3000):
        with rm._db.engine.connect() as conn:
            if lock_waits(conn):
                return
        paced.wait(0.01)
    raise AssertionError("the second transaction never waited for the scheduling lock")


def test_what_is_read_with_the_lock_is_what_its_last_holder_committed(
    rm: ResourceManagerService,
) -> None:
    db = rm._db
    holding, release = threading.Event(), threading.Event()

    def holder(conn: sa.Connection) -> None:
        leader.acquire(conn)
        conn.execute(sa.update(t.state).values(state_version=41))
        holding.set()
        release.wait(30)

    def waiter(conn: sa.Connection) -> tuple[leader.StateRow, list[object], leader.StateRow]:
        return leader.acquire(conn), request_store.lapsed(conn, rm.now()), leader.read(conn)

    with ThreadPoolExecutor(2) as pool:
        held = pool.submit(db.write, holder)
        assert holding.wait(30)
        waited = pool.submit(db.write, waiter)
        _wait_until_blocked(rm)
        assert not waited.done()
        release.set()
        held.result(30)
        row, lapsed, again = waited.result(30)
    assert row.state_version == 41
    assert again.state_version == 41 and lapsed == []
