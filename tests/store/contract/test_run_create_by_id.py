"""Creating a run (and its snapshot, and a pipeline call's records) under ids chosen beforehand
is idempotent, on every backend.

A pipeline call repeats its run's creation when the answer was lost (a server replica killed
after its commit, a dropped connection): the repeat must get the run (and snapshot) the first
try wrote, never a second one; a repeat that asks for something else under a stored id is
refused, never merged. The id stored may differ from the one chosen (the workspace server
scopes it by project, ``wharf.server.chosen_ids``): callers use the id answered.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.store.conftest import World, spec
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityExistsError
from wharf.core.ids import new_id
from wharf.store.models import PipelineFilter, RunFilter, RunStart, RunUpdate, SnapshotCreate
from wharf.store.sql import tables as t


def runs_of(world: World) -> int:
    return world.store.runs.list(RunFilter(project_id=world.project.id)).total


def test_create_again_answers_the_run_written(world: World) -> None:
    create = world.run_create(id=new_id(), status=S.RUNNING, orchestrator_run_id="local-1")
    first = world.store.runs.create(create)
    again = world.store.runs.create(create)
    assert again == world.store.runs.get(first.id) == first
    assert runs_of(world) == 1


def test_a_run_moved_on_still_answers_its_repeat(world: World) -> None:
    create = world.run_create(id=new_id(), status=S.RUNNING)
    first = world.store.runs.create(create)
    world.store.runs.update(first.id, RunUpdate(status=S.COMPLETED))
    again = world.store.runs.create(create)
    assert (again.id, again.status) == (first.id, S.COMPLETED)
    assert runs_of(world) == 1


def test_a_placeholder_replaced_still_answers_its_repeat(world: World) -> None:
    create = world.run_create(id=new_id())
    first = world.store.runs.create(create)
    started, created = world.store.runs.get_or_create(
        world.run_create(name="started", status=S.RUNNING, orchestrator_run_id="k8s-7")
    )
    assert started.id == first.id and created
    again = world.store.runs.create(create)
    assert (again.id, again.name, again.orchestrator_run_id) == (first.id, "started", "k8s-7")
    assert runs_of(world) == 1


@pytest.mark.parametrize(
    "change",
    [{"name": "other"}, {"orchestrator_run_id": "another"}, {"snapshot": True}],
    ids=["name", "orchestrator-run-id", "snapshot"],
)
def test_another_run_under_a_stored_id_is_refused(world: World, change: dict[str, object]) -> None:
    create = world.run_create(id=new_id(), orchestrator_run_id="local-1")
    first = world.store.runs.create(create)
    if change.pop("snapshot", None):
        change["snapshot_id"] = world.other_snapshot().id
    with pytest.raises(EntityExistsError, match=f"id {create.id} already exists"):
        world.store.runs.create(create.model_copy(update=change))
    assert world.store.runs.get(first.id) == first
    assert runs_of(world) == 1


def test_create_with_metadata_again_answers_the_run_written(world: World) -> None:
    create = world.run_create(id=new_id(), status=S.RUNNING)
    first = world.store.runs.create_with_metadata(create, {"schedule": "nightly"})
    assert world.store.runs.create_with_metadata(create, {"schedule": "nightly"}) == first
    assert runs_of(world) == 1


def test_snapshot_create_again_answers_the_snapshot_written(world: World) -> None:
    create = SnapshotCreate(
        id=new_id(), project_id=world.project.id, pipeline_id=world.pipeline.id, spec=spec()
    )
    first = world.store.snapshots.create(create)
    assert world.store.snapshots.create(create) == first == world.store.snapshots.get(first.id)
    with pytest.raises(EntityExistsError, match="another spec"):
        world.store.snapshots.create(create.model_copy(update={"spec": spec("other")}))
    assert world.store.snapshots.get(first.id) == first


def _start(**overrides: object) -> RunStart:
    values: dict[str, object] = {"id": new_id(), "snapshot_id": new_id(), "name": "run-a"}
    values.update(overrides)
    return RunStart(**values, status=S.RUNNING)  # type: ignore[arg-type]


def test_record_again_answers_what_it_wrote(world: World) -> None:
    start = _start()
    project = world.project.id
    first = world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    pipeline, snapshot, run = first
    assert run.snapshot_id == snapshot.id
    again = world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    assert again == (pipeline, world.store.snapshots.get(snapshot.id), world.store.runs.get(run.id))
    assert again == first
    assert world.store.runs.list(RunFilter(pipeline_id=pipeline.id)).total == 1


def test_record_refuses_another_call_under_a_stored_run_id(world: World) -> None:
    start = _start()
    project = world.project.id
    _, snapshot, run = world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    with pytest.raises(EntityExistsError, match="already exists with another"):
        world.store.runs.record(project, "nightly", None, spec("changed"), start)
    with pytest.raises(EntityExistsError, match="already exists with another"):
        world.store.runs.record(project, "weekly", None, spec("nightly"), start)
    with pytest.raises(EntityExistsError, match="already exists with another"):
        world.store.runs.record(project, "nightly", None, spec("nightly"), _start(id=start.id))
    assert world.store.runs.get(run.id) == run
    assert world.store.snapshots.get(snapshot.id) == snapshot
    assert runs_of(world) == 1


def _snapshot_rows(world: World) -> int:
    with world.store._db.engine.connect() as conn:
        query = sa.select(sa.func.count()).select_from(t.pipeline_snapshot)
        return int(conn.execute(query).scalar_one())


def test_a_refused_record_leaves_nothing_behind(world: World) -> None:
    """Its run refused (another call's run holds the id), a record writes no snapshot, nor a
    pipeline: all or nothing, over REST too (the server records it in one transaction)."""
    start = _start()
    project = world.project.id
    world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    snapshots = _snapshot_rows(world)
    with pytest.raises(EntityExistsError, match="already exists with another"):
        world.store.runs.record(project, "nightly", None, spec("nightly"), _start(id=start.id))
    with pytest.raises(EntityExistsError, match="already exists with another"):
        world.store.runs.record(project, "fresh", None, spec("fresh"), _start(id=start.id))
    assert _snapshot_rows(world) == snapshots
    assert world.store.pipelines.list(PipelineFilter(project_id=project, name="fresh")).total == 0
    assert runs_of(world) == 1


def test_record_without_ids_records_a_run_each_time(world: World) -> None:
    start = _start(id=None, snapshot_id=None)
    project = world.project.id
    one = world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    two = world.store.runs.record(project, "nightly", None, spec("nightly"), start)
    assert one[0] == two[0] and one[1].id != two[1].id and one[2].id != two[2].id
