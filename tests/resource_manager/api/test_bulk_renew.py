"""``POST /v1/resource-requests/renew``: many renewals in one call, one outcome per item.

Per-item errors (not found, someone else's request) fail their item alone; the batch limit, a
malformed body, an idempotency key and a missing token fail the whole call; on every backend a
lapsed lease comes back expired (or cancelled) rather than revived, as a single renewal would.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import httpx

from tests.conftest import FakeClock
from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import ADMIN_KEY, ALICE_KEY, BOB_KEY, start_rm
from wharf.resource_manager.contract.models import MAX_RENEWALS

RR = "/v1/resource-requests"
BULK = f"{RR}/renew"
MISSING = str(uuid.UUID(int=7))


def _item(request_id: str, lease: int = 120, state: str | None = "running") -> dict[str, Any]:
    return {"id": request_id, "lease_seconds": lease, "runtime_state": state}


def test_each_item_is_answered_alone(
    http: httpx.Client, token: Callable[[str], dict[str, str]], clock: FakeClock
) -> None:
    admin, alice, bob = token(ADMIN_KEY), token(ALICE_KEY), token(BOB_KEY)
    http.post("/v1/pools", json=pool_body(gpus=1), headers=admin)
    http.post("/v1/policies", json=policy_body(), headers=admin)
    held = http.post(RR, json=request_body(run="a"), headers=alice).json()
    waiting = http.post(RR, json=request_body(run="b", gpus=1), headers=alice).json()
    bobs = http.post(RR, json=request_body(run="c"), headers=bob).json()
    assert (held["status"], waiting["status"], bobs["status"]) == (
        "allocated",
        "pending",
        "pending",
    )
    clock.advance(5)

    items = [_item(held["id"]), _item(MISSING), _item(bobs["id"]), _item(waiting["id"], 90, None)]
    response = http.post(BULK, json={"renewals": items}, headers=alice)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["id"] for r in results] == [item["id"] for item in items]  # in the order sent
    ok, missing, foreign, pending = results
    assert ok["status"] == 200 and ok["error"] is None
    assert ok["request"]["runtime_state"] == "running"
    assert ok["request"]["lease_expires_at"] > held["lease_expires_at"]
    assert (missing["status"], missing["error"], missing["request"]) == (
        404,
        "EntityNotFoundError",
        None,
    )
    assert "not found" in missing["detail"]
    assert (foreign["status"], foreign["error"]) == (403, "PermissionDeniedError")
    assert "belongs to another requester" in foreign["detail"]
    assert pending["request"]["status"] == "pending"
    assert pending["request"]["lease_expires_at"] > waiting["lease_expires_at"]
    # The refused item changed nothing; an administrator may renew anyone's request.
    assert http.get(f"{RR}/{bobs['id']}", headers=bob).json() == bobs
    as_admin = http.post(BULK, json={"renewals": [_item(bobs["id"])]}, headers=admin).json()
    assert as_admin["results"][0]["request"]["runtime_state"] == "running"

    released = http.post(f"{RR}/{held['id']}/release", headers=alice).json()
    again = http.post(BULK, json={"renewals": [_item(held["id"])]}, headers=alice).json()
    assert again["results"][0]["request"] == released  # terminal: returned unchanged
    empty = http.post(BULK, json={"renewals": []}, headers=alice)
    assert empty.status_code == 200 and empty.json() == {"results": []}


def test_whole_call_errors(http: httpx.Client, token: Callable[[str], dict[str, str]]) -> None:
    alice = token(ALICE_KEY)
    too_many = {"renewals": [_item(MISSING)] * (MAX_RENEWALS + 1)}
    refused = http.post(BULK, json=too_many, headers=alice)
    assert refused.status_code == 422
    assert refused.json()["error"] == "InputError"
    assert (
        f"At most {MAX_RENEWALS} renewals per call, got {MAX_RENEWALS + 1}"
        in (refused.json()["detail"])
    )
    at_limit = http.post(BULK, json={"renewals": [_item(MISSING)] * MAX_RENEWALS}, headers=alice)
    assert at_limit.status_code == 200 and len(at_limit.json()["results"]) == MAX_RENEWALS

    for body in (
        {"renewals": [_item(MISSING, lease=0)]},
        {"renewals": [_item("not-a-uuid")]},
        {"renewals": [{**_item(MISSING), "when": "now"}]},  # clients send no timestamps
        {"renewals": [_item(MISSING, state="sleeping")]},
        {"items": []},
        [],
    ):
        response = http.post(BULK, json=body, headers=alice)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"] == "InputError"
    lease_zero = http.post(BULK, json={"renewals": [_item(MISSING, lease=0)]}, headers=alice)
    assert "'renewals[0].lease_seconds' must be" in lease_zero.json()["detail"]

    keyed = http.post(BULK, json={"renewals": []}, headers={**alice, "X-Idempotency-Key": "k1"})
    assert keyed.status_code == 400 and "X-Idempotency-Key" in keyed.json()["detail"]
    anonymous = http.post(BULK, json={"renewals": []})
    assert anonymous.status_code == 401
    assert http.get(BULK, headers=alice).status_code == 422  # GET: an id that is no UUID


def test_documented_in_openapi(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    operation = schema["paths"][BULK]["post"]
    assert operation["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ResourceRequestRenewMany"
    }
    answer = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer == {"$ref": "#/components/schemas/ResourceRequestRenewals"}
    renewals = schema["components"]["schemas"]["ResourceRequestRenewMany"]["properties"]
    assert renewals["renewals"]["maxItems"] == MAX_RENEWALS


def test_lapsed_leases_on_every_backend(rm_url: str, clock: FakeClock) -> None:
    """On PostgreSQL and MySQL the renewals run in the service's own renewal transactions (no
    scheduling lock); a lapsed lease is expired by a cycle, never revived, in a bulk call too."""
    server = start_rm(rm_url, clock=clock)
    try:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            login = http.post("/v1/auth/login", json={"api_key": ADMIN_KEY}).json()
            admin = {"Authorization": f"Bearer {login['access_token']}"}
            http.post("/v1/pools", json=pool_body(gpus=1), headers=admin)
            http.post("/v1/policies", json=policy_body(), headers=admin)
            short = http.post(RR, json=request_body(run="s", lease=5), headers=admin).json()
            long = http.post(RR, json=request_body(run="l", lease=600), headers=admin).json()
            assert (short["status"], long["status"]) == ("allocated", "pending")
            clock.advance(10)  # the short lease lapsed; nothing has expired it yet
            items = [_item(short["id"]), _item(long["id"]), _item(MISSING)]
            results = http.post(BULK, json={"renewals": items}, headers=admin).json()["results"]
            assert results[0]["request"]["status"] == "expired"
            assert results[1]["request"]["status"] in ("pending", "allocated")
            assert results[1]["request"]["runtime_state"] == "running"
            assert (results[2]["status"], results[2]["error"]) == (404, "EntityNotFoundError")
    finally:
        server.stop()
