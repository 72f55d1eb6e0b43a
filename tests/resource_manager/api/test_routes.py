"""Every route of the RM API over HTTP: status codes, shapes, filters, paging, errors, metrics."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import FakeClock
from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import ADMIN_KEY, ALICE_KEY, LiveServer, start_rm

LICENSE = {"name": "lic", "kind": "license", "units": [{"name": "seat", "multiplier": 1}]}
RR = "/v1/resource-requests"


@pytest.fixture
def admin_h(token: Callable[[str], dict[str, str]]) -> dict[str, str]:
    return token()


def test_descriptor_routes(http: httpx.Client, admin_h: dict[str, str]) -> None:
    names = [d["name"] for d in http.get("/v1/descriptors", headers=admin_h).json()]
    assert names == ["CPU", "GPU", "memory"]
    created = http.post("/v1/descriptors", json=LICENSE, headers=admin_h)
    assert created.status_code == 201 and created.json()["kind"] == "license"
    assert http.get("/v1/descriptors/lic", headers=admin_h).json() == created.json()
    patched = http.patch("/v1/descriptors/lic", json={"description": "seats"}, headers=admin_h)
    assert patched.status_code == 200 and patched.json()["description"] == "seats"
    assert http.delete("/v1/descriptors/lic", headers=admin_h).status_code == 204
    missing = http.get("/v1/descriptors/lic", headers=admin_h)
    assert missing.status_code == 404 and missing.json()["error"] == "EntityNotFoundError"


def test_pool_and_policy_routes(http: httpx.Client, admin_h: dict[str, str]) -> None:
    pool = http.post("/v1/pools", json=pool_body(), headers=admin_h)
    assert pool.status_code == 201
    pool_id = pool.json()["id"]
    assert pool.json()["classes"][1]["capacity"] == {"CPU": 64_000, "memory": 256 * 1024**3}
    assert http.get(f"/v1/pools/{pool_id}", headers=admin_h).json() == pool.json()
    assert [p["name"] for p in http.get("/v1/pools", headers=admin_h).json()] == ["gpus"]
    patched = http.patch("/v1/pools/gpus", json={"rank": 5}, headers=admin_h).json()
    assert patched["rank"] == 5 and patched["classes"] == pool.json()["classes"]

    policy = http.post("/v1/policies", json=policy_body(priority=3), headers=admin_h)
    assert policy.status_code == 201 and policy.json()["pool_id"] == pool_id
    assert http.get("/v1/policies/team", headers=admin_h).json()["priority"] == 3
    listed = http.get("/v1/policies", params={"pool": "gpus"}, headers=admin_h).json()
    assert [p["name"] for p in listed] == ["team"]
    grants = {"grants": [{"class": "h100", "resources": {"GPU": {"reserved": 1, "limit": 2}}}]}
    patched_policy = http.patch("/v1/policies/team", json=grants, headers=admin_h).json()
    assert patched_policy["grants"][0]["class_name"] == "h100"
    assert http.delete("/v1/policies/team", headers=admin_h).status_code == 204
    assert http.get("/v1/policies", headers=admin_h).json() == []
    assert http.delete(f"/v1/pools/{pool_id}", headers=admin_h).status_code == 204
    assert http.get("/v1/pools", headers=admin_h).json() == []


def test_request_routes(
    http: httpx.Client, admin_h: dict[str, str], token: Callable[[str], dict[str, str]]
) -> None:
    http.post("/v1/pools", json=pool_body(gpus=1), headers=admin_h)
    http.post("/v1/policies", json=policy_body(), headers=admin_h)
    alice = token(ALICE_KEY)
    held = http.post(RR, json=request_body(run="r1"), headers=alice)
    assert held.status_code == 201 and held.json()["status"] == "allocated"
    allocation = held.json()["allocations"][0]
    assert allocation["class"] == "h100" and allocation["base_quantity"] == 1
    waiting = http.post(RR, json=request_body(run="r2"), headers=alice).json()
    assert waiting["status"] == "pending"
    held_id, waiting_id = held.json()["id"], waiting["id"]

    assert http.get(f"{RR}/{held_id}", headers=alice).json()["id"] == held_id
    renewed = http.post(
        f"{RR}/{held_id}/renew",
        json={"lease_seconds": 120, "runtime_state": "running"},
        headers=alice,
    ).json()
    assert renewed["runtime_state"] == "running" and renewed["lease_expires_at"]

    queue = http.get("/v1/pools/gpus/queue", headers=admin_h).json()
    assert [(e["position"], e["request"]["id"]) for e in queue] == [(1, waiting_id)]
    held_in_pool = http.get("/v1/pools/gpus/allocations", headers=admin_h).json()
    assert [(a["request_id"], a["request_status"]) for a in held_in_pool] == [
        (held_id, "allocated")
    ]
    explained = http.get(f"{RR}/{waiting_id}/explain", headers=alice).json()
    assert explained["outcome"] == "waiting" and explained["positions"][0]["position"] == 1

    listed = http.get(RR, params={"status": ["pending", "allocated"]}, headers=alice).json()
    assert listed["total"] == 2 and {r["id"] for r in listed["items"]} == {held_id, waiting_id}
    by_meta = http.get(RR, params={"metadata[run]": "r2"}, headers=alice).json()
    assert [r["id"] for r in by_meta["items"]] == [waiting_id]
    assert http.get(RR, params={"metadata[run]": "nope"}, headers=alice).json()["total"] == 0
    by_subject = http.get(
        RR, params={"subject_id": "team", "subject_type": "project"}, headers=alice
    )
    assert by_subject.json()["total"] == 2
    by_pool = http.get(RR, params={"pool": "gpus", "requester": "alice"}, headers=alice).json()
    assert [r["id"] for r in by_pool["items"]] == [held_id]  # admitted to the pool
    page = http.get(RR, params={"size": 1, "page": 2, "sort": "asc"}, headers=alice).json()
    assert (page["index"], page["size"], page["total"]) == (2, 1, 2)
    assert [r["id"] for r in page["items"]] == [waiting_id]

    cancelled = http.post(f"{RR}/{waiting_id}/cancel", headers=alice).json()
    assert cancelled["status"] == "cancelled"
    released = http.post(f"{RR}/{held_id}/release", headers=alice).json()
    assert released["status"] == "released"
    again = http.post(f"{RR}/{held_id}/renew", json={"lease_seconds": 5}, headers=alice).json()
    assert again["status"] == "released"  # a terminal request comes back unchanged


ERRORS = [
    ("GET", "/v1/pools/nope", None, 404, "EntityNotFoundError", "'nope' not found"),
    ("GET", f"{RR}/{uuid.UUID(int=7)}", None, 404, "EntityNotFoundError", "not found"),
    ("GET", f"{RR}/not-a-uuid", None, 422, "InputError", "request_id"),
    ("GET", "/v1/nothing/here", None, 404, "EntityNotFoundError", "Not Found"),
    ("POST", "/v1/pools", pool_body(), 409, "EntityExistsError", "already exists"),
    ("DELETE", "/v1/pools/gpus", None, 409, "IllegalOperationError", "live resource request"),
    (
        "POST",
        "/v1/policies",
        policy_body(grants=[{"class": "h100", "resources": {"GPU": {"reserved": 9}}}], name="x"),
        400,
        "InputError",
        "above its capacity",
    ),
    (
        "POST",
        "/v1/pools",
        {**pool_body("p2"), "classes": [{"name": "c", "capacity": {"GPU": "1GiB"}}]},
        400,
        "InputError",
        "Unknown unit 'GiB'",
    ),
    (
        "POST",
        "/v1/pools",
        {**pool_body("p2"), "classes": [{"name": "c", "capacity": {"GPU": -1}}]},
        422,
        "InputError",
        "capacity",
    ),
    (
        "POST",
        "/v1/pools",
        {**pool_body("p2"), "classes": [{"name": "c", "capacity": {"GPU": 1.5}}]},
        422,
        "InputError",
        "capacity",
    ),
    (
        "POST",
        "/v1/policies",
        {**policy_body("y"), "subject_selector": {"any": []}},
        422,
        "InputError",
        "needs at least one selector",
    ),
    (
        "POST",
        RR,
        {**request_body(), "demands": [{"resource": "GPU", "quantity": 0}]},
        422,
        "InputError",
        "quantity",
    ),
    ("GET", RR, {"size": 0}, 422, "InputError", "size"),
    (
        "POST",
        f"{RR}/{uuid.UUID(int=7)}/renew",
        {"lease_seconds": 1.5},
        422,
        "InputError",
        "lease_seconds",
    ),
]


def test_errors_are_json_with_detail_and_type(http: httpx.Client, admin_h: dict[str, str]) -> None:
    http.post("/v1/pools", json=pool_body(), headers=admin_h)
    http.post("/v1/policies", json=policy_body(), headers=admin_h)
    http.post(RR, json=request_body(), headers=admin_h)  # a live request in the pool
    for method, path, body, status, error, fragment in ERRORS:
        if method == "GET":
            response = http.get(path, params=body, headers=admin_h)
        else:
            response = http.request(method, path, json=body, headers=admin_h)
        assert response.status_code == status, (path, response.text)
        payload = response.json()
        assert payload["error"] == error and fragment in payload["detail"], payload
        assert "\n" not in payload["detail"]
    assert [p["name"] for p in http.get("/v1/pools", headers=admin_h).json()] == ["gpus"]
    assert len(http.get("/v1/policies", headers=admin_h).json()) == 1


def test_malformed_bodies_are_422(http: httpx.Client, admin_h: dict[str, str]) -> None:
    for path in (RR, f"{RR}/{uuid.UUID(int=7)}/renew", "/v1/pools"):
        response = http.post(path, content=b"{not json", headers=admin_h)
        assert response.status_code == 422, (path, response.text)
        assert response.json()["error"] == "InputError"


def test_lean_routes_answer_like_fastapi_routes(
    server: LiveServer, http: httpx.Client, admin_h: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hot routes skip FastAPI's middleware stack; a wrong method, an unknown path and an
    unexpected failure still get the answers every other route gives."""
    wrong = http.delete(f"{RR}/{uuid.UUID(int=7)}/renew", headers=admin_h)
    assert wrong.status_code == 405
    assert http.get(f"{RR}/{uuid.UUID(int=7)}/renew/more", headers=admin_h).status_code == 404

    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    service = server.app.state.rm.service
    monkeypatch.setattr(service.requests, "renew_async", broken)
    failed = http.post(f"{RR}/{uuid.UUID(int=7)}/renew", json={"lease_seconds": 5}, headers=admin_h)
    assert failed.status_code == 500
    assert failed.json() == {"detail": "Internal server error."}
    assert http.get("/health").status_code == 200  # the server carries on


def test_a_long_idempotency_key_is_refused(http: httpx.Client, admin_h: dict[str, str]) -> None:
    headers = {**admin_h, "X-Idempotency-Key": "k" * 256}
    for path, body in (("/v1/pools", pool_body()), (RR, request_body())):
        response = http.post(path, json=body, headers=headers)
        assert response.status_code == 400 and "X-Idempotency-Key" in response.json()["detail"]
    assert http.get(RR, headers=admin_h).json()["total"] == 0


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def test_metrics(http: httpx.Client, admin_h: dict[str, str], clock: FakeClock) -> None:
    http.post("/v1/pools", json=pool_body(gpus=2, reclaimable="coordinated"), headers=admin_h)
    http.post("/v1/policies", json=policy_body("low", project="low"), headers=admin_h)
    http.post(
        "/v1/policies", json=policy_body("high", project="high", priority=10), headers=admin_h
    )
    low = [
        http.post(RR, json=request_body("low", tolerance="coordinated"), headers=admin_h).json()
        for _ in range(2)
    ]
    assert [r["status"] for r in low] == ["allocated", "allocated"]
    waiter = http.post(RR, json=request_body("high", tolerance="coordinated"), headers=admin_h)
    assert waiter.json()["status"] == "pending"
    short = http.post(
        RR, json=request_body("high", lease=5, tolerance="coordinated"), headers=admin_h
    )
    clock.advance(10)  # the short lease lapses while pending; the low holders are preempting
    # A scrape reports the committed state (it runs no committing cycle): the lapse counts once
    # a scheduling transaction (the sweeper's, or here a renewal's) has expired it.
    renewed = http.post(
        f"{RR}/{short.json()['id']}/renew", json={"lease_seconds": 5}, headers=admin_h
    )
    assert renewed.json()["status"] == "cancelled"
    response = http.get("/metrics", headers=admin_h)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples = _samples(response.text)
    pool, gpu = ("pool", "gpus"), ("resource", "GPU")
    assert samples[("wharf_rm_queue_length", (pool,))] == 1
    assert samples[("wharf_rm_allocated", (("class", "h100"), pool, gpu))] == 2
    assert samples[("wharf_rm_capacity", (("class", "h100"), pool, gpu))] == 2
    assert samples[("wharf_rm_preemptions_total", ())] == 1
    assert samples[("wharf_rm_requests", (("status", "preempting"),))] == 1
    assert samples[("wharf_rm_requests", (("status", "cancelled"),))] == 1
    assert samples[("wharf_rm_time_to_admit_seconds_count", ())] == 2
    assert samples[("wharf_rm_time_to_admit_seconds_bucket", (("le", "+Inf"),))] == 2
    assert samples[("wharf_rm_expiries_total", ())] == 0
    assert short.json()["status"] == "pending"

    clock.advance(120)  # every lease lapses: holders expire at the next transaction
    http.post(f"{RR}/{low[0]['id']}/renew", json={"lease_seconds": 5}, headers=admin_h)
    samples = _samples(http.get("/metrics", headers=admin_h).text)
    assert samples[("wharf_rm_expiries_total", ())] == 2
    assert samples[("wharf_rm_preemptions_total", ())] == 1  # counters never go down
    assert samples.get(("wharf_rm_allocated", (("class", "h100"), pool, gpu)), 0) == 0


def test_openapi_describes_every_route(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    paths = {path: sorted(item) for path, item in schema["paths"].items()}
    assert paths[RR] == ["get", "post"]
    for action in ("renew", "release", "cancel"):
        operation = schema["paths"][f"{RR}/{{request_id}}/{action}"]["post"]
        assert "X-Idempotency-Key" in [p["name"] for p in operation["parameters"]]
    create = schema["paths"][RR]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ResourceRequestCreate"
    }
    assert "201" in create["responses"]
    assert paths["/v1/pools/{pool}"] == ["delete", "get", "patch"]
    assert {"/health", "/metrics", "/v1/auth/login", "/v1/policies/{policy}"} <= set(paths)
    assert all(ref.startswith("#/components/schemas/") for ref in _refs(schema))
    names = set(schema["components"]["schemas"])
    assert {ref.rsplit("/", 1)[1] for ref in _refs(schema)} <= names


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in _refs(value)]
    return []


TEN_YEARS = 10 * 365 * 86400


def test_leases_are_capped(
    http: httpx.Client, admin_h: dict[str, str], token: Callable[[str], dict[str, str]]
) -> None:
    """No request is created or renewed with a lease over ``max_lease_seconds`` (a day by
    default), nor without one: a holder that dies gives its capacity back within a day. Over
    the bulk route the item alone fails."""
    http.post("/v1/pools", json=pool_body(), headers=admin_h)
    http.post("/v1/policies", json=policy_body(), headers=admin_h)
    alice = token(ALICE_KEY)
    for lease in (TEN_YEARS, 86401, None):
        refused = http.post(RR, json=request_body(lease=lease), headers=alice)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"] == "InputError"
        assert "lease_seconds must be at most 86400" in refused.json()["detail"]
    assert http.get(RR, headers=admin_h).json()["total"] == 0
    made = http.post(RR, json=request_body(lease=86400), headers=alice).json()
    path = f"{RR}/{made['id']}/renew"
    for headers in (alice, admin_h):  # administrators too
        renewal = http.post(path, json={"lease_seconds": TEN_YEARS}, headers=headers)
        assert renewal.status_code == 400, renewal.text
    assert http.get(f"{RR}/{made['id']}", headers=alice).json() == made  # unchanged
    items = [{"id": made["id"], "lease_seconds": lease} for lease in (TEN_YEARS, 60)]
    bulk = http.post(f"{RR}/renew", json={"renewals": items}, headers=alice).json()["results"]
    assert (bulk[0]["status"], bulk[0]["error"], bulk[0]["request"]) == (400, "InputError", None)
    assert "at most 86400" in bulk[0]["detail"]
    assert bulk[1]["status"] == 200 and bulk[1]["request"]["id"] == made["id"]


def test_the_longest_lease_is_configurable(sqlite_rm_url: str) -> None:
    live = start_rm(sqlite_rm_url, max_lease_seconds=600)
    try:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            headers = {"Authorization": f"Bearer {_login(client, ADMIN_KEY)}"}
            client.post("/v1/pools", json=pool_body(), headers=headers)
            client.post("/v1/policies", json=policy_body(), headers=headers)
            assert client.post(RR, json=request_body(lease=601), headers=headers).status_code == 400
            made = client.post(RR, json=request_body(lease=600), headers=headers)
            assert made.status_code == 201, made.text
    finally:
        live.stop()


def _login(client: httpx.Client, api_key: str) -> str:
    token: str = client.post("/v1/auth/login", json={"api_key": api_key}).json()["access_token"]
    return token
