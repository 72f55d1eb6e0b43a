"""Helpers for the store tests: a project/pipeline/snapshot "world" and record factories."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.store.models import (
    ArtifactVersionCreate,
    ArtifactVersionRecord,
    PipelineRecord,
    PipelineRunRecord,
    ProjectRecord,
    RunCreate,
    SnapshotCreate,
    SnapshotRecord,
    StepRunCreate,
    StepRunRecord,
)
from wharf.store.sql import SqlStore

_counter = itertools.count()


def spec(name: str = "training") -> PipelineSpec:
    return PipelineSpec(
        name=name,
        steps={
            "load": StepSpec(name="load", source="pkg.steps:load", code_hash="h1"),
            "train": StepSpec(
                name="train", source="pkg.steps:train", code_hash="h2", upstream=("load",)
            ),
        },
    )


@dataclass
class World:
    """A project with one pipeline and one snapshot, plus factories for what hangs off them."""

    store: SqlStore
    project: ProjectRecord
    pipeline: PipelineRecord
    snapshot: SnapshotRecord

    def run_create(self, **overrides: Any) -> RunCreate:
        values: dict[str, Any] = {
            "project_id": self.project.id,
            "pipeline_id": self.pipeline.id,
            "snapshot_id": self.snapshot.id,
            "name": f"run-{next(_counter)}",
        }
        values.update(overrides)
        return RunCreate(**values)

    def run(self, **overrides: Any) -> PipelineRunRecord:
        return self.store.runs.create(self.run_create(**overrides))

    def step(self, run_id: UUID | None = None, **overrides: Any) -> StepRunRecord:
        values: dict[str, Any] = {
            "run_id": run_id or self.run(status=ExecutionStatus.RUNNING).id,
            "name": f"step-{next(_counter)}",
            "status": ExecutionStatus.RUNNING,
        }
        values.update(overrides)
        return self.store.steps.create(StepRunCreate(**values))

    def version(self, name: str = "model", **overrides: Any) -> ArtifactVersionRecord:
        values: dict[str, Any] = {
            "project_id": self.project.id,
            "name": name,
            "uri": f"/artifacts/{name}/{next(_counter)}",
            "data_type": "builtins.dict",
            "materializer": "wharf.artifacts.materializers:Json",
        }
        values.update(overrides)
        return self.store.artifacts.create_version(ArtifactVersionCreate(**values))

    def other_snapshot(self) -> SnapshotRecord:
        return self.store.snapshots.create(
            SnapshotCreate(project_id=self.project.id, pipeline_id=self.pipeline.id, spec=spec())
        )


def make_world(store: SqlStore, project_name: str = "proj") -> World:
    project = store.projects.create(project_name)
    pipeline = store.pipelines.get_or_create(project.id, "training")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=spec())
    )
    return World(store, project, pipeline, snapshot)


@contextlib.contextmanager
def sqlite_world(directory: Path) -> Iterator[World]:
    """A :func:`make_world` on a fresh SQLite store in ``directory`` (``store.db``), closed
    afterwards."""
    store = SqlStore.open(f"sqlite:///{directory / 'store.db'}")
    try:
        yield make_world(store)
    finally:
        store.close()


@pytest.fixture
def world(backend: SqlStore) -> World:
    return make_world(backend)
