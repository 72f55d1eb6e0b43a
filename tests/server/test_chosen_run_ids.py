"""Runs, snapshots and step runs created over HTTP under ids their caller chose
(``RunCreate.id``, ``SnapshotCreate.id``, ``StepRunCreate.id``): a repeat answers what was
written, and the server stores a project-scoped id (``wharf.server.chosen_ids``), so two
projects choosing one id get two records and no replica's cache of ids' projects
(``wharf.server.scopes``) can point at another project's record, even once one was deleted.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.server.conftest import World, body
from tests.server.live import LiveServer, open_state
from tests.server.things import Things
from tests.store.conftest import spec
from wharf.server.app import create_app
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


@pytest.fixture
def replica(world: World) -> Iterator[str]:
    """The URL of a second server on ``world``'s database (another replica, its own caches)."""
    state, stores = open_state(world.stores.store.url, token_clock=world.clock)
    server = LiveServer(create_app(state.settings, state=state)).start()
    try:
        yield server.url
    finally:
        server.stop()
        stores.close()


def on(world: World, url: str, role: str) -> httpx.Client:
    """``role``'s client on the server at ``url``."""
    client = world.as_role(role)
    client.base_url = httpx.URL(url)
    return client


def test_one_id_chosen_in_two_projects_makes_two_runs(world: World) -> None:
    t = Things(world)
    member, other = world.as_role("member"), world.as_role("other")
    chosen = str(uuid.uuid4())
    mine = member.post("/api/v1/runs", json={**a_run_body(t), "id": chosen})
    assert mine.status_code == 201, body(mine)
    a_run = body(mine)["id"]
    assert a_run != chosen  # stored under its project-scoped id, which the answer gives
    b = b_run_body(world)
    for route in ("/api/v1/runs", "/api/v1/runs/get_or_create"):
        for taken in (chosen, a_run, str(t.run.id)):  # chosen, stored, made by the server
            answer = other.post(route, json={**b, "id": taken})
            assert answer.status_code in (200, 201), body(answer)
            run = body(answer)["run"] if route.endswith("get_or_create") else body(answer)
            assert run["id"] not in (chosen, a_run, str(t.run.id))
            assert run["project_id"] == str(world.b.id)
    assert world.stores.store.runs.get(t.run.id) == t.run
    assert member.get(f"/api/v1/runs/{a_run}").json() == body(mine)


def test_one_snapshot_id_chosen_in_two_projects_makes_two_snapshots(world: World) -> None:
    t = Things(world)
    chosen = str(uuid.uuid4())

    def snapshot(role: str, project: str, pipeline: str) -> dict[str, Any]:
        created = world.as_role(role).post(
            "/api/v1/snapshots",
            json={
                "id": chosen,
                "project_id": project,
                "pipeline_id": pipeline,
                "spec": spec().model_dump(mode="json"),
            },
        )
        assert created.status_code == 201, body(created)
        return dict(body(created))

    mine = snapshot("member", str(world.a.id), str(t.pipeline.id))
    b = b_run_body(world)
    theirs = snapshot("other", b["project_id"], b["pipeline_id"])
    assert len({mine["id"], theirs["id"], chosen}) == 3
    assert snapshot("member", str(world.a.id), str(t.pipeline.id)) == mine  # a repeat


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
    # Another run of the same project under that id: the store's conflict, naming what differs
    # and the id its caller chose.
    renamed = member.post("/api/v1/runs/get_or_create", json={**run, "name": "another"})
    assert renamed.status_code == 409, body(renamed)
    assert body(renamed)["detail"].startswith(f"A pipeline run with id {chosen} already exists")


def test_a_run_id_chosen_again_after_a_delete_never_reaches_another_project(
    world: World, replica: str
) -> None:
    """The replica scenario: A's member creates and reads a run through replica 1 (which
    caches its project), it is deleted through replica 2, and B's member creates a run under
    the same chosen id through replica 2: replica 1 never gives A's member B's run."""
    t = Things(world)
    chosen = str(uuid.uuid4())
    member, other = world.as_role("member"), world.as_role("other")
    member_2, other_2 = on(world, replica, "member"), on(world, replica, "other")
    created = member.post("/api/v1/runs", json={**a_run_body(t), "id": chosen})
    assert created.status_code == 201, body(created)
    a_run = body(created)["id"]
    assert member.get(f"/api/v1/runs/{a_run}").status_code == 200  # replica 1 caches it
    assert member_2.delete(f"/api/v1/runs/{a_run}").status_code == 204
    theirs = other_2.post("/api/v1/runs", json={**b_run_body(world), "id": chosen})
    assert theirs.status_code == 201, body(theirs)
    b_run = body(theirs)["id"]
    for run_id in (a_run, b_run, chosen):  # before: B's run, read and stopped as A's
        assert member.get(f"/api/v1/runs/{run_id}").status_code == 404
        stop = member.patch(f"/api/v1/runs/{run_id}", json={"status": "stopping"})
        assert stop.status_code == 404
    assert other.get(f"/api/v1/runs/{b_run}").json() == body(theirs)  # before: 404
    assert b_run != a_run
    assert world.stores.store.runs.get(uuid.UUID(b_run)).status.value == "running"


def test_a_step_id_chosen_again_after_a_delete_never_reaches_another_project(
    world: World, replica: str
) -> None:
    t = Things(world)
    chosen = str(uuid.uuid4())
    member, other = world.as_role("member"), world.as_role("other")
    member_2, other_2 = on(world, replica, "member"), on(world, replica, "other")
    a_run = member.post("/api/v1/runs", json=a_run_body(t)).json()["id"]
    step = {"id": chosen, "name": "train", "status": "running"}
    created = member.post("/api/v1/steps", json={**step, "run_id": a_run})
    assert created.status_code == 201, body(created)
    a_step = body(created)["id"]
    again = member.post("/api/v1/steps", json={**step, "run_id": a_run})  # a repeat
    assert again.status_code == 201 and body(again) == body(created), body(again)
    assert member.get(f"/api/v1/steps/{a_step}").status_code == 200  # replica 1 caches it
    assert member_2.delete(f"/api/v1/runs/{a_run}").status_code == 204  # and its steps
    b_run = other_2.post("/api/v1/runs", json=b_run_body(world)).json()["id"]
    theirs = other_2.post("/api/v1/steps", json={**step, "run_id": b_run})
    assert theirs.status_code == 201, body(theirs)
    b_step = body(theirs)["id"]
    for step_id in (a_step, b_step):  # before: B's step, read and ended as A's
        assert member.get(f"/api/v1/steps/{step_id}").status_code == 404
        stop = member.patch(f"/api/v1/steps/{step_id}", json={"status": "failed"})
        assert stop.status_code == 404
    assert other.get(f"/api/v1/steps/{b_step}").json() == body(theirs)  # before: 404
    assert len({a_step, b_step, chosen}) == 3
