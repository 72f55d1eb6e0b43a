"""Reading a run's stop request at step boundaries, with a fake clock."""

from __future__ import annotations

import uuid
from typing import Any

from tests.conftest import FakeClock
from wharf.core.enums import ExecutionStatus
from wharf.execution.stop_check import StopCheck


class Runs:
    def __init__(self) -> None:
        self.status = ExecutionStatus.RUNNING
        self.reads = 0

    def get_status(self, run_id: Any) -> ExecutionStatus:
        self.reads += 1
        return self.status


class Store:
    def __init__(self) -> None:
        self.runs = Runs()


def check(interval: float) -> tuple[StopCheck, Store, FakeClock]:
    store, clock = Store(), FakeClock()
    return StopCheck(store, uuid.uuid4(), clock, interval), store, clock  # type: ignore[arg-type]


def test_without_an_interval_every_boundary_reads_the_status() -> None:
    stop, store, _ = check(0.0)
    assert [stop.requested() for _ in range(3)] == [False] * 3
    assert store.runs.reads == 3
    store.runs.status = ExecutionStatus.STOPPING
    assert stop.requested()


def test_a_read_stands_for_the_interval() -> None:
    stop, store, clock = check(0.25)
    assert not stop.requested()
    store.runs.status = ExecutionStatus.STOPPING
    clock.advance(0.2)
    assert not stop.requested()  # the last read is recent enough
    assert store.runs.reads == 1
    clock.advance(0.1)
    assert stop.requested()
    assert store.runs.reads == 2


def test_a_seen_stop_stays_seen_without_further_reads() -> None:
    stop, store, clock = check(0.0)
    store.runs.status = ExecutionStatus.STOPPED
    assert stop.requested()
    store.runs.status = ExecutionStatus.RUNNING  # cannot happen; proves no second read
    clock.advance(10)
    assert stop.requested()
    assert store.runs.reads == 1
