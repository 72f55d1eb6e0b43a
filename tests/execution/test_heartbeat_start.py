"""A step's process beats as it starts only when the engine allowed its attempt a startup time
(a backend's startup timeout, recorded with the attempt's first beat): the allowance then ends
as soon as the process runs, and a short local step still pays for no beat. A real SQLite store
records the beats."""

from __future__ import annotations

import pytest

from tests.store.conftest import World
from wharf.execution.heartbeat import (
    HeartbeatWorker,
    liveness_timeout_for,
    startup_allowance_granted,
)
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import StepRunRecord

INTERVAL = 60.0  # no regular beat comes during a test: every beat seen is a start beat
STARTUP = 600.0


def window(record: StepRunRecord) -> float:
    """The liveness window the record's last beat opened, in seconds."""
    assert record.last_heartbeat is not None and record.heartbeat_deadline is not None
    return (record.heartbeat_deadline - record.last_heartbeat).total_seconds()


def started_worker(world: World, record: StepRunRecord) -> tuple[HeartbeatWorker, list[float]]:
    """The step's worker, started as a step's process starts it; the timeouts it beat with."""
    beats: list[float] = []

    def beat(liveness_timeout: float) -> HeartbeatResponse:
        beats.append(liveness_timeout)
        return world.store.steps.update_heartbeat(record.id, liveness_timeout)

    worker = HeartbeatWorker("s", beat, lambda response: None, INTERVAL)
    worker.start(beat_first=startup_allowance_granted(record, INTERVAL))
    return worker, beats


def test_a_step_allowed_a_startup_time_beats_as_its_process_starts(world: World) -> None:
    step = world.step()
    world.store.steps.update_heartbeat(step.id, STARTUP)  # the engine's first beat, at submit
    record = world.store.steps.get(step.id)  # as the step's process reads it
    assert window(record) == pytest.approx(STARTUP)
    assert startup_allowance_granted(record, INTERVAL)

    worker, beats = started_worker(world, record)
    try:
        # Beaten before start() returned, i.e. before the step's user code could run: from
        # now on the usual liveness applies, not the startup allowance.
        assert beats == [liveness_timeout_for(INTERVAL)]
        after = world.store.steps.get(step.id)
        assert window(after) == pytest.approx(liveness_timeout_for(INTERVAL))
        assert after.last_heartbeat is not None and record.last_heartbeat is not None
        assert after.last_heartbeat > record.last_heartbeat
    finally:
        worker.stop()


@pytest.mark.parametrize("first", ["usual", "none"])
def test_a_step_without_a_startup_allowance_pays_for_no_start_beat(
    world: World, first: str
) -> None:
    step = world.step()
    if first == "usual":  # the engine's first beat, with no backend allowance
        world.store.steps.update_heartbeat(step.id, liveness_timeout_for(INTERVAL))
    record = world.store.steps.get(step.id)
    assert not startup_allowance_granted(record, INTERVAL)

    worker, beats = started_worker(world, record)
    try:
        assert beats == []
        assert world.store.steps.get(step.id).last_heartbeat == record.last_heartbeat
    finally:
        worker.stop()


def test_an_allowance_no_longer_than_the_usual_window_is_none(world: World) -> None:
    step = world.step()
    world.store.steps.update_heartbeat(step.id, liveness_timeout_for(INTERVAL) + 0.5)
    assert not startup_allowance_granted(world.store.steps.get(step.id), INTERVAL)
