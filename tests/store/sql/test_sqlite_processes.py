"""Several processes sharing one SQLite file neither deadlock nor lose updates."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from uuid import UUID

from tests.store.conftest import make_world
from wharf.core.enums import ExecutionStatus
from wharf.store.models import ArtifactVersionCreate, RunCreate, StepRunUpdate
from wharf.store.sql import SqlStore

PROCESSES = 3
VERSIONS_PER_PROCESS = 15


def _worker(url: str, ids: dict[str, UUID]) -> tuple[list[int], UUID, bool]:
    store = SqlStore.open(url)
    try:
        versions = []
        for i in range(VERSIONS_PER_PROCESS):
            version = store.artifacts.create_version(
                ArtifactVersionCreate(
                    project_id=ids["project"],
                    name="shared",
                    uri=f"/a/{i}",
                    data_type="int",
                    materializer="m",
                )
            )
            versions.append(version.version)
            # Read-modify-write of one row from every process: a lost update would show.
            store.steps.update(ids["step"], StepRunUpdate(outputs={f"o{version.id}": version.id}))
        run, created = store.runs.get_or_create(
            RunCreate(
                project_id=ids["project"],
                pipeline_id=ids["pipeline"],
                snapshot_id=ids["snapshot"],
                name="shared-run",
                status=ExecutionStatus.RUNNING,
                orchestrator_run_id="pod-1",
            )
        )
        return versions, run.id, created
    finally:
        store.close()


def test_processes_share_one_sqlite_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    with SqlStore.open(url) as store:
        world = make_world(store)
        step = world.step()
        ids = {
            "project": world.project.id,
            "pipeline": world.pipeline.id,
            "snapshot": world.snapshot.id,
            "step": step.id,
        }
        with ProcessPoolExecutor(
            PROCESSES, mp_context=multiprocessing.get_context("spawn")
        ) as pool:
            results = list(pool.map(_worker, [url] * PROCESSES, [ids] * PROCESSES))
        numbers = sorted(n for versions, _, _ in results for n in versions)
        assert numbers == list(range(1, PROCESSES * VERSIONS_PER_PROCESS + 1))
        assert len(store.steps.get(step.id).outputs) == PROCESSES * VERSIONS_PER_PROCESS
        assert len({run_id for _, run_id, _ in results}) == 1
        assert [created for _, _, created in results].count(True) == 1
