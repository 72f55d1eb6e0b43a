"""Contract: concurrent writers through separate connections (threads) stay consistent."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any, TypeVar
from uuid import UUID

import pytest
import sqlalchemy as sa

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError
from wharf.store.models import RunFilter, StepRunRecord, StepRunUpdate
from wharf.store.sql import SqlStore
from wharf.store.sql import tables as t

T = TypeVar("T")
THREADS = 6


def race(fn: Callable[[int], T], threads: int = THREADS) -> list[T | Exception]:
    """Run ``fn(i)`` in ``threads`` threads released at the same instant."""
    barrier = threading.Barrier(threads)

    def call(i: int) -> T | Exception:
        barrier.wait()
        try:
            return fn(i)
        except Exception as exc:  # collected, asserted by the caller
            return exc

    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(call, range(threads)))


def test_concurrent_get_or_create_yields_one_run(world: World) -> None:
    request = world.run_create(status=S.RUNNING, orchestrator_run_id="pod-1")
    results = race(lambda _: world.store.runs.get_or_create(request))
    assert all(isinstance(r, tuple) for r in results), results
    runs = {r[0].id for r in results if isinstance(r, tuple)}
    created = [r[1] for r in results if isinstance(r, tuple)]
    assert len(runs) == 1 and created.count(True) == 1
    assert world.store.runs.list(RunFilter(snapshot_id=world.snapshot.id)).total == 1


def test_concurrent_get_or_create_replaces_the_placeholder_once(world: World) -> None:
    placeholder = world.run()
    request = world.run_create(status=S.RUNNING, orchestrator_run_id="pod-1")
    results = race(lambda _: world.store.runs.get_or_create(request))
    assert all(isinstance(r, tuple) for r in results), results
    assert {r[0].id for r in results if isinstance(r, tuple)} == {placeholder.id}
    assert [r[1] for r in results if isinstance(r, tuple)].count(True) == 1
    (run,) = world.store.runs.list().items
    assert (run.status, run.orchestrator_run_id) == (S.RUNNING, "pod-1")


def test_concurrent_artifact_versions_are_numbered_without_gaps(world: World) -> None:
    per_thread = 4
    results = race(lambda _: [world.version("shared").version for _ in range(per_thread)])
    assert all(isinstance(r, list) for r in results), results
    numbers = sorted(n for r in results if isinstance(r, list) for n in r)
    assert numbers == list(range(1, THREADS * per_thread + 1))
    assert world.store.artifacts.list().total == 1


def test_concurrent_status_updates_apply_one_final_status(world: World) -> None:
    step = world.step()
    finals = [S.COMPLETED, S.FAILED, S.STOPPED, S.CANCELLED]
    results = race(
        lambda i: world.store.steps.update(step.id, StepRunUpdate(status=finals[i])),
        threads=len(finals),
    )
    winners = [r for r in results if not isinstance(r, Exception)]
    losers = [r for r in results if isinstance(r, Exception)]
    assert len(winners) == 1 and all(isinstance(e, IllegalTransitionError) for e in losers)
    assert world.store.steps.get(step.id).status is winners[0].status


# ----------------------------------------------------------------------------- lost heartbeats


def lost_steps(world: World, clock: FakeClock, count: int, runs: int = 1) -> list[StepRunRecord]:
    """``count`` running steps (spread over ``runs`` runs) whose heartbeat deadline has passed."""
    run_ids = [world.run(status=S.RUNNING).id for _ in range(runs)]
    steps = [world.step(run_ids[i % runs]) for i in range(count)]
    for step in steps:
        world.store.steps.update_heartbeat(step.id, 10)
    clock.advance(11)
    return [world.store.steps.get(step.id) for step in steps]


def test_concurrent_sweeps_fail_each_step_once(world: World, clock: FakeClock) -> None:
    steps = lost_steps(world, clock, 12, runs=2)
    now = clock.now
    run_id = steps[0].run_id
    results = race(lambda i: world.store.steps.fail_lost_heartbeats(now, run_id if i % 2 else None))
    assert all(isinstance(r, list) for r in results), results
    failed = [s.id for r in results if isinstance(r, list) for s in r]
    assert sorted(failed) == sorted(s.id for s in steps)  # every step, none twice
    assert {world.store.steps.get(s.id).status for s in steps} == {S.FAILED}


def test_sweeps_racing_heartbeats_agree_on_every_step(world: World, clock: FakeClock) -> None:
    steps = lost_steps(world, clock, 10)
    cutoff = clock.now
    sweepers = 3

    def act(i: int) -> list[StepRunRecord] | dict[UUID, S]:
        if i < sweepers:
            return world.store.steps.fail_lost_heartbeats(cutoff)
        order = steps if i % 2 else steps[::-1]
        return {s.id: world.store.steps.update_heartbeat(s.id, 3600).status for s in order}

    results = race(act)
    assert not [r for r in results if isinstance(r, Exception)], results
    swept = [s.id for r in results[:sweepers] if isinstance(r, list) for s in r]
    assert len(swept) == len(set(swept))
    beats = [r for r in results[sweepers:] if isinstance(r, dict)]
    for before in steps:
        after = world.store.steps.get(before.id)
        # Every beat saw the step's final status: a beat that came first saved the step (the
        # sweep then saw the new deadline), one that came after the failure changed nothing.
        assert {b[before.id] for b in beats} == {after.status}
        if after.status is S.FAILED:
            assert swept.count(before.id) == 1
            assert after.last_heartbeat == before.last_heartbeat
            assert after.heartbeat_deadline is None
        else:
            assert after.status is S.RUNNING and before.id not in swept
            assert after.heartbeat_deadline is not None and after.heartbeat_deadline > cutoff


def lock_waits(conn: sa.Connection) -> int:
    """How many transactions on this database wait for a row lock (PostgreSQL, MariaDB)."""
    if conn.dialect.name == "postgresql":
        query = (
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(conn.execute(sa.text(query)).scalar_one())
    # MariaDB's INNODB_TRX omits transactions that have not written yet (like a sweep waiting
    # in its locking read), so look for this database's sessions in InnoDB's own status.
    sessions = conn.execute(
        sa.text("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = DATABASE()")
    ).scalars()
    status = conn.execute(sa.text("SHOW ENGINE INNODB STATUS")).one()[2]
    waiting = [block for block in status.split("---TRANSACTION ") if "LOCK WAIT" in block]
    return sum(f"thread id {session}," in block for session in sessions for block in waiting)


def _wait_until_blocked(store: SqlStore, sweep: Future[list[StepRunRecord]]) -> None:
    """Return once the sweep waits for a row lock (servers); SQLite's sweep cannot even begin
    its transaction while the other writer holds the database, so there is nothing to wait for.
    """
    if store.dialect == "sqlite":
        return
    polled = threading.Event()  # never set: its wait() paces the polling
    for _ in range(3000):
        assert not sweep.done(), "the sweep did not wait for the locked step"
        with store._db.engine.connect() as conn:  # a new transaction sees fresh statistics
            if lock_waits(conn):
                return
        polled.wait(0.01)
    raise AssertionError("the sweep never waited for the locked step")


@pytest.mark.parametrize("change", ["beat", "finish"])
def test_sweep_spares_a_step_changed_while_it_waited(
    world: World, clock: FakeClock, change: str
) -> None:
    """A heartbeat (or a final status) that holds the step's row when the sweep reaches it: the
    sweep waits for it and then leaves the step alone."""
    (step,) = lost_steps(world, clock, 1)
    now = clock.now
    store = world.store
    values: dict[str, Any] = (
        {"last_heartbeat": clock(), "heartbeat_deadline": clock.now + timedelta(seconds=10)}
        if change == "beat"
        else {"status": S.COMPLETED.value, "end_time": clock(), "updated": clock.now}
    )
    with store._db.engine.connect() as conn, ThreadPoolExecutor(1) as pool:
        transaction = conn.begin()  # BEGIN IMMEDIATE on SQLite
        conn.execute(t.step_run.update().where(t.step_run.c.id == step.id).values(**values))
        sweep = pool.submit(store.steps.fail_lost_heartbeats, now)
        try:
            _wait_until_blocked(store, sweep)
        finally:
            transaction.commit()
        assert sweep.result(timeout=60) == []
    after = store.steps.get(step.id)
    assert after.status is (S.RUNNING if change == "beat" else S.COMPLETED)
    assert after.status_reason is None
