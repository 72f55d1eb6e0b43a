"""Contract: the orchestrating process's liveness record on a run, its beats, and the
lost-orchestrator sweep (fake clock, no sleeps)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityNotFoundError
from wharf.core.ids import new_id
from wharf.store.models import OrchestratorProcess, RunUpdate, StepRunUpdate

ME = OrchestratorProcess(host="here", pid=4242, start="boot:123", liveness_timeout_seconds=30)
ELSEWHERE = OrchestratorProcess(host="there", pid=17, start="b:1", liveness_timeout_seconds=30)


def test_a_run_started_in_a_process_records_it_with_a_first_beat(
    world: World, clock: FakeClock
) -> None:
    run = world.run(status=S.RUNNING, orchestrator=ME)
    stored = world.store.runs.get(run.id)
    assert stored == run
    assert (stored.orchestrator_host, stored.orchestrator_pid, stored.orchestrator_start) == (
        "here",
        4242,
        "boot:123",
    )
    assert stored.last_heartbeat == stored.created
    assert stored.heartbeat_deadline == stored.created + timedelta(seconds=30)
    assert stored.stop_forced is False
    # A placeholder is not running anywhere yet: it records no process.
    placeholder = world.run(orchestrator=ME)
    assert placeholder.orchestrator_host is None and placeholder.heartbeat_deadline is None


def test_replacing_a_placeholder_records_the_process(world: World) -> None:
    placeholder = world.run()
    run, created = world.store.runs.get_or_create(
        world.run_create(status=S.RUNNING, orchestrator_run_id="o-1", orchestrator=ME)
    )
    assert created and run.id == placeholder.id
    assert world.store.runs.get(run.id).orchestrator_pid == 4242
    assert run.heartbeat_deadline is not None


def test_a_beat_moves_the_deadline_and_reports_the_status(world: World, clock: FakeClock) -> None:
    runs = world.store.runs
    run = world.run(status=S.RUNNING)
    response = runs.update_heartbeat(run.id, ME)
    assert (response.run_id, response.status, response.stop_forced) == (run.id, S.RUNNING, False)
    beaten = runs.get(run.id)
    assert beaten.orchestrator_host == "here"
    assert beaten.last_heartbeat == clock.now
    assert beaten.heartbeat_deadline == clock.now + timedelta(seconds=30)
    clock.advance(10)
    runs.update_heartbeat(run.id, ME.model_copy(update={"liveness_timeout_seconds": 0.5}))
    assert runs.get(run.id).heartbeat_deadline == clock.now + timedelta(milliseconds=500)
    with pytest.raises(EntityNotFoundError):
        runs.update_heartbeat(new_id(), ME)


def test_a_forced_stop_is_reported_to_the_beat(world: World) -> None:
    runs = world.store.runs
    run = world.run(status=S.RUNNING, orchestrator=ME)
    stopping = runs.update(run.id, RunUpdate(status=S.STOPPING))
    assert stopping.stop_forced is False
    forced = runs.update(run.id, RunUpdate(status=S.STOPPING, stop_forced=True))
    assert forced.stop_forced is True and runs.get(run.id).stop_forced is True
    assert runs.update_heartbeat(run.id, ME).stop_forced is True
    # Only a stopping run takes it.
    other = world.run(status=S.RUNNING)
    assert runs.update(other.id, RunUpdate(stop_forced=True)).stop_forced is False


@pytest.mark.parametrize("final", [S.COMPLETED, S.FAILED, S.STOPPED])
def test_an_ended_run_has_no_deadline_and_ignores_beats(world: World, final: S) -> None:
    runs = world.store.runs
    run = world.run(status=S.RUNNING, orchestrator=ME)
    ended = runs.update(run.id, RunUpdate(status=S.STOPPING if final is S.STOPPED else final))
    if final is S.STOPPED:
        ended = runs.update(run.id, RunUpdate(status=S.STOPPED))
    assert ended.heartbeat_deadline is None and runs.get(run.id).heartbeat_deadline is None
    assert runs.update_heartbeat(run.id, ME).status is final
    assert runs.get(run.id).heartbeat_deadline is None


def test_a_lost_run_and_its_steps_end_when_they_were_last_seen(
    world: World, clock: FakeClock
) -> None:
    """Not when the sweep noticed: their durations are the time they were seen to live. A step
    still in flight lived as long as its run's process: it ends when the run was last seen
    (here its last step's end), not at its own last beat."""
    runs, steps = world.store.runs, world.store.steps
    lost = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    clock.advance(5)
    runs.update_heartbeat(lost.id, ELSEWHERE)
    run_beat = clock.now
    queued = world.step(lost.id, status=S.QUEUED)
    clock.advance(3)
    running = world.step(lost.id)
    clock.advance(2)
    steps.update_heartbeat(running.id, 300)
    step_beat = clock.now
    clock.advance(2)
    done = world.step(lost.id)
    done_at = steps.update(done.id, StepRunUpdate(status=S.COMPLETED)).end_time
    clock.advance(600)
    [swept] = runs.fail_lost_orchestrators(clock.now)
    assert swept.run.end_time == runs.get(lost.id).end_time == done_at  # its last step's end
    assert {s.id: s.end_time for s in swept.steps} == {running.id: done_at, queued.id: done_at}
    assert steps.get(running.id).end_time == done_at > step_beat > run_beat


def test_sweep_candidates_are_expired_runs_and_runs_of_the_host(
    world: World, clock: FakeClock
) -> None:
    runs = world.store.runs
    here = world.run(status=S.RUNNING, orchestrator=ME)
    there = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    world.run(status=S.RUNNING)  # records no process: never a candidate
    ended = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    runs.update(ended.id, RunUpdate(status=S.FAILED))
    assert [r.id for r in runs.list_sweep_candidates(clock.now, "here")] == [here.id]
    assert runs.list_sweep_candidates(clock.now, "nowhere") == []
    later = clock.now + timedelta(seconds=31)
    assert [r.id for r in runs.list_sweep_candidates(later)] == [here.id, there.id]


def test_the_sweep_fails_runs_past_their_deadline_and_their_unfinished_steps(
    world: World, clock: FakeClock
) -> None:
    runs, steps = world.store.runs, world.store.steps
    lost = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    running = world.step(lost.id)
    queued = world.step(lost.id, status=S.QUEUED)
    steps.update_heartbeat(running.id, 300)
    done = world.step(lost.id)
    steps.update(done.id, StepRunUpdate(status=S.COMPLETED))
    clock.advance(10)
    alive = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    stopping = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    runs.update(stopping.id, RunUpdate(status=S.STOPPING))
    clock.advance(25)  # past the first run's deadline only
    assert runs.fail_lost_orchestrators(clock.now - timedelta(seconds=6)) == []
    swept = runs.fail_lost_orchestrators(clock.now)
    assert [r.run.id for r in swept] == [lost.id]
    ended = runs.get(lost.id)
    assert ended == swept[0].run
    assert ended.status is S.FAILED and ended.end_time is not None
    assert (
        ended.status_reason == f"orchestrator lost (last seen {lost.created:%Y-%m-%d %H:%M:%S} UTC)"
    )
    assert ended.heartbeat_deadline is None
    assert {s.id for s in swept[0].steps} == {running.id, queued.id}
    for step_id in (running.id, queued.id):
        step = steps.get(step_id)
        assert step.status is S.FAILED and step.heartbeat_deadline is None
        assert step.status_reason is not None and "orchestrator lost" in step.status_reason
    assert steps.get(done.id).status is S.COMPLETED
    assert runs.get(alive.id).status is S.RUNNING
    assert runs.fail_lost_orchestrators(clock.now) == []  # each run is ended once
    clock.advance(10)
    assert [r.run.id for r in runs.fail_lost_orchestrators(clock.now)] == [
        alive.id,
        stopping.id,
    ]
    assert runs.get(stopping.id).status is S.FAILED


def test_the_sweep_ends_orphaned_runs_at_once(world: World, clock: FakeClock) -> None:
    runs = world.store.runs
    orphan = world.run(status=S.RUNNING, orchestrator=ME)
    alive = world.run(status=S.RUNNING, orchestrator=ME)
    unrecorded = world.run(status=S.RUNNING)
    finished = world.run(status=S.RUNNING, orchestrator=ME)
    runs.update(finished.id, RunUpdate(status=S.COMPLETED))
    swept = runs.fail_lost_orchestrators(clock.now, [orphan.id, unrecorded.id, finished.id])
    assert [r.run.id for r in swept] == [orphan.id]
    assert runs.get(orphan.id).status is S.FAILED
    assert runs.get(alive.id).status is S.RUNNING
    assert runs.get(unrecorded.id).status is S.RUNNING  # no liveness record: not for a sweep
    assert runs.get(finished.id).status is S.COMPLETED


def test_a_step_pid_is_recorded_with_its_host_and_start(world: World) -> None:
    steps = world.store.steps
    step = world.step()
    updated = steps.update(step.id, StepRunUpdate(pid=99, pid_host="here", pid_start="b:5"))
    assert (updated.pid, updated.pid_host, updated.pid_start) == (99, "here", "b:5")
    assert steps.get(step.id) == updated


def test_the_sweep_spares_runs_the_caller_saw_alive(world: World, clock: FakeClock) -> None:
    runs = world.store.runs
    late = world.run(status=S.RUNNING, orchestrator=ME)
    lost = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    clock.advance(60)
    swept = runs.fail_lost_orchestrators(clock.now, spared=[late.id])
    assert [r.run.id for r in swept] == [lost.id]
    assert runs.get(late.id).status is S.RUNNING
    # Orphaned and spared at once: spared wins (the caller's latest word is that it lives).
    assert runs.fail_lost_orchestrators(clock.now, [late.id], [late.id]) == []


def test_the_sweep_ends_a_pending_retry_failed_and_leaves_retried_attempts(
    world: World, clock: FakeClock
) -> None:
    """A step waiting to retry when its run was lost: its last attempt (retrying) ends failed,
    naming its own failure; an earlier attempt that was retried stays retrying (final)."""
    runs, steps = world.store.runs, world.store.steps
    lost = world.run(status=S.RUNNING, orchestrator=ELSEWHERE)
    first = world.step(lost.id, name="flaky", attempt=1)
    first = steps.update(first.id, StepRunUpdate(status=S.RETRYING, status_reason="boom 1"))
    second = world.step(lost.id, name="flaky", attempt=2)
    second = steps.update(second.id, StepRunUpdate(status=S.RETRYING, status_reason="boom 2"))
    clock.advance(600)
    [swept] = runs.fail_lost_orchestrators(clock.now)
    assert [s.id for s in swept.steps] == [second.id]
    assert steps.get(first.id) == first
    ended = steps.get(second.id)
    assert ended.status is S.FAILED and ended.end_time == second.end_time
    assert ended.status_reason is not None
    assert "orchestrator lost" in ended.status_reason
    assert "retry never started" in ended.status_reason and "boom 2" in ended.status_reason
