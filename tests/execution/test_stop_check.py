"""Reading a run's stop request once its steps are done."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StoreUnavailableError
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


def check() -> tuple[StopCheck, Store]:
    store = Store()
    return StopCheck(store, uuid.uuid4()), store  # type: ignore[arg-type]


def test_each_check_reads_the_status_until_a_stop_is_seen() -> None:
    stop, store = check()
    assert [stop.requested() for _ in range(3)] == [False] * 3
    assert store.runs.reads == 3
    store.runs.status = ExecutionStatus.STOPPING
    assert stop.requested()


def test_a_seen_stop_stays_seen_without_further_reads() -> None:
    stop, store = check()
    store.runs.status = ExecutionStatus.STOPPED
    assert stop.requested()
    store.runs.status = ExecutionStatus.RUNNING  # cannot happen; proves no second read
    assert stop.requested()
    assert store.runs.reads == 1


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def test_a_read_waits_out_a_store_outage_shorter_than_its_patience() -> None:
    store = Store()
    down = [StoreUnavailableError("restarting")] * 3
    real = store.runs.get_status

    def flaky(run_id: Any) -> ExecutionStatus:
        if down:
            raise down.pop()
        return real(run_id)

    store.runs.get_status = flaky  # type: ignore[method-assign]
    clock = Clock()
    stop = StopCheck(store, uuid.uuid4(), patience=60, clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert stop.requested() is False
    assert store.runs.reads == 1


def test_without_patience_an_outage_is_raised() -> None:
    store = Store()

    def down(run_id: Any) -> ExecutionStatus:
        raise StoreUnavailableError("down")

    store.runs.get_status = down  # type: ignore[method-assign]
    with pytest.raises(StoreUnavailableError):
        StopCheck(store, uuid.uuid4()).requested()  # type: ignore[arg-type]
