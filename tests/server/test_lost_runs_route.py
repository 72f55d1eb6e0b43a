"""``POST /api/v1/runs/lost`` over real HTTP: a caller spares (keeps alive) only runs it may
write; any other id it names in ``spared`` is ignored, answered like an unknown one."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from tests.server.conftest import World
from tests.store.conftest import spec
from wharf.core.enums import ExecutionStatus
from wharf.store.models import OrchestratorProcess, RunCreate, SnapshotCreate


def _past_its_deadline(world: World, project: Any) -> Any:
    """A running run of ``project`` whose orchestrator (on another machine) missed its beat."""
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(project.id, "pipe")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=spec())
    )
    run = store.runs.create(
        RunCreate(
            project_id=project.id,
            pipeline_id=pipeline.id,
            snapshot_id=snapshot.id,
            name=f"run-{uuid.uuid4().hex[:8]}",
            status=ExecutionStatus.RUNNING,
        )
    )
    # A deadline a microsecond after the beat: passed by the time any request arrives.
    elsewhere = OrchestratorProcess(
        host="another-machine", pid=7, start="b:1", liveness_timeout_seconds=1e-6
    )
    store.runs.update_heartbeat(run.id, elsewhere)
    return run


def _sweep(world: World, role: str, spared: list[Any]) -> Any:
    body = {"now": datetime.now(UTC).isoformat(), "spared": [str(i) for i in spared]}
    response = world.as_role(role).post("/api/v1/runs/lost", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_runs_of_another_project_cannot_be_spared(world: World) -> None:
    theirs = _past_its_deadline(world, world.b)
    answer = _sweep(world, "member", [theirs.id, uuid.uuid4()])
    assert answer == {"items": []}  # what it ended in project B is not shown
    assert world.stores.store.runs.get(theirs.id).status is ExecutionStatus.FAILED


def test_runs_only_readable_cannot_be_spared(world: World) -> None:
    ours = _past_its_deadline(world, world.a)
    answer = _sweep(world, "viewer", [ours.id])
    assert [item["run"]["id"] for item in answer["items"]] == [str(ours.id)]
    assert world.stores.store.runs.get(ours.id).status is ExecutionStatus.FAILED


def test_a_member_spares_runs_of_its_project(world: World) -> None:
    ours = _past_its_deadline(world, world.a)
    assert _sweep(world, "member", [ours.id]) == {"items": []}
    assert world.stores.store.runs.get(ours.id).status is ExecutionStatus.RUNNING
    assert _sweep(world, "member", []) != {"items": []}
    assert world.stores.store.runs.get(ours.id).status is ExecutionStatus.FAILED
