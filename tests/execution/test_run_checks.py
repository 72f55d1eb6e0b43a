"""The store checks shared by a run's waiting isolated attempts (``RunChecks``): one sweep per
run per interval answers every waiting step, by step run id; the sweep fails lost steps.

A real SQLite store; the monotonic clock that paces the sweeps is a counter the tests move."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from uuid import UUID

from tests.store.conftest import World
from wharf.artifacts.materializers.registry import default_registry
from wharf.artifacts.store import LocalArtifactStore
from wharf.core.enums import ExecutionStatus
from wharf.execution.run_checks import RunChecks
from wharf.execution.services import RunServices, utc_now
from wharf.store.models import StepRunRecord, StepRunUpdate

INTERVAL = 15.0


class Ticks:
    """A monotonic clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def checks_for(
    world: World, tmp_path: Path, run_id: UUID, ticks: Ticks, ahead: float = 0.0
) -> RunChecks:
    def clock() -> datetime:
        return utc_now() + timedelta(seconds=ahead)

    services = RunServices(
        store=world.store,
        artifact_store=LocalArtifactStore(tmp_path / "artifacts"),
        materializers=default_registry(),
        project_id=world.project.id,
        clock=clock,
        heartbeat_interval=INTERVAL,
    )
    return RunChecks(services, run_id, INTERVAL, monotonic=ticks)


def complete(world: World, step: StepRunRecord) -> None:
    world.store.steps.update(step.id, StepRunUpdate(status=ExecutionStatus.COMPLETED))


def test_one_sweep_per_interval_answers_every_waiting_step(world: World, tmp_path: Path) -> None:
    run = world.run(status=ExecutionStatus.RUNNING)
    steps = [world.step(run.id) for _ in range(3)]
    ticks = Ticks()
    checks = checks_for(world, tmp_path, run.id, ticks)
    for step in steps:
        checks.add(step)
    complete(world, steps[0])

    assert [checks.finished(step) for step in steps] == [True, False, False]
    assert checks.sweeps == 1

    complete(world, steps[1])
    ticks.now += INTERVAL / 2  # within the interval: the last sweep's answer
    assert not checks.finished(steps[1])
    assert checks.sweeps == 1

    ticks.now += INTERVAL / 2
    assert checks.finished(steps[1])
    assert not checks.finished(steps[2])
    assert checks.sweeps == 2


def test_a_sweep_fails_the_steps_of_the_run_whose_heartbeat_was_lost(
    world: World, tmp_path: Path
) -> None:
    run = world.run(status=ExecutionStatus.RUNNING)
    lost, elsewhere = world.step(run.id), world.step()  # the second one in another run
    for step in (lost, elsewhere):
        world.store.steps.update_heartbeat(step.id, 1.0)
    checks = checks_for(world, tmp_path, run.id, Ticks(), ahead=3600)
    checks.add(lost)

    assert checks.finished(lost)
    failed = world.store.steps.get(lost.id)
    assert failed.status is ExecutionStatus.FAILED
    assert (failed.status_reason or "").startswith("Heartbeat lost"), failed.status_reason
    assert world.store.steps.get(elsewhere.id).status is ExecutionStatus.RUNNING


def test_an_earlier_attempt_of_the_same_step_is_not_this_attempt(
    world: World, tmp_path: Path
) -> None:
    run = world.run(status=ExecutionStatus.RUNNING)
    world.step(run.id, name="train", status=ExecutionStatus.FAILED)
    current = world.step(run.id, name="train", attempt=2)
    ticks = Ticks()
    checks = checks_for(world, tmp_path, run.id, ticks)
    checks.add(current)

    assert not checks.finished(current)
    complete(world, current)
    ticks.now += INTERVAL
    assert checks.finished(current)


def test_steps_no_longer_waiting_are_not_read(world: World, tmp_path: Path) -> None:
    run = world.run(status=ExecutionStatus.RUNNING)
    gone, waiting = world.step(run.id), world.step(run.id)
    ticks = Ticks()
    checks = checks_for(world, tmp_path, run.id, ticks)
    checks.add(gone)
    checks.add(waiting)
    checks.remove(gone)
    complete(world, gone)

    assert not checks.finished(gone)
    assert not checks.idle
    checks.remove(waiting)
    assert checks.idle
