"""Bad input and abuse: always a 4xx with a JSON ``detail``, never a 5xx, nothing half-written."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx

from tests.server.conftest import World
from tests.server.matrix import Things
from wharf.config.spec import PipelineSpec
from wharf.store.models import StepRunFilter


def check(response: httpx.Response, status: int) -> dict[str, object]:
    assert response.status_code == status, response.text
    answer = response.json()
    assert isinstance(answer["detail"], str) and answer["detail"], answer
    return dict(answer)


def test_malformed_json_wrong_types_and_unknown_fields(world: World) -> None:
    admin = world.as_role("admin")
    headers = {"content-type": "application/json"}
    broken = check(admin.post("/api/v1/projects", content=b'{"name": ', headers=headers), 422)
    assert broken["detail"] == (  # it read "'[9]' is not valid JSON", an offset for a field
        "Invalid request: the body is not valid JSON at position 9: Expecting value."
    )
    check(admin.post("/api/v1/projects", content=b"[1, 2]", headers=headers), 422)
    check(admin.post("/api/v1/projects", json={"name": 42}), 422)
    unknown = check(admin.post("/api/v1/projects", json={"name": "x", "owner": "me"}), 422)
    assert "owner" in str(unknown["detail"])
    check(
        admin.put(
            f"/api/v1/steps/{world.a.id}/heartbeat", json={"liveness_timeout_seconds": "soon"}
        ),
        422,
    )
    check(
        admin.put(f"/api/v1/steps/{world.a.id}/heartbeat", json={"liveness_timeout_seconds": -1}),
        422,
    )
    check(admin.get("/api/v1/runs/not-a-uuid"), 422)
    check(admin.get("/api/v1/nowhere"), 404)
    check(admin.delete("/api/v1/projects"), 405)
    assert world.stores.store.projects.list().total == 2  # A and B only


def test_oversized_bodies_are_413(world: World) -> None:
    admin = world.as_role("admin")
    limit = world.state.settings.max_body_bytes
    big = {"name": "x", "description": "y" * (limit + 10)}
    check(admin.post("/api/v1/service_accounts", json=big), 413)

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        yield b'{"name": "x", "description": "'
        for _ in range(limit // 65536 + 2):
            yield b"z" * 65536
        yield b'"}'

    check(admin.post("/api/v1/service_accounts", content=chunks()), 413)
    assert world.state.accounts.service_accounts.list().total == 1  # only the test admin


def test_paging_and_filters_are_bounded(world: World) -> None:
    member = world.as_role("member")
    a = world.a.id
    check(member.get(f"/api/v1/runs?project_id={a}&size=1001"), 422)
    check(member.get(f"/api/v1/runs?project_id={a}&size=0"), 422)
    check(member.get(f"/api/v1/runs?project_id={a}&index=0"), 422)
    check(member.get(f"/api/v1/runs?project_id={a}&index=99999999999999999999"), 422)
    check(member.get(f"/api/v1/runs?project_id={a}&sort=sideways"), 422)
    for bad in ("oneof:[", "oneof:{}", "oneof:[]", "oneof:[1, 2]", 'oneof:["' + "n" * 300 + '"]'):
        check(member.get("/api/v1/steps", params={"project_id": str(a), "name": bad}), 422)
    check(member.get("/api/v1/steps", params={"project_id": str(a), "status": "sleeping"}), 422)
    too_many = "oneof:" + json.dumps([f"s{i}" for i in range(501)])
    detail = check(
        member.get("/api/v1/steps", params={"project_id": str(a), "name": too_many}), 422
    )
    assert "more than the 500 allowed" in str(detail["detail"])
    huge = "oneof:" + json.dumps([f"step-{i:05d}" for i in range(700)])
    detail = check(member.get("/api/v1/steps", params={"project_id": str(a), "name": huge}), 414)
    assert "split" in str(detail["detail"])


def test_values_the_database_cannot_hold_are_4xx(db_world: World) -> None:
    admin = db_world.as_role("admin")
    things = Things(db_world)
    step = {"run_id": str(things.run.id), "status": "running"}
    schedule = {
        "project_id": str(db_world.a.id),
        "pipeline_id": str(things.pipeline.id),
        "snapshot_id": str(things.snapshot.id),
        "name": "s",
    }
    metadata = {"resource_type": "pipeline_run", "resource_id": str(things.run.id)}
    version = things.version_create().model_dump(mode="json")
    refused = [  # invalid on every backend: 4xx
        ("/api/v1/projects", {"name": "x" * 256}),
        # only the server records a step's resource request (a caller's chosen id is its own:
        # the server scopes it, so another step run's id names a new one, not refused here)
        ("/api/v1/steps", {**step, "name": "f", "resource_request_id": str(things.run.id)}),
        ("/api/v1/steps", {**step, "name": "a", "attempt": 2**40}),
        ("/api/v1/steps", {**step, "name": "b", "cache_expires_at": "0001-01-01T00:00:00+14:00"}),
        ("/api/v1/schedules", {**schedule, "interval_seconds": 2**40}),
        # a lone surrogate is not text any backend can store, also inside a JSON document
        ("/api/v1/steps", {**step, "name": "g", "parameters": {"p": "a\udc00b"}}),
        ("/api/v1/steps", {**step, "name": "h", "status_reason": "a\udc00b"}),
        ("/api/v1/artifact_versions", {**version, "uri": "/a/\ud800"}),
        ("/api/v1/run_metadata", {**metadata, "values": {"k": ["\ud800"]}}),
        # NUL in text, which PostgreSQL cannot store, is refused on every backend
        ("/api/v1/projects", {"name": "nul\x00byte"}),
        ("/api/v1/steps", {**step, "name": "\x00"}),
        ("/api/v1/steps", {**step, "name": "i", "status_reason": "a\x00b"}),
        ("/api/v1/artifact_versions", {**version, "uri": "/a/\x00"}),
        ("/api/v1/run_metadata", {**metadata, "values": {"k\x00": 1}}),
        # NaN and the infinities, which JSON has not: stored as null before
        ("/api/v1/run_metadata", {**metadata, "values": {"a": float("nan")}}),
        ("/api/v1/run_metadata", {**metadata, "values": {"b": {"c": [float("-inf")]}}}),
        # over the columns' length on some backend: refused on every one
        ("/api/v1/steps", {**step, "name": "c", "cache_key": "k" * 300}),
        ("/api/v1/steps", {**step, "name": "j", "status_reason": "x" * 70_000}),
        ("/api/v1/artifact_versions", {**version, "uri": "/a/" + "x" * 70_000}),
    ]
    # but a spec's parameter is kept as given (``core.exact_values``), a lone surrogate too
    snapshot = {
        "project_id": str(db_world.a.id),
        "pipeline_id": str(things.pipeline.id),
        "spec": {"name": "p", "steps": {}, "parameters": {"x": "\udfff"}},
    }
    stored = admin.post(
        "/api/v1/snapshots",
        content=json.dumps(snapshot).encode(),
        headers={"content-type": "application/json"},
    )
    assert stored.status_code == 201, stored.text
    read = admin.get(f"/api/v1/snapshots/{stored.json()['id']}").json()
    assert PipelineSpec.model_validate(read["spec"]).parameters == {"x": "\udfff"}
    for path, payload in refused:
        body = json.dumps(payload).encode()  # ASCII: "\udc00" escapes, as any client may send
        response = admin.post(path, content=body, headers={"content-type": "application/json"})
        assert response.status_code < 500, (path, payload, response.text)
        assert isinstance(response.json(), dict)
        assert 400 <= response.status_code < 500, (path, payload, response.text)
        assert isinstance(response.json()["detail"], str)
    deep = b'{"run_id": "%s", "name": "d", "status": "running", "parameters": ' % (
        str(things.run.id).encode()
    )
    deep += b"[" * 50_000 + b"]" * 50_000 + b"}"
    response = admin.post(
        "/api/v1/steps", content=deep, headers={"content-type": "application/json"}
    )
    assert 400 <= response.status_code < 500
    created = db_world.stores.store.steps.list(StepRunFilter(run_id=things.run.id)).total
    assert created == 1


def test_batches_are_all_or_nothing(db_world: World) -> None:
    member = db_world.as_role("member")
    things = Things(db_world)
    run = str(things.run.id)
    good = {"run_id": run, "name": "fine", "status": "running"}
    unknown_input = {
        "run_id": run,
        "name": "bad",
        "status": "running",
        "inputs": {"x": str(db_world.b.id)},
    }
    check(member.post("/api/v1/steps/batch", json={"steps": [good, unknown_input]}), 404)
    check(member.post("/api/v1/steps/batch", json={"steps": [good, good]}), 409)
    existing = {"run_id": run, "name": things.step.name, "status": "running"}
    check(member.post("/api/v1/steps/batch", json={"steps": [good, existing]}), 409)
    check(
        member.post(
            "/api/v1/steps/batch",
            json={"steps": [good, {**good, "name": "t", "status": "completed"}]},
        ),
        409,
    )
    assert db_world.stores.store.steps.list(StepRunFilter(run_id=things.run.id)).total == 1

    version = things.version_create().model_dump(mode="json")
    orphan = {**version, "producer_step_run_id": str(db_world.a.id)}
    check(member.post("/api/v1/artifact_versions/batch", json={"versions": [version, orphan]}), 404)
    assert db_world.stores.store.artifacts.list_versions().total == 1  # the fixture's only


def test_a_body_not_sent_as_json_is_told_so(world: World) -> None:
    admin = world.as_role("admin")
    body = b'{"name": "sent-as-text"}'
    for headers, said in (
        ({}, "no Content-Type"),
        ({"content-type": "text/plain"}, "'text/plain'"),
    ):
        answer = check(admin.post("/api/v1/projects", content=body, headers=headers), 422)
        assert "Content-Type: application/json" in answer["detail"], answer
        assert said in answer["detail"], answer
    check(world.client().post("/api/v1/auth/login", content=b"{}"), 422)
    as_json = {"content-type": "application/json"}
    listed = check(admin.post("/api/v1/projects", content=b"[1]", headers=as_json), 422)
    assert "Content-Type" not in listed["detail"]  # JSON, just not an object
    assert world.stores.store.projects.list().total == 2  # A and B only


def test_a_pipeline_name_the_sdk_refuses_is_refused(world: World) -> None:
    """A pipeline's name is a folder of the artifact store: the server took '../../etc/passwd'
    and 'a/b', which the SDK refuses."""
    member = world.as_role("member")
    for name in ("../../etc/passwd", "a/b", "..", "a\\b", "x::y"):
        body = {"project_id": str(world.a.id), "name": name}
        refused = check(member.post("/api/v1/pipelines", json=body), 400)
        assert "A pipeline name must not contain" in str(refused["detail"])
    assert world.stores.store.pipelines.list().total == 0
    body = {"project_id": str(world.a.id), "name": "fine"}
    assert member.post("/api/v1/pipelines", json=body).status_code == 200
