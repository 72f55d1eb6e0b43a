"""``X-Idempotency-Key`` over HTTP: a retried call returns the first result and applies nothing
twice, even when the retries race each other."""

from __future__ import annotations

import threading
from collections.abc import Callable

import httpx

from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import ALICE_KEY, BOB_KEY, LiveServer

RR = "/v1/resource-requests"


def _setup(http: httpx.Client, admin: dict[str, str]) -> None:
    assert http.post("/v1/pools", json=pool_body(gpus=4), headers=admin).status_code == 201
    assert http.post("/v1/policies", json=policy_body(), headers=admin).status_code == 201


def test_a_retried_create_returns_the_first_request(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    admin, alice = token(), token(ALICE_KEY)
    _setup(http, admin)
    keyed = {**alice, "X-Idempotency-Key": "create-1"}
    first = http.post(RR, json=request_body(), headers=keyed)
    second = http.post(RR, json=request_body(), headers=keyed)
    assert first.status_code == second.status_code == 201
    assert second.json() == first.json()
    assert http.get(RR, headers=alice).json()["total"] == 1

    other_body = http.post(RR, json=request_body(gpus=2), headers=keyed)
    assert other_body.status_code == 409
    assert other_body.json()["error"] == "IllegalOperationError"
    assert "already used" in other_body.json()["detail"]

    bob = {**token(BOB_KEY), "X-Idempotency-Key": "create-1"}  # keys are per principal
    assert http.post(RR, json=request_body(), headers=bob).json()["id"] != first.json()["id"]
    assert http.get(RR, headers=alice).json()["total"] == 1  # bob's is his own
    assert http.get(RR, headers=admin).json()["total"] == 2


def test_racing_retries_create_one_request(
    server: LiveServer, token: Callable[[str], dict[str, str]]
) -> None:
    alice = {**token(ALICE_KEY), "X-Idempotency-Key": "race"}
    with httpx.Client(base_url=server.url, timeout=30) as http:
        _setup(http, token())
    ids: list[str] = []
    barrier = threading.Barrier(8)

    def retry() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http:
            barrier.wait()
            response = http.post(RR, json=request_body(), headers=alice)
            assert response.status_code == 201, response.text
            ids.append(response.json()["id"])

    threads = [threading.Thread(target=retry) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(ids) == 8 and len(set(ids)) == 1
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get(RR, headers=alice).json()["total"] == 1


def test_every_mutating_call_honours_the_key(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    admin = token()

    def twice(method: str, path: str, key: str, body: object = None) -> httpx.Response:
        headers = {**admin, "X-Idempotency-Key": key}
        first = http.request(method, path, json=body, headers=headers)
        second = http.request(method, path, json=body, headers=headers)
        assert (first.status_code, first.content) == (second.status_code, second.content)
        return first

    assert twice("POST", "/v1/pools", "p", pool_body()).status_code == 201
    assert twice("PATCH", "/v1/pools/gpus", "pu", {"rank": 2}).json()["rank"] == 2
    assert twice("POST", "/v1/policies", "c", policy_body()).status_code == 201
    assert twice("PATCH", "/v1/policies/team", "cu", {"priority": 4}).json()["priority"] == 4
    held = twice("POST", RR, "r", request_body()).json()
    renewed = twice("POST", f"{RR}/{held['id']}/renew", "rn", {"lease_seconds": 90}).json()
    assert renewed["lease_expires_at"] != held["lease_expires_at"]
    pending = twice("POST", RR, "r2", request_body(gpus=2)).json()
    assert twice("POST", f"{RR}/{pending['id']}/cancel", "cx").json()["status"] == "cancelled"
    assert twice("POST", f"{RR}/{held['id']}/release", "rl").json()["status"] == "released"
    assert twice("DELETE", "/v1/policies/team", "cd").status_code == 204
    assert twice("DELETE", "/v1/pools/gpus", "pd").status_code == 204
    assert http.get("/v1/pools", headers=admin).json() == []
    license_ = {"name": "lic", "kind": "license", "units": [{"name": "seat", "multiplier": 1}]}
    assert twice("POST", "/v1/descriptors", "d", license_).status_code == 201
    assert twice("PATCH", "/v1/descriptors/lic", "du", {"description": "x"}).status_code == 200
    assert twice("DELETE", "/v1/descriptors/lic", "dd").status_code == 204
