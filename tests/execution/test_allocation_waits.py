"""The wait before a step's retry (``allocation_waits.wait_to_retry``) goes through the run's
injected ``wait`` whatever it is, so a fake-clocked test exercises the same path as a real run:
the wait is registered with the run's stops, and a graceful stop during it wakes it."""

from __future__ import annotations

import threading

from tests.execution.clocks import Clock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.allocation_waits import wait_to_retry
from wharf.execution.run_stop import RunStopper


def test_a_stop_during_a_fake_clocked_wait_before_a_retry_wakes_it(world: World) -> None:
    stopper = RunStopper(world.store, world.run(status=S.RUNNING).id)
    clock = Clock()
    woken_after_stop: list[bool] = []

    def wait(woken: threading.Event, seconds: float) -> None:
        assert not woken.is_set()
        stopper.stop()  # the run is stopped while its failed step waits to retry
        woken_after_stop.append(woken.is_set())
        if not woken.is_set():
            clock.sleep(seconds)

    wait_to_retry(stopper, wait, 600.0)

    assert woken_after_stop == [True]
    assert clock.sleeps == []  # the wait ended at once, not after its 600 s


def test_without_a_stop_the_wait_takes_its_whole_delay_on_the_fake_clock(world: World) -> None:
    stopper = RunStopper(world.store, world.run(status=S.RUNNING).id)
    clock = Clock()

    def wait(woken: threading.Event, seconds: float) -> None:
        if not woken.is_set():
            clock.sleep(seconds)

    wait_to_retry(stopper, wait, 30.0)
    wait_to_retry(None, wait, 5.0)  # a run with no stops (a step's own process)

    assert clock.sleeps == [30.0, 5.0]
    stopper.stop()  # a stop after the wait ended finds nothing of it registered
    assert clock.sleeps == [30.0, 5.0]
