"""The default combined calls (``wharf.store.composed``), built here on the SQL store's plain
calls, which are recorded: the order and number of plain calls each combined call makes, and
that its effect is the SQL store's own combined call's."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World, spec
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import IllegalTransitionError, InputError
from wharf.core.transitions import STOPPED_ON_REQUEST
from wharf.store.composed import ComposedArtifacts, ComposedRuns, ComposedStepRuns
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    PipelineRunRecord,
    RunCreate,
    RunStart,
    RunUpdate,
    StepRunCreate,
    StepRunRecord,
    StepRunUpdate,
)

pytestmark = pytest.mark.parametrize("backend_name", ["sqlite"], indirect=True)


class Artifacts(ComposedArtifacts):
    def __init__(self, world: World, calls: list[str]) -> None:
        self._inner = world.store.artifacts
        self.calls = calls

    def create_version(self, version: ArtifactVersionCreate) -> ArtifactVersionRecord:
        self.calls.append(f"create_version {version.name}")
        return self._inner.create_version(version)


class Steps(ComposedStepRuns):
    """The SQL store's plain step calls, recorded, with the default combined calls."""

    def __init__(self, world: World) -> None:
        self._inner = world.store.steps
        self.calls: list[str] = []
        self._artifacts = Artifacts(world, self.calls)

    def create(self, step: StepRunCreate) -> StepRunRecord:
        self.calls.append(f"create {step.name}")
        return self._inner.create(step)

    def update(self, step_run_id: UUID, update: StepRunUpdate) -> StepRunRecord:
        self.calls.append(f"update {update.status.value if update.status else None}")
        return self._inner.update(step_run_id, update)

    def find_cached(self, project_id: UUID, cache_key: str, now: datetime) -> StepRunRecord | None:
        self.calls.append(f"find_cached {cache_key}")
        return self._inner.find_cached(project_id, cache_key, now)


class Runs(ComposedRuns):
    """The SQL store's plain run calls, recorded, with the default combined calls; ``before``
    runs before each update (a concurrent writer)."""

    def __init__(self, world: World) -> None:
        self._inner = world.store.runs
        self._pipelines = world.store.pipelines
        self._snapshots = world.store.snapshots
        self.calls: list[str] = []
        self.before: list[Any] = []

    def create(self, run: RunCreate) -> PipelineRunRecord:
        self.calls.append("create")
        return self._inner.create(run)

    def get(self, run_id: UUID) -> PipelineRunRecord:
        self.calls.append("get")
        return self._inner.get(run_id)

    def update(self, run_id: UUID, update: RunUpdate) -> PipelineRunRecord:
        self.calls.append(f"update {update.status.value if update.status else None}")
        if self.before:
            self.before.pop(0)()
        return self._inner.update(run_id, update)


def output(world: World, producer: UUID, name: str) -> ArtifactVersionCreate:
    return ArtifactVersionCreate(
        project_id=world.project.id,
        name=name,
        uri=f"/artifacts/{name}",
        data_type="builtins.int",
        materializer="m",
        producer_step_run_id=producer,
    )


# ----------------------------------------------------------------- step runs


def test_a_miss_looks_up_then_creates(world: World, clock: FakeClock) -> None:
    steps = Steps(world)
    run = world.run(status=S.RUNNING)
    create = StepRunCreate(run_id=run.id, name="a", status=S.RUNNING, cache_key="k")
    found = steps.find_cached_or_create(create, world.project.id, clock.now, record_hit=True)
    assert found.created and found.recorded is None
    assert world.store.steps.get(found.step.id) == found.step
    assert steps.calls == ["find_cached k", "create a"]


def test_a_hit_creates_nothing_unless_asked_to_record_it(world: World, clock: FakeClock) -> None:
    steps = Steps(world)
    done = world.store.steps.update(world.step(cache_key="k").id, StepRunUpdate(status=S.COMPLETED))
    run = world.run(status=S.RUNNING)
    create = StepRunCreate(run_id=run.id, name="a", status=S.RUNNING, cache_key="k")
    hit = steps.find_cached_or_create(create, world.project.id, clock.now)
    assert not hit.created and hit.step == done and hit.recorded is None
    assert steps.calls == ["find_cached k"]
    recorded = steps.find_cached_or_create(create, world.project.id, clock.now, record_hit=True)
    assert recorded.recorded is not None and recorded.recorded.status is S.CACHED
    assert recorded.recorded.original_step_run_id == done.id
    assert steps.calls == ["find_cached k", "find_cached k", "create a"]


def test_the_lookup_needs_a_cache_key(world: World, clock: FakeClock) -> None:
    step = StepRunCreate(run_id=world.run().id, name="a", status=S.RUNNING)
    with pytest.raises(InputError, match="cache key"):
        Steps(world).find_cached_or_create(step, world.project.id, clock.now)


def test_finish_creates_the_versions_before_the_update_that_links_them(world: World) -> None:
    steps = Steps(world)
    step = world.step()
    earlier = world.version("earlier")
    outputs = {"x": output(world, step.id, "x"), "y": output(world, step.id, "y")}
    update = StepRunUpdate(status=S.COMPLETED, outputs={"z": earlier.id})
    record, versions = steps.finish(step.id, update, outputs)
    assert steps.calls == ["create_version x", "create_version y", "update completed"]
    assert record.outputs == {"z": earlier.id, "x": versions["x"].id, "y": versions["y"].id}
    assert world.store.steps.get(step.id) == record


def test_a_refused_finish_leaves_its_versions_unreferenced(world: World) -> None:
    steps = Steps(world)
    step = world.step()
    world.store.steps.update(step.id, StepRunUpdate(status=S.FAILED))
    with pytest.raises(IllegalTransitionError):
        steps.finish(step.id, StepRunUpdate(status=S.COMPLETED), {"x": output(world, step.id, "x")})
    assert steps.calls == ["create_version x", "update completed"]
    assert world.store.steps.get(step.id).outputs == {}


# ----------------------------------------------------------------- runs


def test_record_writes_pipeline_snapshot_and_run(world: World) -> None:
    runs = Runs(world)
    pipeline, snapshot, run = runs.record(
        world.project.id, "fresh", None, spec("fresh"), RunStart(name="r", status=S.RUNNING)
    )
    assert runs.calls == ["create"]
    assert world.store.pipelines.get(pipeline.id).name == "fresh"
    assert world.store.snapshots.get(snapshot.id).pipeline_id == pipeline.id
    assert world.store.runs.get(run.id) == run and run.status is S.RUNNING


@pytest.mark.parametrize(
    ("current", "wanted", "ends"),
    [
        (S.RUNNING, S.COMPLETED, S.COMPLETED),
        (S.STOPPING, S.COMPLETED, S.STOPPED),
        (S.STOPPING, S.FAILED, S.FAILED),
        (S.FAILED, S.COMPLETED, S.FAILED),  # finished: returned unchanged, nothing written
    ],
)
def test_finish_decides_from_the_status_it_reads(
    world: World, current: S, wanted: S, ends: S
) -> None:
    runs = Runs(world)
    run = world.run(status=S.RUNNING)
    if current is not S.RUNNING:
        world.store.runs.update(run.id, RunUpdate(status=current))
    ended = runs.finish(run.id, wanted, None)
    assert ended.status is ends and world.store.runs.get(run.id) == ended
    assert runs.calls == (["get"] if current.is_finished else ["get", f"update {ends.value}"])
    if current is S.STOPPING and wanted is S.COMPLETED:
        assert ended.status_reason == STOPPED_ON_REQUEST


def test_finish_decides_again_when_a_stop_came_in_between(world: World) -> None:
    runs = Runs(world)
    run = world.run(status=S.RUNNING)
    runs.before.append(lambda: world.store.runs.update(run.id, RunUpdate(status=S.STOPPING)))
    runs.before.append(lambda: None)
    ended = runs.finish(run.id, S.COMPLETED, None)
    assert ended.status is S.STOPPED
    assert runs.calls == ["get", "update completed", "get", "update stopped"]


def test_a_composed_store_issues_no_run_tokens(world: World) -> None:
    assert Runs(world).issue_token(world.run().id) is None
