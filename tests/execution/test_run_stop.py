"""A graceful or forced stop in the orchestrating process: what :class:`RunStopper`
interrupts, records and returns (a real SQLite store)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import CredentialsRefusedError, PermissionDeniedError
from wharf.core.paging import MAX_PAGE_SIZE
from wharf.execution.allocation import WaitStop
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.run_stop import (
    FORCED_REASON,
    FORCED_RUN_REASON,
    FORCED_WAKE_SECONDS,
    STOP_REASON,
    ForcedStop,
    RunStopper,
)
from wharf.store.models import RunUpdate, StepRunUpdate


def test_a_stop_interrupts_the_waits_for_resources_registered_and_those_to_come(
    world: World,
) -> None:
    run = world.run(status=S.RUNNING)
    stopper = RunStopper(world.store, run.id)
    waiting, left = WaitStop(), WaitStop()
    stopper.add_region(waiting)
    stopper.add_region(left)
    stopper.remove_region(left)  # its wait ended before the stop
    stopper.stop()
    assert waiting.reason == STOP_REASON
    assert left.reason is None
    later = WaitStop()
    stopper.add_region(later)  # a wait that begins once the run is stopping ends at once
    assert later.reason == STOP_REASON
    assert world.store.runs.get(run.id).status is S.STOPPING


def test_a_stop_recorded_elsewhere_is_not_written_again(world: World) -> None:
    run = world.run(status=S.RUNNING)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    before = world.store.runs.get(run.id)
    stopper = RunStopper(world.store, run.id)
    waiting = WaitStop()
    stopper.add_region(waiting)
    stopper.stop(recorded=True)
    assert waiting.reason == STOP_REASON
    assert world.store.runs.get(run.id) == before


def test_a_forced_stop_returns_the_steps_it_ended_as_recorded(world: World) -> None:
    """The run loop tells the progress reporter of them (no waiter is left to): a step stuck
    in its code, and one waiting to start, end stopped; a finished one is left as it was."""
    run = world.run(status=S.RUNNING)
    stuck = world.step(run.id, name="stuck", status=S.RUNNING)
    queued = world.step(run.id, name="queued", status=S.QUEUED)
    done = world.step(run.id, name="done", status=S.RUNNING)
    world.store.steps.update(done.id, StepRunUpdate(status=S.COMPLETED))
    stopper = RunStopper(world.store, run.id)
    outcome = stopper.force()
    assert {step.id: step.status for step in outcome.steps} == {
        stuck.id: S.STOPPED,
        queued.id: S.STOPPED,
    }
    assert all(step.status_reason == FORCED_REASON for step in outcome.steps)
    assert FORCED_REASON == "Force-stopped on request."  # ended at once: no grace ran out
    assert all(step.end_time is not None for step in outcome.steps)
    assert world.store.steps.get(done.id).status is S.COMPLETED
    assert outcome.final_status() == (S.STOPPED, FORCED_RUN_REASON)


@pytest.mark.parametrize("graceful_first", [False, True])
def test_a_forced_stop_is_recorded_forced_and_the_run_ends_saying_so(
    world: World, graceful_first: bool
) -> None:
    """A second Ctrl-C (``force``; after a first one, ``stop``, or not): the run's stop is
    recorded forced, so that its end says so (``runs.finish`` decides the reason of a stopping
    run), not "Stopped on request." as a graceful stop's."""
    run = world.run(status=S.RUNNING)
    stopper = RunStopper(world.store, run.id)
    if graceful_first:
        stopper.stop()
    stopper.force()
    assert world.store.runs.get(run.id).stop_forced
    ended = world.store.runs.finish(run.id, *stopper.force().final_status())
    assert (ended.status, ended.status_reason) == (S.STOPPED, FORCED_RUN_REASON)
    assert FORCED_RUN_REASON != STOP_REASON


def test_a_refused_credential_stops_the_run_here_without_writing(world: World) -> None:
    """The store accepts no write any more: waits and inline attempts are interrupted, the run
    is left as recorded, and the first refusal is kept for the run loop to report."""
    run = world.run(status=S.RUNNING)
    before = world.store.runs.get(run.id)
    stopper = RunStopper(world.store, run.id)
    waiting = WaitStop()
    stopper.add_region(waiting)
    first = CredentialsRefusedError("The API key behind this token has been revoked.")
    stopper.refuse(first)
    stopper.refuse(PermissionDeniedError("Members only."))
    assert stopper.refusal is first and stopper.stopping and stopper.forced
    assert waiting.reason == STOP_REASON
    later = WaitStop()
    stopper.add_region(later)
    assert later.reason == STOP_REASON
    assert world.store.runs.get(run.id) == before


def test_a_forced_stop_ends_a_pending_retry_and_leaves_retried_attempts(world: World) -> None:
    """A step waiting to retry when the stop is forced: its last attempt (retrying) ends
    stopped; an earlier attempt that was retried stays retrying (final)."""
    run = world.run(status=S.RUNNING)
    steps = world.store.steps
    retried = world.step(run.id, name="flaky", attempt=1)
    retried = steps.update(retried.id, StepRunUpdate(status=S.RETRYING, status_reason="1"))
    pending = world.step(run.id, name="flaky", attempt=2)
    steps.update(pending.id, StepRunUpdate(status=S.RETRYING, status_reason="2"))
    outcome = RunStopper(world.store, run.id).force()
    assert [(step.id, step.status) for step in outcome.steps] == [(pending.id, S.STOPPED)]
    assert steps.get(retried.id) == retried


def test_steps_in_flight_end_with_the_status_and_reason_given(world: World) -> None:
    """After an internal error the run loop ends them failed with the run's reason."""
    run = world.run(status=S.RUNNING)
    running = world.step(run.id, name="running", status=S.RUNNING)
    waiting = world.step(run.id, name="waiting", status=S.RUNNING)
    world.store.steps.update(waiting.id, StepRunUpdate(status=S.RETRYING))
    ended = RunStopper(world.store, run.id).end_unfinished_steps(S.FAILED, "The loop failed.")
    assert {(s.id, s.status, s.status_reason) for s in ended} == {
        (running.id, S.FAILED, "The loop failed."),
        (waiting.id, S.FAILED, "The loop failed."),
    }


def test_a_forced_stop_ends_every_step_of_a_run_with_more_than_a_page_of_them(
    world: World,
) -> None:
    """A run with more step runs than one listing page holds (``MAX_PAGE_SIZE``): none is left
    running, on whichever page it is, and a retry waiting on a later page ends too."""
    run = world.run(status=S.RUNNING)
    steps = world.store.steps
    retried = world.step(run.id, name="flaky", attempt=1)
    retried = steps.update(retried.id, StepRunUpdate(status=S.RETRYING, status_reason="1"))
    pending = world.step(run.id, name="flaky", attempt=2)
    steps.update(pending.id, StepRunUpdate(status=S.RETRYING, status_reason="2"))
    running = [world.step(run.id, name=f"step-{i}").id for i in range(MAX_PAGE_SIZE + 1)]
    outcome = RunStopper(world.store, run.id).force()
    assert {step.id for step in outcome.steps} == {pending.id, *running}
    assert all(step.status is S.STOPPED for step in outcome.steps)
    assert steps.get(retried.id) == retried


def test_a_forced_stop_from_elsewhere_stops_the_orchestrating_wait_for_inline_steps(
    world: World,
) -> None:
    """``wharf runs stop --force`` (told by the run's heartbeat): with only isolated attempts
    in flight (ended through their backends) the orchestrating thread goes on waiting; with an
    inline one, which may never return, ``ForcedStop`` ends its wait, as a second Ctrl-C does."""
    run = world.run(status=S.RUNNING)
    stopper = RunStopper(world.store, run.id)
    entered, done = threading.Event(), threading.Event()
    ended: list[str] = []

    def orchestrate() -> None:
        try:
            with stopper.orchestrating():
                entered.set()
                while not done.wait(0.01):  # the run's steps, running
                    pass
            ended.append("returned")
        except ForcedStop:
            ended.append("forced")

    thread = threading.Thread(target=orchestrate, daemon=True)
    thread.start()
    assert entered.wait(30)
    stopper.forced_elsewhere()
    assert not stopper.stopped_waiting and stopper.forced
    stopper.add_region(InterruptibleRegion(), inline=True)
    stopper.forced_elsewhere()
    thread.join(30)
    done.set()
    assert ended == ["forced"] and stopper.stopped_waiting


def test_a_forced_stop_that_cannot_wake_the_orchestrating_thread_ends_the_run_without_it(
    world: World,
) -> None:
    """The orchestrating thread (not the main one) blocks where nothing wakes it (a wait with
    no timeout): ``unwoken`` ends the run from another thread once
    ``FORCED_WAKE_SECONDS`` passed; a thread that stops waiting in time is left to end it."""
    run = world.run(status=S.RUNNING)
    stopper = RunStopper(world.store, run.id)
    entered, release, unwoken = threading.Event(), threading.Event(), threading.Event()
    ended: list[str] = []

    def orchestrate() -> None:
        try:
            with stopper.orchestrating(unwoken=unwoken.set):
                entered.set()
                release.wait()  # blocked in a lock: the ForcedStop waits for it to return
            ended.append("returned")
        except ForcedStop:
            ended.append("forced")

    thread = threading.Thread(target=orchestrate, daemon=True)
    thread.start()
    assert entered.wait(30)
    stopper.add_region(InterruptibleRegion(), inline=True)
    asked = time.monotonic()
    stopper.forced_elsewhere()
    assert unwoken.wait(30)
    assert time.monotonic() - asked >= FORCED_WAKE_SECONDS
    assert ended == []  # still blocked
    release.set()
    thread.join(30)
    assert ended == ["forced"] and stopper.stopped_waiting  # raised once it ran Python again
