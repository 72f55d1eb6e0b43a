"""Run-scoped tokens: a run's processes read its run and snapshot and write its steps,
artifacts and heartbeats -- nothing else."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.server.conftest import World
from tests.server.matrix import NOW, Things
from tests.store.conftest import spec
from wharf.store.models import RunCreate, SnapshotCreate, StepRunCreate


@pytest.fixture
def scoped(world: World) -> tuple[Things, httpx.Client]:
    things = Things(world)
    token = world.as_role("member").post(f"/api/v1/runs/{things.run.id}/token").json()
    assert token["expires_in"] == 7 * 86400
    return things, world.client(token["access_token"])


def test_reads_its_run_and_snapshot(world: World, scoped: tuple[Things, httpx.Client]) -> None:
    things, runner = scoped
    assert runner.get(f"/api/v1/runs/{things.run.id}").json()["id"] == str(things.run.id)
    assert runner.get(f"/api/v1/runs/{things.run.id}/status").json() == {"status": "running"}
    assert runner.get(f"/api/v1/snapshots/{things.snapshot.id}").status_code == 200
    assert runner.get(f"/api/v1/stacks/{things.stack.id}").status_code == 200  # its components
    me = runner.get("/api/v1/auth/me").json()
    assert me["run_id"] == str(things.run.id) and me["is_admin"] is False


def test_writes_its_steps_artifacts_and_heartbeats(
    world: World, scoped: tuple[Things, httpx.Client]
) -> None:
    things, runner = scoped
    step = runner.post("/api/v1/steps", json=things.step_body())
    assert step.status_code == 201
    step_id = step.json()["id"]
    beat = runner.put(f"/api/v1/steps/{step_id}/heartbeat", json={"liveness_timeout_seconds": 30})
    assert beat.status_code == 200 and beat.json()["status"] == "running"
    version = runner.post(
        "/api/v1/artifact_versions",
        json={**things.version_create().model_dump(mode="json"), "producer_step_run_id": step_id},
    )
    assert version.status_code == 201
    done = runner.patch(
        f"/api/v1/steps/{step_id}",
        json={"status": "completed", "outputs": {"out": version.json()["id"]}},
    )
    assert done.status_code == 200 and done.json()["outputs"] == {"out": version.json()["id"]}
    assert runner.get(f"/api/v1/artifact_versions/{things.version.id}").status_code == 200
    listed = runner.get(f"/api/v1/steps?run_id={things.run.id}").json()
    assert listed["total"] == 2  # the fixture's step and this one
    cached = runner.get(
        "/api/v1/steps/cached", params={"project_id": str(world.a.id), "cache_key": "k", "now": NOW}
    )
    assert cached.status_code == 200
    metadata = {"resource_type": "step_run", "resource_id": step_id, "values": {"loss": 0.5}}
    assert runner.post("/api/v1/run_metadata", json=metadata).status_code == 201


def _other_run(world: World, things: Things, project: Any) -> Any:
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(project.id, "p2")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=project.id, pipeline_id=pipeline.id, spec=spec())
    )
    run = store.runs.create(
        RunCreate(project_id=project.id, pipeline_id=pipeline.id, snapshot_id=snapshot.id, name="x")
    )
    return (
        snapshot,
        run,
        store.steps.create(StepRunCreate(run_id=run.id, name="s", status="running")),
    )


def test_is_refused_everything_else(world: World, scoped: tuple[Things, httpx.Client]) -> None:
    things, runner = scoped
    snapshot, run, step = _other_run(world, things, world.a)  # same project, other run
    version = things.version_create().model_dump(mode="json")
    forbidden = [
        ("GET", f"/api/v1/runs/{run.id}", None),
        ("GET", f"/api/v1/snapshots/{snapshot.id}", None),
        ("GET", f"/api/v1/steps/{step.id}", None),
        ("PUT", f"/api/v1/steps/{step.id}/heartbeat", {"liveness_timeout_seconds": 5}),
        ("PATCH", f"/api/v1/steps/{step.id}", {"status_reason": "x"}),
        ("POST", "/api/v1/steps", {"run_id": str(run.id), "name": "n", "status": "running"}),
        ("GET", f"/api/v1/steps?run_id={run.id}", None),
        ("PATCH", f"/api/v1/runs/{run.id}", {"status": "stopping"}),  # another run's stop
        ("DELETE", f"/api/v1/runs/{things.run.id}", None),
        ("POST", f"/api/v1/runs/{things.run.id}/token", None),
        ("GET", f"/api/v1/runs?project_id={world.a.id}", None),
        ("GET", "/api/v1/users", None),
        ("GET", "/api/v1/projects", None),
        ("POST", "/api/v1/components", {"name": "c", "type": "orchestrator", "flavor": "local"}),
        ("GET", f"/api/v1/schedules/{things.schedule.id}", None),
        ("POST", "/api/v1/pipelines", {"project_id": str(world.a.id), "name": "p"}),
        # a version of its project, said to be produced by another run's step
        ("POST", "/api/v1/artifact_versions", {**version, "producer_step_run_id": str(step.id)}),
        (
            "POST",
            "/api/v1/artifact_versions/batch",
            {"versions": [version, {**version, "producer_step_run_id": str(step.id)}]},
        ),
    ]
    for method, path, payload in forbidden:
        response = runner.request(method, path, json=payload)
        assert response.status_code == 403, (method, path, response.text)
    _, other_run, other_step = _other_run(world, things, world.b)  # another project: unseen
    for path in (f"/api/v1/runs/{other_run.id}", f"/api/v1/steps/{other_step.id}"):
        assert runner.get(path).status_code == 404
    assert runner.get(f"/api/v1/artifact_versions?project_id={world.b.id}").status_code == 404
    assert world.stores.store.runs.get(things.run.id).status.value == "running"
    assert world.stores.store.artifacts.list_versions().total == 1  # the fixture's only


def test_runs_record_the_user_who_created_them(world: World) -> None:
    things = Things(world)
    body = {
        "project_id": str(world.a.id),
        "pipeline_id": str(things.pipeline.id),
        "snapshot_id": str(things.snapshot.id),
        "name": "mine",
        "user_id": str(world.users["viewer"].id),
    }
    run = world.as_role("member").post("/api/v1/runs", json=body).json()
    assert run["user_id"] == str(world.users["member"].id)


def _member_role_change(world: World, method: str, role: str | None = None) -> None:
    """``method`` on project A's membership of "member", by project A's admin."""
    user_id = str(world.users["member"].id)
    members = f"/api/v1/projects/{world.a.id}/members"
    padmin = world.as_role("padmin")
    if role is None:
        response = padmin.request(method, members, params={"user_id": user_id})
    else:
        response = padmin.request(method, members, json={"user_id": user_id, "role": role})
    assert response.status_code in (200, 204), response.text


@pytest.mark.parametrize("change", ["removed", "made viewer"])
def test_dies_in_its_project_once_its_user_may_no_longer_write_there(
    world: World, scoped: tuple[Things, httpx.Client], change: str
) -> None:
    from wharf.server.auth.cache import AuthCache

    world.state.auth_cache = AuthCache(60)  # a token checked just before is refused at once
    things, runner = scoped
    run_path = f"/api/v1/runs/{things.run.id}"
    assert runner.get(run_path).status_code == 200
    if change == "removed":
        _member_role_change(world, "DELETE")
    else:
        _member_role_change(world, "PUT", "viewer")
    expected = (
        "The account that requested this run token may no longer write in project 'A': the "
        "token is refused."
    )
    for method, path, payload in (
        ("GET", run_path, None),
        ("PUT", f"{run_path}/heartbeat", {"host": "h", "pid": 1, "liveness_timeout_seconds": 30}),
        ("POST", "/api/v1/steps", things.step_body()),
    ):
        refused = runner.request(method, path, json=payload)
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.json()["detail"] == expected
    _member_role_change(world, "PUT", "member")
    assert runner.get(run_path).status_code == 200  # nothing else about it was revoked
