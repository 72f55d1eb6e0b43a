"""Contract: run creation, status transitions, times, orchestrator run id, filters, deletion."""

from __future__ import annotations

import uuid

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from wharf.core.enums import ExecutionStatus as S
from wharf.core.enums import MetadataResourceType
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    IllegalTransitionError,
)
from wharf.store.models import RunFilter, RunUpdate, StepRunUpdate


def test_create_and_get(world: World, clock: FakeClock) -> None:
    user = world.store.users.create("alice")
    run = world.run(name="nightly", user_id=user.id, status_reason="scheduled")
    assert run.status is S.INITIALIZING and run.is_placeholder
    assert (run.name, run.user_id, run.status_reason) == ("nightly", user.id, "scheduled")
    assert run.created == run.updated == clock.now
    assert run.start_time is None and run.end_time is None
    assert world.store.runs.get(run.id) == run


def test_get_status(world: World) -> None:
    run = world.run(status=S.RUNNING)
    assert world.store.runs.get_status(run.id) is S.RUNNING
    world.store.runs.update(run.id, RunUpdate(status=S.STOPPING))
    assert world.store.runs.get_status(run.id) is S.STOPPING
    with pytest.raises(EntityNotFoundError):
        world.store.runs.get_status(uuid.uuid4())


def test_created_running_gets_start_time(world: World) -> None:
    run = world.run(status=S.RUNNING)
    assert run.start_time == run.created and run.end_time is None
    assert world.store.runs.get(run.id).start_time == run.start_time


def test_create_rejects_illegal_initial_status(world: World) -> None:
    with pytest.raises(IllegalTransitionError):
        world.run(status=S.COMPLETED)
    assert world.store.runs.list().total == 0


def test_create_errors(world: World) -> None:
    world.run(orchestrator_run_id="k8s-1")
    with pytest.raises(EntityExistsError, match="orchestrator run id 'k8s-1' already exists"):
        world.run(orchestrator_run_id="k8s-1")
    world.run(orchestrator_run_id="k8s-1", snapshot_id=world.other_snapshot().id)
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline snapshot with id {missing}"):
        world.run(snapshot_id=missing)
    with pytest.raises(EntityNotFoundError, match=f"No user with id {missing}"):
        world.run(user_id=missing)
    with pytest.raises(EntityNotFoundError) as info:
        world.store.runs.get(missing)
    assert str(info.value) == f"No pipeline run with id {missing}."


def test_status_lifecycle_sets_times_once(world: World, clock: FakeClock) -> None:
    runs = world.store.runs
    run = world.run()
    queued = runs.update(run.id, RunUpdate(status=S.QUEUED))
    assert queued.start_time is None and queued.updated > run.updated
    running = runs.update(run.id, RunUpdate(status=S.RUNNING))
    assert running.start_time == clock.now
    again = runs.update(run.id, RunUpdate(status=S.RUNNING))  # idempotent: nothing moves
    assert again.start_time == running.start_time
    done = runs.update(run.id, RunUpdate(status=S.COMPLETED, status_reason="ok"))
    assert done.end_time == clock.now and done.start_time == running.start_time
    assert done.status_reason == "ok"
    assert runs.get(run.id) == done


def test_illegal_transition_changes_nothing(world: World) -> None:
    run = world.run(status=S.RUNNING)
    done = world.store.runs.update(run.id, RunUpdate(status=S.FAILED, status_reason="boom"))
    with pytest.raises(IllegalTransitionError, match="failed -> running"):
        world.store.runs.update(
            run.id,
            RunUpdate(status=S.RUNNING, status_reason="retry", orchestrator_run_id="x"),
        )
    assert world.store.runs.get(run.id) == done


def test_finishing_without_running_sets_only_end_time(world: World) -> None:
    run = world.run()
    stopped = world.store.runs.update(run.id, RunUpdate(status=S.STOPPED))
    assert stopped.start_time is None and stopped.end_time is not None


def test_orchestrator_run_id_is_set_once(world: World) -> None:
    runs = world.store.runs
    run = world.run()
    assert runs.update(run.id, RunUpdate(orchestrator_run_id="a")).orchestrator_run_id == "a"
    assert runs.update(run.id, RunUpdate(orchestrator_run_id="a")).orchestrator_run_id == "a"
    with pytest.raises(IllegalOperationError, match="orchestrator run id is already set"):
        runs.update(run.id, RunUpdate(orchestrator_run_id="b", status=S.RUNNING))
    after = runs.get(run.id)
    assert after.orchestrator_run_id == "a" and after.status is S.INITIALIZING
    other = world.run()
    with pytest.raises(EntityExistsError, match="orchestrator run id 'a'"):
        runs.update(other.id, RunUpdate(orchestrator_run_id="a"))


def test_update_unknown_run(world: World) -> None:
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline run with id {missing}"):
        world.store.runs.update(missing, RunUpdate(status=S.RUNNING))


def test_list_filters(world: World) -> None:
    other_snapshot = world.other_snapshot()
    a = world.run(name="a", status=S.RUNNING, orchestrator_run_id="o1")
    b = world.run(name="b", snapshot_id=other_snapshot.id)
    c = world.run(name="a")
    other_project = world.store.projects.create("other")
    pipeline = world.store.pipelines.get_or_create(other_project.id, "p2")
    runs = world.store.runs
    assert [r.id for r in runs.list().items] == [c.id, b.id, a.id]
    assert [r.id for r in runs.list(RunFilter(name="a")).items] == [c.id, a.id]
    assert runs.list(RunFilter(status=S.RUNNING)).items == [a]
    assert runs.list(RunFilter(snapshot_id=other_snapshot.id)).items == [b]
    assert runs.list(RunFilter(orchestrator_run_id="o1")).items == [a]
    assert runs.list(RunFilter(project_id=world.project.id)).total == 3
    assert runs.list(RunFilter(project_id=other_project.id)).total == 0
    assert runs.list(RunFilter(pipeline_id=pipeline.id)).total == 0
    assert runs.list(RunFilter(pipeline_id=world.pipeline.id, name="b")).items == [b]


def test_delete_removes_steps_links_and_metadata(world: World) -> None:
    store = world.store
    run = world.run(status=S.RUNNING)
    first = world.step(run.id)
    version = world.version(producer_step_run_id=first.id)
    store.steps.update(first.id, StepRunUpdate(status=S.COMPLETED, outputs={"out": version.id}))
    second = world.step(run.id, inputs={"x": version.id})
    cached = world.step(run.id, status=S.CACHED, original_step_run_id=first.id)
    later_run = world.run(status=S.RUNNING)
    elsewhere = world.step(later_run.id, status=S.CACHED, original_step_run_id=first.id)
    store.run_metadata.add(MetadataResourceType.PIPELINE_RUN, run.id, {"k": 1})
    store.run_metadata.add(MetadataResourceType.STEP_RUN, second.id, {"k": 2})

    store.runs.delete(run.id)

    for step in (first, second, cached):
        with pytest.raises(EntityNotFoundError):
            store.steps.get(step.id)
    with pytest.raises(EntityNotFoundError):
        store.runs.get(run.id)
    assert store.artifacts.get_version(version.id).producer_step_run_id is None
    assert store.steps.get(elsewhere.id).original_step_run_id is None
    assert store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id) == []
    assert store.runs.get(later_run.id) == later_run
    with pytest.raises(EntityNotFoundError, match="No pipeline run with id"):
        store.runs.delete(run.id)


def test_create_with_metadata(world: World) -> None:
    store = world.store
    fired_by = {"schedule_id": "s-1", "attempt": 2}
    run = store.runs.create_with_metadata(world.run_create(orchestrator_run_id="o-1"), fired_by)
    assert store.runs.get(run.id) == run and run.orchestrator_run_id == "o-1"
    recorded = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert {m.key: m.value for m in recorded} == fired_by
    plain = store.runs.create_with_metadata(world.run_create(), {})
    assert store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, plain.id) == []
    with pytest.raises(EntityExistsError):  # the same (snapshot, orchestrator run id)
        store.runs.create_with_metadata(world.run_create(orchestrator_run_id="o-1"), {"x": 1})
    again = store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    assert {m.key: m.value for m in again} == fired_by
