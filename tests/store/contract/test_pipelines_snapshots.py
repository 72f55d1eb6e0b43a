"""Contract: pipelines (get_or_create per project and name) and snapshots (spec round trip)."""

from __future__ import annotations

import math
import uuid

import pytest

from tests.store.conftest import World, spec
from wharf.config.settings import CachePolicy, ResourceSettings
from wharf.config.spec import CodeArchiveRef, PipelineConfig, PipelineSpec, StepConfig, StepSpec
from wharf.core.errors import EntityNotFoundError
from wharf.store.models import PipelineFilter, RunStart, SnapshotCreate
from wharf.store.sql import SqlStore


def test_pipeline_get_or_create(backend: SqlStore) -> None:
    project = backend.projects.create("p")
    other = backend.projects.create("q")
    first = backend.pipelines.get_or_create(project.id, "train")
    assert backend.pipelines.get_or_create(project.id, "train") == first
    elsewhere = backend.pipelines.get_or_create(other.id, "train")
    assert elsewhere.id != first.id
    assert backend.pipelines.get(first.id) == first
    assert backend.pipelines.list().total == 2
    assert backend.pipelines.list(PipelineFilter(project_id=other.id)).items == [elsewhere]
    assert backend.pipelines.list(PipelineFilter(name="train")).total == 2
    assert backend.pipelines.list(PipelineFilter(name="nope")).total == 0
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline with id {missing}"):
        backend.pipelines.get(missing)
    with pytest.raises(EntityNotFoundError, match=f"No project with id {missing}"):
        backend.pipelines.get_or_create(missing, "train")


def test_snapshot_round_trips_the_spec(world: World) -> None:
    rich = PipelineSpec(
        name="rich",
        parameters={"lr": 0.1, "layers": [1, 2, 3], "shape": (3, 4), "by_id": {1: "a"}},
        steps={
            "train": StepSpec(
                name="train",
                source="pkg:train",
                parameters={"shape": (3, (4,)), "limit": -math.inf, "text": "bad \udcff"},
                source_code="def train():\n    return 'ü' * 70000\n" * 2000,  # > 64 KiB
                code_hash="h",
                config=StepConfig(
                    resources=ResourceSettings(gpu_count=2, memory="2GiB"),
                    cache_policy=CachePolicy(expires_after=60),
                ),
            )
        },
    )
    snapshot = world.store.snapshots.create(
        SnapshotCreate(project_id=world.project.id, pipeline_id=world.pipeline.id, spec=rich)
    )
    loaded = world.store.snapshots.get(snapshot.id)
    assert loaded == snapshot
    assert loaded.spec == rich and loaded.stack_id is None
    assert loaded.spec.steps["train"].parameters["shape"] == (3, (4,))  # not [3, [4]]


def test_snapshot_errors(world: World) -> None:
    missing = uuid.uuid4()
    with pytest.raises(EntityNotFoundError, match=f"No pipeline snapshot with id {missing}"):
        world.store.snapshots.get(missing)
    with pytest.raises(EntityNotFoundError, match=f"No stack with id {missing}"):
        world.store.snapshots.create(
            SnapshotCreate(
                project_id=world.project.id,
                pipeline_id=world.pipeline.id,
                stack_id=missing,
                spec=spec(),
            )
        )
    with pytest.raises(EntityNotFoundError, match=f"No pipeline with id {missing}"):
        world.store.snapshots.create(
            SnapshotCreate(project_id=world.project.id, pipeline_id=missing, spec=spec())
        )


def test_a_snapshot_keeps_the_runs_code_archive(world: World) -> None:
    code = CodeArchiveRef(
        uri="s3://bucket/wharf/code/" + "a" * 64 + ".tar.gz",
        digest="a" * 64,
        source_root="/home/me/project",
        files=2000,
        size=9_000_000,
    )
    shipped = spec().model_copy(
        update={"code": code, "config": PipelineConfig(code_source="archive")}
    )
    created = world.store.snapshots.create(
        SnapshotCreate(project_id=world.project.id, pipeline_id=world.pipeline.id, spec=shipped)
    )
    assert world.store.snapshots.get(created.id).spec.code == code
    _, recorded, _ = world.store.runs.record(
        world.project.id, "shipped", None, shipped, RunStart(name="r")
    )
    loaded = world.store.snapshots.get(recorded.id).spec
    assert loaded.code == code and loaded.config.code_source == "archive"
