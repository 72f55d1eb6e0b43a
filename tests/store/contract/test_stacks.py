"""Contract: stack components (unique per type and name) and stacks (validated links); updating
a component's configuration (refused while a run on a stack using it is unfinished); deleting
them (refused while in use)."""

from __future__ import annotations

import uuid

import pytest

from tests.store.conftest import World, spec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
)
from wharf.store.models import (
    ComponentCreate,
    ComponentRecord,
    PageRequest,
    PipelineRunRecord,
    RunUpdate,
    ScheduleCreate,
    SnapshotCreate,
    SnapshotRecord,
    StackRecord,
)
from wharf.store.sql import SqlStore

ORCH = ComponentType.ORCHESTRATOR
STORE = ComponentType.ARTIFACT_STORE
OPAQUE_FLAVOR = "opaque"
"""A flavor no class implements: the store keeps any configuration, and the server, which checks
a configuration by its flavor's class (``wharf.sdk.stacks``), has nothing to check (it must
declare the flavor: ``tests/store/rest/test_rest_stacks.py`` does)."""


def component(
    store: SqlStore, name: str, type: ComponentType = ORCH, **config: object
) -> ComponentRecord:
    return store.stacks.create_component(
        ComponentCreate(name=name, type=type, flavor=OPAQUE_FLAVOR, configuration=dict(config))
    )


@pytest.mark.parametrize(
    ("type", "article"), [(STORE, "An"), (ComponentType.STEP_OPERATOR, "A")], ids=str
)
def test_a_taken_component_name_is_refused_in_plain_words(
    backend: SqlStore, type: ComponentType, article: str
) -> None:
    component(backend, "mine", type)
    with pytest.raises(EntityExistsError) as taken:
        component(backend, "mine", type)
    assert str(taken.value) == f"{article} {type.value} component named 'mine' already exists."


def test_components(backend: SqlStore) -> None:
    orch = component(backend, "local", ORCH, parallelism=4, nested={"a": [1, 2]})
    assert orch.configuration == {"parallelism": 4, "nested": {"a": [1, 2]}}
    assert backend.stacks.get_component(orch.id) == orch
    assert backend.stacks.get_component_by_name(ORCH, "local") == orch
    same_name_other_type = component(backend, "local", STORE)
    assert same_name_other_type.type is STORE
    with pytest.raises(EntityExistsError) as taken:
        component(backend, "local", ORCH)
    assert str(taken.value) == "An orchestrator component named 'local' already exists."
    with pytest.raises(EntityNotFoundError, match="No step_operator component named 'local'"):
        backend.stacks.get_component_by_name(ComponentType.STEP_OPERATOR, "local")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack component with id {missing}"):
        backend.stacks.get_component(missing)
    assert backend.stacks.list_components().total == 2
    only_stores = backend.stacks.list_components(type=STORE)
    assert [c.id for c in only_stores.items] == [same_name_other_type.id]
    assert backend.stacks.list_components(page=PageRequest(size=1, index=2)).items == [orch]


def test_stacks(backend: SqlStore) -> None:
    orch = component(backend, "local")
    store = component(backend, "disk", STORE)
    stack = backend.stacks.create_stack("default", {ORCH: orch.id, STORE: store.id})
    assert stack.components == {ORCH: orch.id, STORE: store.id}
    assert backend.stacks.get_stack(stack.id) == stack
    assert backend.stacks.get_stack_by_name("default") == stack
    empty = backend.stacks.create_stack("empty", {})
    assert empty.components == {}
    assert backend.stacks.list_stacks().items == [empty, stack]
    with pytest.raises(EntityExistsError, match="stack named 'default'"):
        backend.stacks.create_stack("default", {ORCH: orch.id})
    with pytest.raises(EntityNotFoundError, match=r"^No stack named 'nope'\.$"):
        backend.stacks.get_stack_by_name("nope")
    with pytest.raises(
        EntityNotFoundError, match=r"^No stack named 'defualt'; did you mean 'default'\?$"
    ):
        backend.stacks.get_stack_by_name("defualt")
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack with id {missing}"):
        backend.stacks.get_stack(missing)


def test_create_stack_validates_components(backend: SqlStore) -> None:
    orch = component(backend, "local")
    missing = uuid.uuid4()
    with pytest.raises(InputError, match=f"{missing} does not exist"):
        backend.stacks.create_stack("s", {ORCH: missing})
    with pytest.raises(InputError, match="is of type orchestrator, not artifact_store"):
        backend.stacks.create_stack("s", {STORE: orch.id})
    assert backend.stacks.list_stacks().total == 0  # nothing was stored


# ----------------------------------------------------------------------------- deletion


def test_an_unused_component_is_deleted(backend: SqlStore) -> None:
    orch = component(backend, "typo")
    kept = component(backend, "typo", STORE)
    backend.stacks.delete_component(orch.id)
    with pytest.raises(EntityNotFoundError):
        backend.stacks.get_component(orch.id)
    assert [c.id for c in backend.stacks.list_components().items] == [kept.id]
    again = component(backend, "typo")  # the name is free again
    assert again.id != orch.id


def test_a_component_a_stack_uses_is_refused_naming_the_stacks(backend: SqlStore) -> None:
    orch = component(backend, "local")
    store = component(backend, "disk", STORE)
    backend.stacks.create_stack("beta", {ORCH: orch.id, STORE: store.id})
    backend.stacks.create_stack("alpha", {ORCH: orch.id})
    with pytest.raises(
        IllegalOperationError,
        match=r"Component 'local' \(orchestrator\) is used by stack\(s\) alpha, beta: "
        "delete those stacks first",
    ):
        backend.stacks.delete_component(orch.id)
    assert backend.stacks.get_component(orch.id) == orch


def _stack_with_snapshot(world: World) -> tuple[StackRecord, SnapshotRecord]:
    orch = component(world.store, "local")
    stack = world.store.stacks.create_stack("doomed", {ORCH: orch.id})
    snapshot = world.store.snapshots.create(
        SnapshotCreate(
            project_id=world.project.id,
            pipeline_id=world.pipeline.id,
            stack_id=stack.id,
            spec=spec(),
        )
    )
    return stack, snapshot


def _finished(world: World, snapshot: SnapshotRecord, status: ExecutionStatus) -> PipelineRunRecord:
    run = world.run(snapshot_id=snapshot.id, status=ExecutionStatus.RUNNING)
    return world.store.runs.update(run.id, RunUpdate(status=status))


def test_a_stack_with_finished_runs_is_deleted_and_its_runs_stay(world: World) -> None:
    stack, snapshot = _stack_with_snapshot(world)
    done = _finished(world, snapshot, ExecutionStatus.COMPLETED)
    failed = _finished(world, snapshot, ExecutionStatus.FAILED)
    store = world.store
    store.stacks.delete_stack(stack.id)
    with pytest.raises(EntityNotFoundError):
        store.stacks.get_stack(stack.id)
    with pytest.raises(EntityNotFoundError):
        store.stacks.get_stack_by_name("doomed")
    assert store.snapshots.get(snapshot.id).stack_id is None
    assert store.runs.get(done.id) == done
    assert store.runs.get(failed.id).status is ExecutionStatus.FAILED
    assert store.stacks.get_component(stack.components[ORCH]).name == "local"  # kept
    store.stacks.delete_component(stack.components[ORCH])  # and no longer used
    assert store.stacks.create_stack("doomed", {}).name == "doomed"  # the name is free again


def test_a_stack_with_an_unfinished_run_is_refused(world: World) -> None:
    stack, snapshot = _stack_with_snapshot(world)
    _finished(world, snapshot, ExecutionStatus.COMPLETED)
    running = world.run(snapshot_id=snapshot.id, name="busy", status=ExecutionStatus.RUNNING)
    with pytest.raises(
        IllegalOperationError, match=r"Stack 'doomed' has unfinished run\(s\) busy: wait"
    ):
        world.store.stacks.delete_stack(stack.id)
    assert world.store.stacks.get_stack(stack.id) == stack
    assert world.store.snapshots.get(snapshot.id).stack_id == stack.id
    world.store.runs.update(running.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    world.store.stacks.delete_stack(stack.id)
    assert world.store.snapshots.get(snapshot.id).stack_id is None


def test_a_stack_a_schedule_uses_is_refused(world: World) -> None:
    stack, snapshot = _stack_with_snapshot(world)
    schedule = world.store.schedules.create(
        ScheduleCreate(
            project_id=world.project.id,
            pipeline_id=world.pipeline.id,
            snapshot_id=snapshot.id,
            name="nightly",
            interval_seconds=60,
        )
    )
    world.store.schedules.set_active(schedule.id, False)  # paused still counts
    with pytest.raises(IllegalOperationError, match=r"used by schedule\(s\) nightly"):
        world.store.stacks.delete_stack(stack.id)
    world.store.schedules.delete(schedule.id)
    world.store.stacks.delete_stack(stack.id)


def test_deleting_unknown_ids_is_not_found(backend: SqlStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack component with id {missing}"):
        backend.stacks.delete_component(missing)
    with pytest.raises(EntityNotFoundError, match=f"No stack with id {missing}"):
        backend.stacks.delete_stack(missing)


# ----------------------------------------------------------------------------- update


def _snapshot_of(world: World, stack: StackRecord) -> SnapshotRecord:
    return world.store.snapshots.create(
        SnapshotCreate(
            project_id=world.project.id,
            pipeline_id=world.pipeline.id,
            stack_id=stack.id,
            spec=spec(),
        )
    )


def test_an_update_replaces_the_configuration(world: World) -> None:
    store = world.store
    orch = component(store, "k8s", namespace="wrong", parallelism=4)
    other = component(store, "k8s", STORE, path="/data")
    stack = store.stacks.create_stack("prod", {ORCH: orch.id, STORE: other.id})
    _finished(world, _snapshot_of(world, stack), ExecutionStatus.COMPLETED)  # finished: no bar
    world.run(status=ExecutionStatus.RUNNING)  # unfinished, but on no stack
    updated = store.stacks.update_component(orch.id, {"namespace": "prod", "nested": {"a": [1]}})
    assert updated == orch.model_copy(
        update={"configuration": {"namespace": "prod", "nested": {"a": [1]}}}
    )
    assert store.stacks.get_component(orch.id) == updated
    assert store.stacks.get_component_by_name(ORCH, "k8s") == updated
    assert store.stacks.get_component(other.id) == other
    assert store.stacks.update_component(orch.id, {}).configuration == {}
    assert store.stacks.get_stack(stack.id) == stack


def test_an_update_is_refused_while_a_run_on_a_stack_using_it_is_unfinished(world: World) -> None:
    store = world.store
    orch = component(store, "k8s", namespace="wrong")
    unrelated = component(store, "other")
    store.stacks.create_stack("alpha", {ORCH: orch.id})
    beta = store.stacks.create_stack("beta", {ORCH: orch.id})
    gamma = store.stacks.create_stack("gamma", {ORCH: unrelated.id})
    snapshot = _snapshot_of(world, beta)
    busy = [
        world.run(snapshot_id=snapshot.id, name=f"busy-{i}", status=ExecutionStatus.RUNNING)
        for i in range(6)
    ]
    elsewhere = _snapshot_of(world, gamma).id
    world.run(snapshot_id=elsewhere, name="elsewhere", status=ExecutionStatus.RUNNING)
    with pytest.raises(
        IllegalOperationError,
        match=r"Component 'k8s' \(orchestrator\) is used by unfinished run\(s\) "
        r"busy-0, busy-1, busy-2, busy-3, busy-4 and 1 more: wait for them",
    ):
        store.stacks.update_component(orch.id, {"namespace": "prod"})
    assert store.stacks.get_component(orch.id) == orch
    with pytest.raises(IllegalOperationError, match=r"unfinished run\(s\) elsewhere: wait"):
        store.stacks.update_component(unrelated.id, {"n": 1})
    for run in busy[:-1]:
        store.runs.update(run.id, RunUpdate(status=ExecutionStatus.COMPLETED))
    with pytest.raises(IllegalOperationError, match=r"unfinished run\(s\) busy-5: wait"):
        store.stacks.update_component(orch.id, {"namespace": "prod"})
    store.runs.update(busy[-1].id, RunUpdate(status=ExecutionStatus.STOPPED))
    updated = store.stacks.update_component(orch.id, {"namespace": "prod"})
    assert (
        store.stacks.get_component(orch.id).configuration
        == {"namespace": "prod"}
        == (updated.configuration)
    )


def test_updating_an_unknown_id_is_not_found(backend: SqlStore) -> None:
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No stack component with id {missing}"):
        backend.stacks.update_component(missing, {"a": 1})
