"""Contract: a pipeline call's records in one call (``runs.record``) and a run's
end (``finish``), on every backend."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World, spec
from tests.store.contract.test_concurrency import THREADS, race
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityNotFoundError, IllegalTransitionError, InputError
from wharf.core.transitions import FORCE_STOPPED_ON_REQUEST, STOPPED_ON_REQUEST
from wharf.store.models import PipelineFilter, RunStart, RunUpdate
from wharf.store.ports import RunRepository


def records(world: World) -> RunRepository:
    return world.store.runs


def test_record_creates_pipeline_snapshot_and_a_running_run(world: World, clock: FakeClock) -> None:
    user = world.store.users.create("alice")
    start = RunStart(name="r1", status=S.RUNNING, orchestrator_run_id="local-1", user_id=user.id)
    pipeline, snapshot, run = records(world).record(
        world.project.id, "fresh", None, spec("fresh"), start
    )
    store = world.store
    assert store.pipelines.get(pipeline.id) == pipeline
    assert (pipeline.project_id, pipeline.name) == (world.project.id, "fresh")
    assert store.snapshots.get(snapshot.id) == snapshot
    assert snapshot.spec == spec("fresh") and snapshot.pipeline_id == pipeline.id
    assert store.runs.get(run.id) == run
    assert (run.snapshot_id, run.pipeline_id, run.project_id) == (
        snapshot.id,
        pipeline.id,
        world.project.id,
    )
    assert (run.status, run.orchestrator_run_id, run.user_id) == (S.RUNNING, "local-1", user.id)
    assert run.start_time == run.created == clock.now and run.end_time is None


def test_record_reuses_the_pipeline_of_that_name(world: World) -> None:
    stack = world.store.stacks.create_stack("s", {})
    pipeline, snapshot, run = records(world).record(
        world.project.id, "training", stack.id, spec(), RunStart(name="r")
    )
    assert pipeline == world.pipeline and snapshot.id != world.snapshot.id
    assert snapshot.stack_id == stack.id
    assert run.is_placeholder and run.start_time is None  # a placeholder by default
    assert world.store.pipelines.list(PipelineFilter(project_id=world.project.id)).total == 1


@pytest.mark.parametrize("missing", ["project", "stack", "user"])
def test_record_of_a_missing_reference_writes_nothing(world: World, missing: str) -> None:
    unknown = uuid.uuid4()
    project = unknown if missing == "project" else world.project.id
    stack = unknown if missing == "stack" else None
    user = unknown if missing == "user" else None
    with pytest.raises(EntityNotFoundError, match=str(unknown)):
        records(world).record(project, "other", stack, spec(), RunStart(name="r", user_id=user))
    assert world.store.pipelines.list().total == 1  # "training" only
    assert world.store.runs.list().total == 0


def test_record_refuses_bad_input_before_writing(world: World) -> None:
    with pytest.raises(IllegalTransitionError):
        records(world).record(
            world.project.id, "p", None, spec(), RunStart(name="r", status=S.COMPLETED)
        )
    with pytest.raises(InputError):
        records(world).record(world.project.id, "", None, spec(), RunStart(name="r"))
    assert world.store.pipelines.list().total == 1 and world.store.runs.list().total == 0


def test_finish_ends_a_running_run(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    clock.advance(5)
    done = records(world).finish(run.id, S.COMPLETED, None)
    assert done.status is S.COMPLETED and done.end_time == done.updated == clock.now
    assert done.start_time == run.start_time
    assert world.store.runs.get(run.id) == done
    failed = records(world).finish(world.run(status=S.RUNNING).id, S.FAILED, "Step(s) failed: a.")
    assert (failed.status, failed.status_reason) == (S.FAILED, "Step(s) failed: a.")


@pytest.mark.parametrize(
    ("wanted", "ends", "reason"),
    [
        (S.COMPLETED, S.STOPPED, STOPPED_ON_REQUEST),
        (S.STOPPED, S.STOPPED, STOPPED_ON_REQUEST),
        (S.FAILED, S.FAILED, "boom"),
    ],
)
def test_finish_honours_a_stop(world: World, wanted: S, ends: S, reason: str) -> None:
    run = world.run(status=S.RUNNING)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    done = records(world).finish(run.id, wanted, "boom")
    assert (done.status, done.status_reason) == (ends, reason)
    assert world.store.runs.get(run.id) == done


@pytest.mark.parametrize("wanted", [S.COMPLETED, S.STOPPED])
def test_finish_of_a_run_whose_stop_was_forced_says_so(world: World, wanted: S) -> None:
    run = world.run(status=S.RUNNING)
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING, stop_forced=True))
    done = records(world).finish(run.id, wanted, "why")
    assert (done.status, done.status_reason) == (S.STOPPED, FORCE_STOPPED_ON_REQUEST)
    assert world.store.runs.get(run.id) == done


def test_finish_leaves_a_finished_run_alone(world: World, clock: FakeClock) -> None:
    run = world.run(status=S.RUNNING)
    stopped = world.store.runs.update(run.id, RunUpdate(status=S.STOPPED, status_reason="x"))
    clock.advance(1)
    assert records(world).finish(run.id, S.COMPLETED, None) == stopped
    assert records(world).finish(run.id, S.FAILED, "late") == stopped
    assert world.store.runs.get(run.id) == stopped


def test_finish_of_an_unknown_run(world: World) -> None:
    with pytest.raises(EntityNotFoundError):
        records(world).finish(uuid.uuid4(), S.COMPLETED, None)


def test_concurrent_records_of_a_new_pipeline_share_it(world: World) -> None:
    def call(i: int) -> object:
        start = RunStart(name=f"r{i}", status=S.RUNNING, orchestrator_run_id=f"local-{i}")
        return records(world).record(world.project.id, "new", None, spec(), start)

    results = race(call)
    assert all(isinstance(r, tuple) for r in results), results
    pipelines = {r[0].id for r in results if isinstance(r, tuple)}
    assert len(pipelines) == 1
    assert world.store.runs.list().total == THREADS
    assert world.store.pipelines.list(PipelineFilter(name="new")).total == 1


def test_finish_racing_a_stop_never_completes_a_stopped_run(world: World) -> None:
    for _ in range(5):
        run = world.run(status=S.RUNNING)

        def call(i: int, run_id: uuid.UUID = run.id) -> object:
            if i == 0:
                return world.store.runs.update(run_id, RunUpdate(status=S.STOPPING))
            return records(world).finish(run_id, S.COMPLETED, None)

        results = race(call, threads=2)
        final = world.store.runs.get(run.id)
        if isinstance(results[0], Exception):  # the stop came too late: the run had completed
            assert isinstance(results[0], IllegalTransitionError)
            assert final.status is S.COMPLETED
        else:
            assert final.status is S.STOPPED, results
