"""Contract: step heartbeats and the lost-heartbeat sweep (fake clock, no sleeps).

Concurrent sweeps, and sweeps racing heartbeats, are in ``test_concurrency.py``.
"""

from __future__ import annotations

import math
import uuid
from datetime import timedelta

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityNotFoundError, IllegalTransitionError, InputError
from wharf.store.models import RunUpdate, StepRunRecord, StepRunUpdate


def lost_reason(step: StepRunRecord) -> str:
    assert step.last_heartbeat is not None and step.heartbeat_deadline is not None
    return (
        f"Heartbeat lost: no heartbeat since {step.last_heartbeat.isoformat()} "
        f"(liveness timeout passed at {step.heartbeat_deadline.isoformat()})."
    )


def test_heartbeat_sets_last_beat_and_deadline(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    step = world.step()
    response = steps.update_heartbeat(step.id, 30)
    assert (response.step_run_id, response.status, response.run_status) == (
        step.id,
        S.RUNNING,
        S.RUNNING,
    )
    assert not response.should_stop
    beaten = steps.get(step.id)
    assert beaten.last_heartbeat == clock.now
    assert beaten.heartbeat_deadline == clock.now + timedelta(seconds=30)
    # A beat is not a change of the step: everything else, ``updated`` included, stays.
    assert beaten.model_copy(update={"last_heartbeat": None, "heartbeat_deadline": None}) == step

    clock.advance(10)
    steps.update_heartbeat(step.id, 0.25)  # fractions of a second are kept
    again = steps.get(step.id)
    assert again.last_heartbeat == clock.now
    assert again.heartbeat_deadline == clock.now + timedelta(milliseconds=250)


def test_heartbeat_reports_stop_and_cancel_signals(world: World) -> None:
    steps = world.store.steps
    run = world.run(status=S.RUNNING)
    step = world.step(run.id)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    response = steps.update_heartbeat(step.id, 30)
    assert (response.status, response.run_status, response.should_stop) == (
        S.RUNNING,
        S.STOPPING,
        True,
    )
    other = world.step()
    steps.update(other.id, StepRunUpdate(status=S.CANCELLING))
    response = steps.update_heartbeat(other.id, 30)
    assert (response.status, response.run_status, response.should_stop) == (
        S.CANCELLING,
        S.RUNNING,
        True,
    )
    assert steps.get(other.id).last_heartbeat is not None  # a stopping step still beats


@pytest.mark.parametrize("final", [S.COMPLETED, S.FAILED, S.STOPPED, S.CANCELLED, S.RETRYING])
def test_a_final_step_has_no_deadline_and_ignores_beats(world: World, final: S) -> None:
    steps = world.store.steps
    step = world.step()
    steps.update_heartbeat(step.id, 30)
    beaten = steps.get(step.id)
    stopping = steps.update(step.id, StepRunUpdate(status=S.CANCELLING))
    assert stopping.heartbeat_deadline == beaten.heartbeat_deadline  # not final: kept
    done = steps.update(step.id, StepRunUpdate(status=final))
    assert done.heartbeat_deadline is None and done.last_heartbeat == beaten.last_heartbeat
    assert steps.get(step.id) == done
    response = steps.update_heartbeat(step.id, 3600)
    assert (response.status, response.run_status) == (final, S.RUNNING)
    assert steps.get(step.id) == done


def test_heartbeat_errors(world: World) -> None:
    steps = world.store.steps
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError) as info:
        steps.update_heartbeat(missing, 30)
    assert str(info.value) == f"No step run with id {missing}."
    step = world.step()
    for timeout in (0, -1, -0.5, math.nan, math.inf):
        with pytest.raises(InputError, match="liveness timeout"):
            steps.update_heartbeat(step.id, timeout)
    with pytest.raises(InputError, match="liveness timeout"):
        steps.update_heartbeat(step.id, 1e15)  # beyond datetime's range
    assert steps.get(step.id) == step


def test_sweep_fails_unfinished_steps_whose_deadline_passed(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    run = world.run(status=S.RUNNING)
    running, stopping, cancelling, patient, silent, queued, finished = (
        world.step(run.id, name=name, status=S.QUEUED if name == "queued" else S.RUNNING)
        for name in ("running", "stopping", "cancelling", "patient", "silent", "queued", "done")
    )
    for step in (running, stopping, cancelling, queued, finished):
        steps.update_heartbeat(step.id, 10)
    steps.update_heartbeat(patient.id, 100)
    steps.update(stopping.id, StepRunUpdate(status=S.STOPPING))
    steps.update(cancelling.id, StepRunUpdate(status=S.CANCELLING))
    done = steps.update(finished.id, StepRunUpdate(status=S.COMPLETED))

    assert steps.fail_lost_heartbeats(clock.now) == []
    before = {s.id: steps.get(s.id) for s in (running, stopping, cancelling)}
    now = clock.advance(11)
    failed = steps.fail_lost_heartbeats(now)
    at = clock.now  # the store's time of the change (the clock ticks on every read)
    assert [s.id for s in failed] == [running.id, stopping.id, cancelling.id]  # creation order
    for record in failed:
        old = before[record.id]
        assert record.status is S.FAILED and record.status_reason == lost_reason(old)
        assert record.end_time == record.updated == at and record.start_time == old.start_time
        assert record.last_heartbeat == old.last_heartbeat
        assert record.heartbeat_deadline is None  # final: it can no longer be lost
        assert steps.get(record.id) == record
    # Not lost: a later deadline, no heartbeat ever, a status without heartbeats, finished.
    assert {s.id: steps.get(s.id).status for s in (patient, silent, queued)} == {
        patient.id: S.RUNNING,
        silent.id: S.RUNNING,
        queued.id: S.QUEUED,
    }
    assert steps.get(finished.id) == done
    assert steps.fail_lost_heartbeats(now) == []  # each step is failed once

    assert [s.id for s in steps.fail_lost_heartbeats(clock.advance(100))] == [patient.id]


def test_sweep_reason_and_cutoff_are_exact(world: World) -> None:
    steps = world.store.steps
    step = world.step()
    steps.update_heartbeat(step.id, 10)
    beaten = steps.get(step.id)
    assert beaten.heartbeat_deadline is not None and beaten.last_heartbeat is not None
    deadline = beaten.heartbeat_deadline
    assert steps.fail_lost_heartbeats(deadline) == []  # strictly before ``now`` only
    (failed,) = steps.fail_lost_heartbeats(deadline + timedelta(microseconds=1))
    expected = (
        f"Heartbeat lost: no heartbeat since {beaten.last_heartbeat.isoformat()} "
        f"(liveness timeout passed at {deadline.isoformat()})."
    )
    assert failed.status_reason == expected
    assert "2024-01-01T12:00:" in expected and expected.endswith("+00:00).")


def test_sweep_of_one_run(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    first, second = world.run(status=S.RUNNING), world.run(status=S.RUNNING)
    mine = [world.step(first.id) for _ in range(3)]
    theirs = world.step(second.id)
    for step in (*mine, theirs):
        steps.update_heartbeat(step.id, 5)
    now = clock.advance(6)
    assert steps.fail_lost_heartbeats(now, run_id=uuid.uuid4()) == []
    assert [s.id for s in steps.fail_lost_heartbeats(now, run_id=first.id)] == [s.id for s in mine]
    assert steps.get(theirs.id).status is S.RUNNING
    assert [s.id for s in steps.fail_lost_heartbeats(now)] == [theirs.id]


def test_step_that_beat_again_is_spared(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    step = world.step()
    steps.update_heartbeat(step.id, 10)
    now = clock.advance(11)  # the sweeper's "now" is taken, then the step beats again
    steps.update_heartbeat(step.id, 10)
    assert steps.fail_lost_heartbeats(now) == []
    assert steps.get(step.id).status is S.RUNNING


def test_failed_records_carry_links_and_stay_failed(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    data, model = world.version("data"), world.version("model")
    step = world.step(inputs={"data": data.id}, outputs={"model": model.id})
    steps.update(step.id, StepRunUpdate(logs_uri="/logs/x.log"))
    steps.update_heartbeat(step.id, 1)
    (failed,) = steps.fail_lost_heartbeats(clock.advance(2))
    assert (failed.inputs, failed.outputs) == ({"data": data.id}, {"model": model.id})
    assert failed.logs_uri == "/logs/x.log"
    # The worker's next beat learns it was failed, and cannot revive it.
    assert steps.update_heartbeat(step.id, 10).status is S.FAILED
    assert steps.get(step.id) == failed
    with pytest.raises(IllegalTransitionError, match="failed -> completed"):
        steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
