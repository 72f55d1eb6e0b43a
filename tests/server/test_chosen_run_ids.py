"""Runs and snapshots created over HTTP under ids their caller chose (``RunCreate.id``,
``SnapshotCreate.id``): a repeat answers what was written, and an id another project's record
holds is refused (409) without telling what that record is.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.server.conftest import World, body
from tests.server.things import Things
from tests.store.conftest import spec
from wharf.store.models import SnapshotCreate


def b_run_body(world: World) -> dict[str, Any]:
    """A run of project B as its member ``other`` would create it."""
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(world.b.id, "pipe")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=world.b.id, pipeline_id=pipeline.id, spec=spec())
    )
    ids = {"project_id": world.b.id, "pipeline_id": pipeline.id, "snapshot_id": snapshot.id}
    return {**{k: str(v) for k, v in ids.items()}, "name": "mine", "status": "running"}


def a_run_body(t: Things) -> dict[str, Any]:
    w = t.world
    return {
        "project_id": str(w.a.id),
        "pipeline_id": str(t.pipeline.id),
        "snapshot_id": str(t.snapshot.id),
        "name": "again",
        "status": "running",
    }


def assert_taken_and_nothing_told(response: Any, taken: uuid.UUID, kind: str) -> None:
    assert response.status_code == 409, body(response)
    detail = body(response)["detail"]
    assert detail == f"The id {taken} is taken by another {kind}: a new {kind} needs a new id."


def test_another_projects_run_id_is_refused_without_its_details(world: World) -> None:
    t = Things(world)
    other = world.as_role("other")
    mine = b_run_body(world)
    for route in ("/api/v1/runs", "/api/v1/runs/get_or_create"):
        answer = other.post(route, json={**mine, "id": str(t.run.id)})
        assert_taken_and_nothing_told(answer, t.run.id, "pipeline run")
    assert world.stores.store.runs.get(t.run.id) == t.run


def test_another_projects_snapshot_id_is_refused_without_its_details(world: World) -> None:
    t = Things(world)
    mine = b_run_body(world)
    snapshot = {
        "id": str(t.snapshot.id),
        "project_id": mine["project_id"],
        "pipeline_id": mine["pipeline_id"],
        "spec": spec().model_dump(mode="json"),
    }
    answer = world.as_role("other").post("/api/v1/snapshots", json=snapshot)
    assert_taken_and_nothing_told(answer, t.snapshot.id, "pipeline snapshot")


def test_get_or_create_repeated_under_its_id_answers_the_run_written(world: World) -> None:
    t = Things(world)
    member = world.as_role("member")
    chosen = str(uuid.uuid4())
    run = {**a_run_body(t), "id": chosen}
    first = member.post("/api/v1/runs/get_or_create", json=run)
    assert first.status_code == 200 and body(first)["created"], body(first)
    again = member.post("/api/v1/runs/get_or_create", json=run)
    assert again.status_code == 200, body(again)
    assert body(again) == {"run": body(first)["run"], "created": False}
    # Another run of the same project under that id: the store's conflict, naming what differs.
    renamed = member.post("/api/v1/runs/get_or_create", json={**run, "name": "another"})
    assert renamed.status_code == 409, body(renamed)
    assert body(renamed)["detail"].startswith(f"A pipeline run with id {chosen} already exists")


def test_a_deleted_runs_id_is_free_again(world: World) -> None:
    t = Things(world)
    chosen = str(uuid.uuid4())
    member, other = world.as_role("member"), world.as_role("other")
    assert member.post("/api/v1/runs", json={**a_run_body(t), "id": chosen}).status_code == 201
    assert member.get(f"/api/v1/runs/{chosen}").status_code == 200
    assert member.delete(f"/api/v1/runs/{chosen}").status_code == 204
    created = other.post("/api/v1/runs", json={**b_run_body(world), "id": chosen})
    assert created.status_code == 201, body(created)
    assert other.get(f"/api/v1/runs/{chosen}").status_code == 200
    assert member.get(f"/api/v1/runs/{chosen}").status_code == 404
