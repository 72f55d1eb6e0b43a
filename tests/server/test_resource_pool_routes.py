# ruff: noqa: F811  (fixtures imported from resource_world)
"""The team's Resource Manager read through the workspace server: pools, policies, descriptors
(any authenticated caller), queues and allocations (only with an RM administrator's credential
behind the server: said so otherwise), and ``explain`` / ``cancel`` of a request with the
caller's rights. Real HTTP, a real Resource Manager behind the server."""

from __future__ import annotations

import httpx
import pytest

from tests.server.resource_world import (  # noqa: F401 (fixtures)
    POOL,
    Team,
    _rm_sqlite_template,
    rm_server,
    team,
    team_without_rm,
)

API = "/api/v1"
ROLES = ("anonymous", "viewer", "member", "other", "admin")


def _codes(team: Team, method: str, path: str) -> dict[str, int]:
    clients = {role: team.world.as_role(role) for role in ROLES}
    return {role: clients[role].request(method, path).status_code for role in ROLES}


@pytest.mark.parametrize(
    "path",
    [
        "/resource_pools",
        f"/resource_pools/{POOL}",
        "/resource_policies",
        f"/resource_policies?pool={POOL}",
        "/resource_descriptors",
    ],
)
def test_configuration_is_read_by_every_account(team: Team, path: str) -> None:
    assert _codes(team, "GET", f"{API}{path}") == {
        "anonymous": 401,
        "viewer": 200,
        "member": 200,
        "other": 200,
        "admin": 200,
    }


def test_what_is_read(team: Team) -> None:
    member = team.world.as_role("member")
    assert [p["name"] for p in member.get(f"{API}/resource_pools").json()] == [POOL]
    assert member.get(f"{API}/resource_pools/{POOL}").json()["name"] == POOL
    names = {d["name"] for d in member.get(f"{API}/resource_descriptors").json()}
    assert "license" in names
    missing = member.get(f"{API}/resource_pools/nowhere")
    assert missing.status_code == 404 and "nowhere" in missing.json()["detail"]


def test_queues_need_an_rm_administrator_behind_the_server(team: Team) -> None:
    # the server logs in to the RM as alice, who is no RM administrator
    for path in (f"/resource_pools/{POOL}/queue", f"/resource_pools/{POOL}/allocations"):
        answer = team.world.as_role("member").get(f"{API}{path}")
        assert answer.status_code == 409
        assert "not an RM administrator" in answer.json()["detail"]


def test_without_a_resource_manager(team_without_rm: Team) -> None:
    answer = team_without_rm.world.as_role("member").get(f"{API}/resource_pools")
    assert answer.status_code == 409 and "no Resource Manager" in answer.json()["detail"]


def test_explain_and_cancel_with_the_callers_rights(team: Team) -> None:
    run_ = team.run()
    store = team.rest("member")
    held = [store.steps.create(team.queued(run_, f"s{i}")) for i in range(2)]
    waiting = store.steps.create(team.queued(run_, "waiting"))
    path = f"{API}/resource_requests/{waiting.resource_request_id}"
    assert _codes(team, "GET", f"{path}/explain") == {
        "anonymous": 401,
        "viewer": 200,
        "member": 200,
        "other": 404,
        "admin": 200,
    }
    explained = team.world.as_role("viewer").get(f"{path}/explain").json()
    assert explained["outcome"] == "waiting" and explained["positions"][0]["pool_name"] == POOL
    clients: dict[str, httpx.Client] = {r: team.world.as_role(r) for r in ROLES}
    assert clients["viewer"].post(f"{path}/cancel").status_code == 403
    assert clients["other"].post(f"{path}/cancel").status_code == 404
    cancelled = clients["member"].post(f"{path}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    again = clients["member"].post(f"{path}/cancel")  # a finished one comes back unchanged
    assert again.status_code == 200 and again.json()["status"] == "cancelled"
    assert all(s.resource_request_id for s in held)
