"""The step run a new artifact version names as its producer, on the routes that record versions
(``/artifact_versions``, its batch, and a step's ``finish``): one of the version's project (else
it is missing, as a step of a project the caller cannot see is), and for a run token one of its
own run (else 403). Nothing is written when it is refused."""

from __future__ import annotations

from typing import Any

import httpx

from tests.server.conftest import World
from tests.server.matrix import Things
from tests.store.conftest import spec
from wharf.core.enums import ExecutionStatus
from wharf.store.models import (
    ArtifactVersionFilter,
    RunCreate,
    SnapshotCreate,
    StepRunCreate,
    StepRunRecord,
)


def _step_of_project_b(world: World) -> StepRunRecord:
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(world.b.id, "pb")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=world.b.id, pipeline_id=pipeline.id, spec=spec())
    )
    run = store.runs.create(
        RunCreate(project_id=world.b.id, pipeline_id=pipeline.id, snapshot_id=snapshot.id, name="b")
    )
    return store.steps.create(StepRunCreate(run_id=run.id, name="s", status="running"))


def _finish(client: httpx.Client, step_id: Any, version: dict[str, Any]) -> httpx.Response:
    body = {"update": {"status": "completed"}, "outputs": {"out": version}}
    return client.post(f"/api/v1/steps/{step_id}/finish", json=body)


def test_a_step_of_another_project_is_missing_as_a_producer(world: World) -> None:
    things = Things(world)
    member = world.as_role("member")
    foreign = _step_of_project_b(world)
    version = {**things.version_create().model_dump(mode="json"), "producer_step_run_id": None}
    planted = {**version, "producer_step_run_id": str(foreign.id)}
    for response in (
        member.post("/api/v1/artifact_versions", json=planted),
        member.post("/api/v1/artifact_versions/batch", json={"versions": [version, planted]}),
        _finish(member, things.step.id, planted),
    ):
        assert response.status_code == 404, response.text
        assert response.json()["detail"] == f"No step run with id {foreign.id}."
    store = world.stores.store
    assert store.steps.get(things.step.id).status is ExecutionStatus.RUNNING
    produced = store.artifacts.list_versions(ArtifactVersionFilter(producer_step_run_id=foreign.id))
    assert produced.total == 0


def test_a_run_token_names_only_steps_of_its_run_as_producers(world: World) -> None:
    things = Things(world)
    member = world.as_role("member")
    token = member.post(f"/api/v1/runs/{things.run.id}/token").json()["access_token"]
    runner = world.client(token)
    other_run = world.stores.store.runs.create(
        RunCreate(
            project_id=world.a.id,
            pipeline_id=things.pipeline.id,
            snapshot_id=things.snapshot.id,
            name="other",
        )
    )
    other_step = world.stores.store.steps.create(
        StepRunCreate(run_id=other_run.id, name="s", status="running")
    )
    version = things.version_create().model_dump(mode="json")
    response = _finish(
        runner, things.step.id, {**version, "producer_step_run_id": str(other_step.id)}
    )
    assert response.status_code == 403, response.text
    assert world.stores.store.steps.get(things.step.id).status is ExecutionStatus.RUNNING
    own = _finish(runner, things.step.id, {**version, "producer_step_run_id": str(things.step.id)})
    assert own.status_code == 200, own.text
    assert own.json()["outputs"]["out"]["producer_step_run_id"] == str(things.step.id)
