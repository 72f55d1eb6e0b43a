"""Reading a run's stop request once its steps are done."""

from __future__ import annotations

import uuid
from typing import Any

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
