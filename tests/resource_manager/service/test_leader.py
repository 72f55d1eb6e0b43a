"""The scheduling lock: what a transaction reads with it is what the previous holder committed
(the state row, and what it reads after it, such as the lapsed leases)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from tests.store.contract.test_concurrency import lock_waits
from wharf.resource_manager.service import (
    ResourceManagerService,
    ServiceOptions,
    leader,
    request_store,
)
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


# -- takeovers: what counts as downtime (pure) -------------------------------------------------

T0 = datetime(2024, 1, 1, 12, tzinfo=UTC)
TEAM = ServiceOptions(sweep_interval=timedelta(seconds=30), liveness_interval=timedelta(seconds=2))
EMBEDDED = ServiceOptions(sweep_interval=timedelta(seconds=30))


def _row(leader_id: str | None, last: datetime | None) -> leader.StateRow:
    return leader.StateRow(1, 1, leader_id, 1, last, None)


def test_a_start_is_a_takeover_only_after_a_gap_of_over_three_liveness_intervals() -> None:
    """A replica starting beside a live one (its record fresh) has no downtime to give back."""
    row = _row("old", T0)
    at = T0 + timedelta(seconds=15)
    assert leader.downtime(row, "new", at, TEAM) == timedelta(seconds=15)
    second = T0 + timedelta(seconds=1)
    assert leader.downtime(row, "new", second, TEAM) is None  # a start or a live handover
    assert leader.downtime(row, "new", T0 + timedelta(seconds=6), TEAM) is None
    assert leader.downtime(row, "new", at, EMBEDDED) is None  # no timer: 30 s


def test_a_gap_of_over_three_liveness_intervals_is_an_outage_even_for_the_leader() -> None:
    row = _row("me", T0)
    assert leader.downtime(row, "me", T0 + timedelta(seconds=6), TEAM) is None
    seven = timedelta(seconds=7)
    assert leader.downtime(row, "me", T0 + seven, TEAM) == seven
    assert leader.downtime(row, "me", T0 + timedelta(hours=1), EMBEDDED) is None
    assert leader.downtime(_row(None, None), "me", T0, TEAM) is None


def test_an_extension_adds_the_downtime_to_leases_live_when_service_stopped() -> None:
    now, interval = T0 + timedelta(hours=2), timedelta(seconds=30)
    long = T0 + timedelta(hours=1)
    assert leader.extended_lease(long, T0, now, interval) == long + timedelta(hours=2)
    short = T0 + timedelta(seconds=1)
    assert leader.extended_lease(short, T0, now, interval) == now + interval
    assert leader.extended_lease(T0, T0, now, interval) is None  # lapsed while served
