# ruff: noqa: F811  (fixtures imported from resource_world)
"""``/api/v1/resource_requests``: who sees, renews and releases which request (over real HTTP,
with a real Resource Manager behind the workspace server), filters and paging, and the answers
when the Resource Manager is down (503) or not configured (409)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
    team_without_rm,
)
from wharf.store.models import PipelineRunRecord, StepRunRecord

PATH = "/api/v1/resource_requests"
RENEW = {"lease_seconds": 120, "runtime_state": "running"}


@dataclass
class Requests:
    team: Team
    run1: PipelineRunRecord
    run2: PipelineRunRecord
    a1: StepRunRecord
    a2: StepRunRecord
    b: StepRunRecord
    clients: dict[str, httpx.Client]

    def id(self, step: StepRunRecord) -> str:
        assert step.resource_request_id is not None
        return str(step.resource_request_id)

    def listed(self, role: str, **params: Any) -> set[str]:
        answer = self.clients[role].get(PATH, params=params)
        assert answer.status_code == 200, answer.text
        return {item["id"] for item in answer.json()["items"]}


@pytest.fixture
def made(team: Team) -> Requests:
    """Requests of two runs of project A and one run of project B."""
    run1, run2 = team.run("member"), team.run("member")
    a1 = team.rest("member").steps.create(team.queued(run1, "a1"))
    a2 = team.rest("member").steps.create(team.queued(run2, "a2"))
    run_b = team.run("other", project="B")
    b = team.rest("other").steps.create(team.queued(run_b, "b"))
    clients = {role: team.world.as_role(role) for role in team.world.credentials}
    clients["run1"] = team.world.client(team.run_token(run1))
    clients["run2"] = team.world.client(team.run_token(run2))
    return Requests(team, run1, run2, a1, a2, b, clients)


def _codes(made: Requests, method: str, path: str, body: Any = None) -> dict[str, int]:
    roles = ("anonymous", "viewer", "member", "other", "admin", "run1", "run2")
    return {role: made.clients[role].request(method, path, json=body).status_code for role in roles}


def test_get_by_role(made: Requests) -> None:
    path = f"{PATH}/{made.id(made.a1)}"
    assert _codes(made, "GET", path) == {
        "anonymous": 401,
        "viewer": 200,
        "member": 200,
        "other": 404,
        "admin": 200,
        "run1": 200,
        "run2": 403,
    }
    answer = made.clients["member"].get(path).json()
    assert answer["metadata"]["step_name"] == "a1" and answer["status"] == "allocated"
    assert answer["demands"][0]["resource"] == "license"


def test_other_projects_requests_look_like_unknown_ones(made: Requests) -> None:
    hidden = made.clients["member"].get(f"{PATH}/{made.id(made.b)}")
    unknown = made.clients["member"].get(f"{PATH}/{'0' * 8}-0000-4000-8000-{'0' * 12}")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["detail"].startswith("No resource request with id")
    assert unknown.json()["detail"].startswith("No resource request with id")
    assert hidden.json()["type"] == unknown.json()["type"] == "EntityNotFoundError"


def test_renew_by_role(made: Requests) -> None:
    path = f"{PATH}/{made.id(made.a1)}/renew"
    assert _codes(made, "POST", path, RENEW) == {
        "anonymous": 401,
        "viewer": 403,
        "member": 200,
        "other": 404,
        "admin": 200,
        "run1": 200,
        "run2": 403,
    }
    renewed = made.clients["run1"].post(path, json=RENEW).json()
    assert renewed["runtime_state"] == "running" and renewed["status"] == "allocated"


def test_release_by_role(made: Requests) -> None:
    a1, a2 = f"{PATH}/{made.id(made.a1)}/release", f"{PATH}/{made.id(made.a2)}/release"
    for role, code in (("anonymous", 401), ("viewer", 403), ("other", 404), ("run2", 403)):
        assert made.clients[role].post(a1).status_code == code, role
    answer = made.clients["run1"].post(a1, json={"idempotency_key": "once"})
    assert answer.status_code == 200 and answer.json()["status"] == "released"
    assert made.clients["member"].post(a2).json()["status"] == "released"


def test_only_the_holder_or_a_project_admin_releases_a_request(made: Requests) -> None:
    """Another member of the project may not end a teammate's step by releasing or cancelling
    its request (403 naming the holder); a project admin and a global admin may."""
    from wharf.store.account_models import ProjectRole

    world = made.team.world
    boss = made.clients["boss"]  # a member of A, as ``member`` who made the runs
    lead = world.client(world.member("lead", world.a, ProjectRole.ADMIN))
    a1, a2 = made.id(made.a1), made.id(made.a2)
    for action in ("release", "cancel"):
        refused = boss.post(f"{PATH}/{a1}/{action}")
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == (
            f"Request {a1} is held by user 'member'; only they or a project admin can {action} it."
        )
    assert made.clients["member"].get(f"{PATH}/{a1}").json()["status"] == "allocated"
    assert lead.post(f"{PATH}/{a1}/release").json()["status"] == "released"
    released = made.clients["admin"].post(f"{PATH}/{a2}/release").json()
    assert released["status_reason"] == "Released by service account 'test-admin' (admin)."


def test_lists_show_only_what_the_caller_may_see(made: Requests) -> None:
    a1, a2, b = made.id(made.a1), made.id(made.a2), made.id(made.b)
    assert made.listed("admin") == {a1, a2, b}
    assert made.listed("admin", project_id=str(made.team.world.b.id)) == {b}
    assert made.listed("member") == made.listed("viewer") == {a1, a2}
    assert made.listed("other") == {b}
    assert made.listed("run1") == {a1}
    assert made.listed("run2") == {a2}
    # naming another project's id in a metadata filter finds nothing rather than its requests
    assert made.listed("member", **{"metadata[project_id]": str(made.team.world.b.id)}) == set()
    assert made.listed("run1", **{"metadata[pipeline_run_id]": str(made.run2.id)}) == set()
    assert (
        made.clients["member"]
        .get(PATH, params={"project_id": str(made.team.world.b.id)})
        .status_code
        == 404
    )
    assert made.clients["anonymous"].get(PATH).status_code == 401


def test_lists_filter_and_page(made: Requests) -> None:
    a1, a2 = made.id(made.a1), made.id(made.a2)
    made.clients["member"].post(f"{PATH}/{a2}/release")
    assert made.listed("member", status="allocated") == {a1}
    assert made.listed("member", status=["allocated", "released"]) == {a1, a2}
    assert made.listed("member", **{"metadata[step_name]": "a2"}) == {a2}
    assert made.listed("member", subject_id=str(made.run1.id)) == {a1}
    assert made.listed("member", subject_type="step_run") == {a1, a2}
    assert made.listed("member", requester="alice") == {a1, a2}
    assert made.listed("member", requester="bob") == set()
    page = made.clients["member"].get(PATH, params={"size": 1, "index": 2, "sort": "asc"}).json()
    assert (page["total"], page["index"], page["size"]) == (2, 2, 1)
    assert [item["id"] for item in page["items"]] == [a2]


@pytest.mark.parametrize(
    ("method", "suffix", "body", "params"),
    [
        ("POST", "/renew", {"lease_seconds": 0}, None),
        ("POST", "/renew", {"lease_seconds": 10, "runtime_state": "dancing"}, None),
        ("POST", "/renew", {"lease_seconds": 10, "extra": 1}, None),
        ("GET", "", None, {"status": "sleeping"}),
        ("GET", "", None, {"subject_type": "planet"}),
        ("GET", "", None, {"size": 0}),
    ],
)
def test_bad_input_is_a_4xx_with_a_detail(
    made: Requests, method: str, suffix: str, body: Any, params: Any
) -> None:
    path = PATH if method == "GET" else f"{PATH}/{made.id(made.a1)}{suffix}"
    answer = made.clients["member"].request(method, path, json=body, params=params)
    assert 400 <= answer.status_code < 500 and isinstance(answer.json()["detail"], str)
    duplicated = made.clients["member"].get(f"{PATH}?metadata[step_name]=a&metadata[step_name]=b")
    assert duplicated.status_code == 400 and "more than once" in duplicated.json()["detail"]
    assert made.clients["member"].get(f"{PATH}/not-an-id").status_code == 422


def test_resource_manager_down_is_503(made: Requests) -> None:
    assert made.team.rm is not None
    made.team.rm.stop()
    for method, path, body in (
        ("GET", PATH, None),
        ("GET", f"{PATH}/{made.id(made.a1)}", None),
        ("POST", f"{PATH}/{made.id(made.a1)}/renew", RENEW),
        ("POST", f"{PATH}/{made.id(made.a1)}/release", None),
    ):
        answer = made.clients["admin"].request(method, path, json=body)
        assert answer.status_code == 503, (path, answer.text)
        assert "Resource Manager" in answer.json()["detail"]
        assert answer.json()["type"] == "StoreUnavailableError"
    assert made.clients["anonymous"].get(PATH).status_code == 401  # authentication first


def test_a_wrong_token_for_the_rm_is_the_servers_outage(made: Requests) -> None:
    from wharf.resource_manager.client.http import HttpResourceManager
    from wharf.server.resource_manager import ServerRequests

    assert made.team.rm is not None
    state = made.team.world.state
    wrong = HttpResourceManager(made.team.rm.url, api_key="wrm.alice." + "f" * 48)
    try:
        state.resource_requests = ServerRequests(wrong)
        answer = made.clients["admin"].get(PATH)
    finally:
        wrong.close()
    assert answer.status_code == 503
    assert "refused the workspace server's credentials" in answer.json()["detail"]


def test_without_a_resource_manager_the_routes_say_so(team_without_rm: Team) -> None:
    member = team_without_rm.world.as_role("member")
    answer = member.get(PATH)
    assert answer.status_code == 409 and "no Resource Manager" in answer.json()["detail"]
    assert team_without_rm.world.as_role("anonymous").get(PATH).status_code == 401
