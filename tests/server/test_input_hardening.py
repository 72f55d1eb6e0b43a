"""Input the server refuses over real HTTP: schedules with an invalid or never-firing cron
expression, without exactly one trigger or of another pipeline's snapshot, unsafe names, and
bodies sent by callers who are not authenticated (401 before any validation detail)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.server.conftest import World
from tests.store.conftest import spec
from wharf.store.models import SnapshotCreate


def check(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    answer = response.json()
    assert isinstance(answer["detail"], str) and answer["detail"], answer
    return dict(answer)


# ----------------------------------------------------------------------------- schedules


def _schedule_body(world: World, **fields: Any) -> dict[str, Any]:
    store = world.stores.store
    pipeline = store.pipelines.get_or_create(world.a.id, "pipe")
    snapshot = store.snapshots.create(
        SnapshotCreate(project_id=world.a.id, pipeline_id=pipeline.id, spec=spec())
    )
    return {
        "project_id": str(world.a.id),
        "pipeline_id": str(pipeline.id),
        "snapshot_id": str(snapshot.id),
        "name": "nightly",
        **fields,
    }


@pytest.mark.parametrize("cron", ["not a cron", "99 * * * *", "", "* * *", "* * * * * *"])
def test_a_schedule_with_an_invalid_cron_expression_is_422_and_not_stored(
    world: World, cron: str
) -> None:
    member = world.as_role("member")
    answer = check(
        member.post("/api/v1/schedules", json=_schedule_body(world, cron_expression=cron)), 422
    )
    assert "cron" in answer["detail"].lower()
    assert world.stores.store.schedules.list().total == 0
    listed = member.get(f"/api/v1/schedules?project_id={world.a.id}")
    assert listed.status_code == 200 and listed.json()["items"] == []


@pytest.mark.parametrize("cron", ["0 0 30 2 *", "0 12 31 4,6,9,11 *"])
def test_a_cron_expression_that_never_fires_is_422_and_not_stored(world: World, cron: str) -> None:
    """It parses, but names no date that exists (February 30th): such a schedule never fires."""
    member = world.as_role("member")
    answer = check(
        member.post("/api/v1/schedules", json=_schedule_body(world, cron_expression=cron)), 422
    )
    assert f"Cron expression {cron!r} never fires" in answer["detail"]
    assert world.stores.store.schedules.list().total == 0


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({}, "exactly one of"),  # no trigger: it would never fire, yet list as 'once'
        ({"cron_expression": "0 3 * * *", "interval_seconds": 60}, "exactly one of"),
        (
            {
                "interval_seconds": 60,
                "start_time": "2030-01-02T00:00:00Z",
                "end_time": "2030-01-01T00:00:00Z",
            },
            "end_time must be after its start_time",
        ),
    ],
)
def test_a_schedule_without_one_trigger_or_ending_before_it_starts_is_422(
    world: World, fields: dict[str, Any], said: str
) -> None:
    """The rules of the SDK's ``Schedule`` hold for a schedule created over the API too."""
    member = world.as_role("member")
    answer = check(member.post("/api/v1/schedules", json=_schedule_body(world, **fields)), 422)
    assert said in answer["detail"]
    assert world.stores.store.schedules.list().total == 0


def test_a_schedule_of_another_pipelines_snapshot_is_400(world: World) -> None:
    """Its runs would be recorded as runs of one pipeline made from another's snapshot."""
    store = world.stores.store
    body = _schedule_body(world, interval_seconds=60)
    other = store.pipelines.get_or_create(world.a.id, "other")
    body["pipeline_id"] = str(other.id)
    for credential in ("member", "admin"):
        answer = check(world.as_role(credential).post("/api/v1/schedules", json=body), 400)
        assert "is of pipeline 'pipe', not of pipeline 'other'" in answer["detail"]
    assert store.schedules.list().total == 0


def test_an_admins_schedule_of_another_projects_pipeline_or_snapshot_is_400(
    world: World,
) -> None:
    """An admin may name anything, but a schedule of project B firing A's pipeline would record
    B's runs of A's pipeline (a member is told they are missing, as elsewhere)."""
    store = world.stores.store
    admin = world.as_role("admin")
    of_a = _schedule_body(world, interval_seconds=60)
    in_b = {**of_a, "project_id": str(world.b.id)}
    answer = check(admin.post("/api/v1/schedules", json=in_b), 400)
    assert answer["detail"] == (
        "Pipeline 'pipe' is of project 'A', not of project 'B': a schedule fires a pipeline of "
        "its own project."
    )
    b_pipeline = store.pipelines.get_or_create(world.b.id, "pipe")
    b_snapshot = store.snapshots.create(
        SnapshotCreate(project_id=world.b.id, pipeline_id=b_pipeline.id, spec=spec())
    )
    mixed = {**in_b, "pipeline_id": str(b_pipeline.id)}  # B's pipeline, A's snapshot
    answer = check(admin.post("/api/v1/schedules", json=mixed), 400)
    assert answer["detail"].startswith(f"Snapshot {of_a['snapshot_id']} is of project 'A'")
    assert check(world.as_role("other").post("/api/v1/schedules", json=mixed), 404)
    assert store.schedules.list().total == 0
    fine = {**mixed, "snapshot_id": str(b_snapshot.id)}
    assert admin.post("/api/v1/schedules", json=fine).status_code == 201


def test_a_schedule_whose_end_time_has_passed_is_400_and_not_stored(world: World) -> None:
    """It would never fire: refused on the server's clock (the one its firings are checked on),
    while an end time still to come is stored."""
    member = world.as_role("member")
    now = datetime.fromtimestamp(world.clock.now, UTC)
    ended = _schedule_body(world, interval_seconds=60, end_time=(now - timedelta(minutes=1)))
    answer = check(member.post("/api/v1/schedules", json=_jsonable(ended)), 400)
    shown = (now - timedelta(minutes=1)).strftime("%Y-%m-%d %H:%M:%S")
    assert answer["detail"] == (
        f"The schedule's end_time ({shown} UTC) has already passed, so it would never fire: "
        "give a later end_time, or none."
    )
    assert world.stores.store.schedules.list().total == 0
    ending = {**ended, "end_time": (now + timedelta(minutes=1)).isoformat()}
    assert member.post("/api/v1/schedules", json=_jsonable(ending)).status_code == 201


def _jsonable(body: dict[str, Any]) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in body.items()}


def test_a_schedule_with_a_valid_cron_expression_is_stored(world: World) -> None:
    member = world.as_role("member")
    created = member.post(
        "/api/v1/schedules", json=_schedule_body(world, cron_expression="0 3 * * *")
    )
    assert created.status_code == 201, created.text
    assert created.json()["cron_expression"] == "0 3 * * *"


# ----------------------------------------------------------------------------- authentication first

# (method, path, invalid body): routes that need a principal, each sent a body that fails
# validation. An anonymous or badly authenticated caller learns nothing about the schema.
_INVALID_BODIES: list[tuple[str, str, Any]] = [
    ("POST", "/api/v1/projects", {"name": 42, "owner": "me"}),
    ("POST", "/api/v1/schedules", {"cron_expression": 5}),
    ("POST", "/api/v1/service_accounts", [1, 2]),
    ("POST", "/api/v1/users", {"unexpected": True}),
    ("PUT", "/api/v1/steps/00000000000000000000000000000000/heartbeat", {"x": "y"}),
    ("POST", "/api/v1/runs", "not json at all"),
    ("GET", "/api/v1/runs/not-a-uuid", None),
    ("GET", "/api/v1/schedules?project_id=nope", None),
]


def _send(client: httpx.Client, method: str, path: str, payload: Any) -> httpx.Response:
    if payload is None:
        return client.request(method, path)
    if isinstance(payload, str):
        return client.request(
            method, path, content=payload.encode(), headers={"content-type": "application/json"}
        )
    return client.request(method, path, json=payload)


@pytest.mark.parametrize(("method", "path", "payload"), _INVALID_BODIES)
@pytest.mark.parametrize("credential", [None, "not-a-real-token"])
def test_an_unauthenticated_request_with_an_invalid_body_is_401(
    world: World, method: str, path: str, payload: Any, credential: str | None
) -> None:
    response = _send(world.client(credential), method, path, payload)
    answer = check(response, 401)
    assert answer["type"] == "AuthenticationError"
    assert "errors" not in answer
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path", "payload"), _INVALID_BODIES)
def test_an_authenticated_request_with_an_invalid_body_is_still_422(
    world: World, method: str, path: str, payload: Any
) -> None:
    check(_send(world.as_role("admin"), method, path, payload), 422)


def test_login_validation_stays_422_for_anyone(world: World) -> None:
    check(world.client().post("/api/v1/auth/login", json={"username": 1}), 422)


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize("name", ["dup ", " dup", "du\u200bp", "du\x07p", "du\u00a0p"], ids=repr)
def test_unsafe_names_are_refused_with_a_json_message(world: World, name: str) -> None:
    admin = world.as_role("admin")
    answer = check(admin.post("/api/v1/projects", json={"name": name}), 400)
    assert answer["type"] == "InputError" and "project name" in answer["detail"]
    assert world.stores.store.projects.list().total == 2  # A and B only


def test_names_are_stored_in_nfc(world: World) -> None:
    admin = world.as_role("admin")
    created = admin.post("/api/v1/projects", json={"name": "cafe\u0301"})
    assert created.status_code == 201, created.text
    assert created.json()["name"] == "caf\u00e9"
    check(admin.post("/api/v1/projects", json={"name": "caf\u00e9"}), 409)


# ----------------------------------------------------------------------------- descriptions


@pytest.mark.parametrize(
    ("description", "fragment"),
    [
        ("two\nlines", "U+000A"),
        ("a\ttab", "U+0009"),
        ("para\u2029graph", "U+2029"),
        ("x" * 1001, "at most 1000 characters"),
    ],
    ids=["newline", "tab", "separator", "long"],
)
def test_a_service_account_description_is_one_line_of_text(
    world: World, description: str, fragment: str
) -> None:
    admin = world.as_role("admin")
    body = {"name": "ci", "description": description}
    answer = check(admin.post("/api/v1/service_accounts", json=body), 422)
    assert "'description'" in answer["detail"] and fragment in answer["detail"]
    made = admin.post("/api/v1/service_accounts", json={**body, "description": "CI, café ☕"})
    assert made.status_code == 201, made.text
