"""Contract: a lookup or filter by a text value finds only records holding exactly that text, on
every database. MariaDB's ``utf8mb4_bin`` pads with spaces (``'nightly' = 'nightly '``), so there
a filter by ``'nightly '`` found the run named ``'nightly'``."""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from tests.store.conftest import World
from tests.store.contract.test_metadata_schedules import schedule_create
from wharf.core.enums import ExecutionStatus as S
from wharf.core.errors import EntityNotFoundError
from wharf.store.models import (
    ArtifactFilter,
    ArtifactVersionFilter,
    PipelineFilter,
    RunFilter,
    ScheduleFilter,
    StepRunFilter,
    StepRunUpdate,
)
from wharf.store.sql.server_stores import SqlAccountStore

PADDED = ("  ", " ", "\t")


def test_run_filters_are_exact(world: World) -> None:
    runs = world.store.runs
    run = world.run(name="nightly", orchestrator_run_id="k8s-1")
    assert [r.id for r in runs.list(RunFilter(name="nightly")).items] == [run.id]
    assert [r.id for r in runs.list(RunFilter(orchestrator_run_id="k8s-1")).items] == [run.id]
    for pad in PADDED:
        assert runs.list(RunFilter(name="nightly" + pad)).total == 0
        assert runs.list(RunFilter(orchestrator_run_id="k8s-1" + pad)).total == 0
        assert runs.list(RunFilter(name="Nightly")).total == 0


def test_step_filters_and_cache_lookups_are_exact(world: World, clock: FakeClock) -> None:
    steps = world.store.steps
    step = world.step(name="train", cache_key="key")
    done = steps.update(step.id, StepRunUpdate(status=S.COMPLETED))
    assert [s.id for s in steps.list(StepRunFilter(names=("train",))).items] == [step.id]
    assert steps.find_cached(world.project.id, "key", clock.now) == done
    for pad in PADDED:
        assert steps.list(StepRunFilter(names=("train" + pad,))).total == 0
        assert steps.list(StepRunFilter(names=("other", "train" + pad))).total == 0
        assert steps.list(StepRunFilter(cache_key="key" + pad)).total == 0
        assert steps.find_cached(world.project.id, "key" + pad, clock.now) is None
    assert steps.list(StepRunFilter(names=())).total == 0


def test_pipeline_artifact_and_schedule_filters_are_exact(world: World) -> None:
    store = world.store
    world.version("model")
    store.schedules.create(schedule_create(world, "nightly"))
    assert store.pipelines.list(PipelineFilter(name="training")).total == 1
    assert store.artifacts.list(ArtifactFilter(name="model")).total == 1
    assert store.artifacts.list_versions(ArtifactVersionFilter(name="model")).total == 1
    assert store.schedules.list(ScheduleFilter(name="nightly")).total == 1
    for pad in PADDED:
        assert store.pipelines.list(PipelineFilter(name="training" + pad)).total == 0
        assert store.artifacts.list(ArtifactFilter(name="model" + pad)).total == 0
        assert store.artifacts.list_versions(ArtifactVersionFilter(name="model" + pad)).total == 0
        assert store.schedules.list(ScheduleFilter(name="nightly" + pad)).total == 0


def test_external_id_lookup_is_exact(world: World) -> None:
    credentials = SqlAccountStore(world.store._db).credentials
    user = world.store.users.create("alice")
    linked = credentials.link_external(user.id, "sub-1")
    assert credentials.get_by_external_id("sub-1") == linked
    for pad in PADDED:
        with pytest.raises(EntityNotFoundError):
            credentials.get_by_external_id("sub-1" + pad)
