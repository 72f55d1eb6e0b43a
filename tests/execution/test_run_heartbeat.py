"""The orchestrating process's heartbeat and forced stops from another process: real processes,
a real SQLite store."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus as S
from wharf.core.paging import MAX_PAGE_SIZE
from wharf.execution import started_here
from wharf.execution.local_process import LocalProcessBackend
from wharf.execution.run_heartbeat import RunHeartbeat, orchestrator_process, retry_delay
from wharf.execution.run_stop import stop_recorded_steps
from wharf.store.models import RunUpdate, StepRunFilter, StepRunUpdate
from wharf.store.process_identity import start_token, this_host

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
PATIENCE = 60.0  # seconds a beat may take on a loaded machine


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for child in started:
        if child.poll() is None:
            child.kill()
        child.wait()


def sleeper(started: list[subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    started.append(child)
    return child


def test_a_forced_stop_from_elsewhere_ends_only_processes_this_machine_started(
    world: World, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    run = world.run(status=S.RUNNING)
    other_host, reused, ours = (sleeper(sleepers) for _ in range(3))
    recorded = {
        other_host: ("another-machine", start_token(other_host.pid)),
        reused: (this_host(), f"{start_token(reused.pid)}0"),  # the pid now names another
        ours: (this_host(), start_token(ours.pid)),
    }
    steps = []
    for child, (host, token) in recorded.items():
        step = world.step(run.id)
        steps.append(step.id)
        world.store.steps.update(
            step.id, StepRunUpdate(pid=child.pid, pid_host=host, pid_start=token)
        )
        # As this machine's backend would have, for each: only the records differ.
        started_here.record(step.id, child.pid, start_token(child.pid))
    stopped = stop_recorded_steps(world.store, run.id, lambda step: LocalProcessBackend())
    assert [step.pid for step in stopped] == [ours.pid]
    assert ours.wait(timeout=30) == -9
    assert other_host.poll() is None and reused.poll() is None
    for step_id in steps:
        started_here.forget(step_id)


def test_the_orchestrator_beats_and_ends_its_attempts_once_when_the_stop_is_forced(
    world: World,
) -> None:
    store = world.store
    run = world.run(status=S.RUNNING, orchestrator=orchestrator_process(0.05))
    forced = threading.Semaphore(0)
    first = store.runs.get(run.id).last_heartbeat
    heartbeat = RunHeartbeat.start(store, run.id, 0.05, on_forced=forced.release)
    try:
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != first, "a beat", PATIENCE)
        store.runs.update(run.id, RunUpdate(status=S.STOPPING))
        beaten = store.runs.get(run.id).last_heartbeat
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != beaten, "a beat", PATIENCE)
        assert not forced.acquire(blocking=False)  # a plain stop ends nothing
        store.runs.update(run.id, RunUpdate(status=S.STOPPING, stop_forced=True))
        assert forced.acquire(timeout=60)
        beaten = store.runs.get(run.id).last_heartbeat
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != beaten, "a beat", PATIENCE)
        assert not forced.acquire(blocking=False)  # once
    finally:
        heartbeat.close()


def test_a_forced_stop_ends_a_run_no_process_beats_for(world: World) -> None:
    """A run recorded before runs had a liveness record: nothing would ever end it."""
    from wharf.execution.run_heartbeat import UNATTENDED_REASON, end_unattended

    store = world.store
    run = world.run(status=S.RUNNING)
    running, queued = world.step(run.id), world.step(run.id, status=S.QUEUED)
    done = world.step(run.id)
    store.steps.update(done.id, StepRunUpdate(status=S.COMPLETED))
    assert end_unattended(store, run) == run  # not asked to stop: left alone
    stopping = store.runs.update(run.id, RunUpdate(status=S.STOPPING, stop_forced=True))
    ended = end_unattended(store, stopping)
    assert (ended.status, ended.status_reason) == (S.STOPPED, UNATTENDED_REASON)
    assert store.runs.get(run.id) == ended
    for step_id in (running.id, queued.id):
        assert store.steps.get(step_id).status is S.STOPPED
    assert store.steps.get(done.id).status is S.COMPLETED
    beaten = world.run(status=S.RUNNING, orchestrator=orchestrator_process(15))
    beaten = store.runs.update(beaten.id, RunUpdate(status=S.STOPPING, stop_forced=True))
    assert end_unattended(store, beaten) == beaten  # its orchestrator ends it (or the sweep)


def test_a_forced_stop_from_elsewhere_reaches_every_step_of_a_run_with_more_than_a_page(
    world: World,
) -> None:
    """More step runs than one listing page holds (``MAX_PAGE_SIZE``): every unfinished one is
    offered to its backend, and a run no process beats for ends with none left running."""
    from wharf.execution.run_heartbeat import end_unattended

    store = world.store
    run = world.run(status=S.RUNNING)
    unfinished = {world.step(run.id, name=f"step-{i}").id for i in range(MAX_PAGE_SIZE + 1)}
    offered: list[object] = []
    assert stop_recorded_steps(store, run.id, lambda step: offered.append(step.id)) == []
    assert sorted(offered) == sorted(unfinished)  # each once
    stopping = store.runs.update(run.id, RunUpdate(status=S.STOPPING, stop_forced=True))
    assert end_unattended(store, stopping).status is S.STOPPED
    assert store.steps.list(StepRunFilter(run_id=run.id, status=S.RUNNING)).total == 0


def test_a_failed_beat_is_retried_sooner_so_one_lands_soon_after_an_outage() -> None:
    """A quarter of the interval after a failure, then half, then every interval: never later
    than the regular beat, and the liveness timeout (five intervals and a second) is not
    spent waiting for the next regular beat after the store is back."""
    assert [retry_delay(8.0, failures) for failures in range(5)] == [8.0, 2.0, 4.0, 8.0, 8.0]


def test_a_beat_that_finds_the_run_stopping_tells_it_once(world: World) -> None:
    """``wharf runs stop`` from another process: the orchestrating process stops the run here
    too (its waits for resources and inline steps are interrupted), once."""
    store = world.store
    run = world.run(status=S.RUNNING, orchestrator=orchestrator_process(0.05))
    stopping = threading.Semaphore(0)
    first = store.runs.get(run.id).last_heartbeat
    heartbeat = RunHeartbeat.start(store, run.id, 0.05, on_stopping=stopping.release)
    try:
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != first, "a beat", PATIENCE)
        assert not stopping.acquire(blocking=False)  # running: nothing to tell
        store.runs.update(run.id, RunUpdate(status=S.STOPPING))
        assert stopping.acquire(timeout=60)
        beaten = store.runs.get(run.id).last_heartbeat
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != beaten, "a beat", PATIENCE)
        assert not stopping.acquire(blocking=False)  # once
    finally:
        heartbeat.close()
