"""What a step's own process reads as it starts (:func:`wharf.execution.entrypoint.read_step`:
its step run, run, snapshot, artifact store and inputs): read through a store outage shorter
than its patience (a pod may start while the workspace server is briefly down), any other
error at once (fake store and clock, no sleeps)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any
from uuid import uuid4

import pytest

from tests.execution.clocks import Clock
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError, StoreUnavailableError
from wharf.execution.entrypoint import StepStart, read_step


def answering(value: object, failures: int = 0) -> Any:
    """A read that fails ``failures`` times as an unreachable server would, then answers."""
    left = [failures]

    def read(_: object) -> object:
        if left[0]:
            left[0] -= 1
            raise StoreUnavailableError("Cannot reach the Wharf server: connection refused")
        return value

    return read


def fake_store(
    *, step_failures: int = 0, run_failures: int = 0, input_failures: int = 0, stack: bool = True
) -> Any:
    component = SimpleNamespace(name="remote")
    snapshot = SimpleNamespace(id=uuid4(), stack_id=uuid4() if stack else None)
    stack_record = SimpleNamespace(components={ComponentType.ARTIFACT_STORE: uuid4()})
    run = SimpleNamespace(snapshot_id=snapshot.id)
    record = SimpleNamespace(run_id=uuid4(), inputs={"data": uuid4()})
    version = SimpleNamespace(name="data-version")
    return SimpleNamespace(
        steps=SimpleNamespace(get=answering(record, step_failures)),
        runs=SimpleNamespace(get=answering(run, run_failures)),
        snapshots=SimpleNamespace(get=answering(snapshot)),
        stacks=SimpleNamespace(
            get_stack=answering(stack_record), get_component=answering(component)
        ),
        artifacts=SimpleNamespace(get_version=answering(version, input_failures)),
        expected=StepStart(record, run, snapshot, component, {"data": version}),
    )


def test_a_step_process_started_during_an_outage_waits_for_the_store() -> None:
    clock = Clock()
    store = fake_store(step_failures=4, run_failures=1)  # down at start, and once more after
    assert read_step(store, uuid4(), 51.0, clock=clock, sleep=clock.sleep) == store.expected
    assert clock.sleeps == [0.25, 0.5, 1.0, 2.0, 4.0]


def test_an_outage_while_it_reads_its_inputs_is_waited_out_too() -> None:
    clock = Clock()
    store = fake_store(input_failures=2)
    assert read_step(store, uuid4(), 51.0, clock=clock, sleep=clock.sleep) == store.expected
    assert clock.sleeps == [0.25, 0.5]


def test_an_outage_longer_than_the_patience_fails_the_start() -> None:
    clock = Clock()
    store = fake_store(step_failures=1000)
    with pytest.raises(StoreUnavailableError):
        read_step(store, uuid4(), 21.0, clock=clock, sleep=clock.sleep)
    assert sum(clock.sleeps) == pytest.approx(21.0)


def test_a_snapshot_without_a_stack_fails_at_once() -> None:
    clock = Clock()
    with pytest.raises(InputError, match="records no stack"):
        read_step(fake_store(stack=False), uuid4(), 51.0, clock=clock, sleep=clock.sleep)
    assert clock.sleeps == []
