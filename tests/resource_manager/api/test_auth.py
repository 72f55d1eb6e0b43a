"""Authentication and authorisation over HTTP: anonymous, malformed, expired, forged, non-admin
and admin tokens on every route; logins by API key and by password."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import httpx

from tests.resource_manager.api.bodies import policy_body, pool_body, request_body
from tests.resource_manager.api.live import (
    ADMIN_KEY,
    ALICE_KEY,
    BOB_KEY,
    EVE_KEY,
    OPS_PASSWORD,
    SECRET,
    start_rm,
)
from wharf.resource_manager.api.tokens import TokenSigner
from wharf.resource_manager.service import Principal

SOME_ID = str(uuid.UUID(int=1))
PROTECTED = [
    ("GET", "/metrics"),
    ("GET", "/v1/descriptors"),
    ("GET", "/v1/descriptors/GPU"),
    ("POST", "/v1/descriptors"),
    ("PATCH", "/v1/descriptors/GPU"),
    ("DELETE", "/v1/descriptors/GPU"),
    ("GET", "/v1/pools"),
    ("GET", "/v1/pools/gpus"),
    ("POST", "/v1/pools"),
    ("PATCH", "/v1/pools/gpus"),
    ("DELETE", "/v1/pools/gpus"),
    ("GET", "/v1/pools/gpus/queue"),
    ("GET", "/v1/pools/gpus/allocations"),
    ("GET", "/v1/policies"),
    ("GET", "/v1/policies/team"),
    ("POST", "/v1/policies"),
    ("PATCH", "/v1/policies/team"),
    ("DELETE", "/v1/policies/team"),
    ("GET", "/v1/resource-requests"),
    ("POST", "/v1/resource-requests"),
    ("GET", f"/v1/resource-requests/{SOME_ID}"),
    ("POST", f"/v1/resource-requests/{SOME_ID}/renew"),
    ("POST", "/v1/resource-requests/renew"),
    ("POST", f"/v1/resource-requests/{SOME_ID}/release"),
    ("POST", f"/v1/resource-requests/{SOME_ID}/cancel"),
    ("GET", f"/v1/resource-requests/{SOME_ID}/explain"),
]
ADMIN_ONLY = [
    (
        "POST",
        "/v1/descriptors",
        {"name": "lic", "kind": "license", "units": [{"name": "seat", "multiplier": 1}]},
    ),
    ("PATCH", "/v1/descriptors/GPU", {"description": "x"}),
    ("DELETE", "/v1/descriptors/GPU", None),
    ("POST", "/v1/pools", pool_body("other")),
    ("PATCH", "/v1/pools/gpus", {"rank": 3}),
    ("DELETE", "/v1/pools/gpus", None),
    ("GET", "/v1/pools/gpus/queue", None),
    ("GET", "/v1/pools/gpus/allocations", None),
    ("POST", "/v1/policies", policy_body("other")),
    ("PATCH", "/v1/policies/team", {"priority": 3}),
    ("DELETE", "/v1/policies/team", None),
]


def _forged(claims_secret: str, *, expires_in: float, admin: bool = True) -> dict[str, str]:
    signer = TokenSigner(claims_secret.encode(), ttl_seconds=expires_in)
    token, _ = signer.issue(Principal("admin", admin=admin))
    return {"Authorization": f"Bearer {token}"}


def test_health_needs_no_token(http: httpx.Client) -> None:
    response = http.get("/health")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


BAD_HEADERS: list[dict[str, str]] = [
    {},
    {"Authorization": "Basic abc"},
    {"Authorization": "Bearer not-a-token"},
    {"Authorization": "Bearer a.b.c"},
]


def test_every_route_but_health_and_login_needs_a_valid_token(http: httpx.Client) -> None:
    for headers in BAD_HEADERS:
        for method, path in PROTECTED:
            response = http.request(method, path, headers=headers, json={})
            assert response.status_code == 401, (headers, method, path, response.text)
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.json()["error"] == "AuthenticationError"


def test_expired_forged_and_foreign_tokens_are_refused(http: httpx.Client) -> None:
    expired = _forged(SECRET, expires_in=-1)
    response = http.get("/v1/pools", headers=expired)
    assert response.status_code == 401 and "expired" in response.json()["detail"]
    foreign = _forged("another-secret-" + "y" * 32, expires_in=600)
    assert http.get("/v1/pools", headers=foreign).status_code == 401
    valid = _forged(SECRET, expires_in=600, admin=False)["Authorization"]
    header, _payload, signature = valid.removeprefix("Bearer ").split(".")
    promoted = _forged(SECRET, expires_in=600, admin=True)["Authorization"].split(".")[1]
    tampered = {"Authorization": f"Bearer {header}.{promoted}.{signature}"}
    assert http.get("/v1/pools", headers=tampered).status_code == 401
    assert http.get("/v1/pools", headers=_forged(SECRET, expires_in=600)).status_code == 200


def test_login_by_api_key_and_by_password(http: httpx.Client) -> None:
    before = time.time()
    body = http.post("/v1/auth/login", json={"api_key": ALICE_KEY}).json()
    assert body["principal"] == "alice" and body["admin"] is False
    assert body["token_type"] == "bearer" and body["expires_in"] == 3600
    assert body["access_token"].count(".") == 2 and body["expires_at"] >= str(before)
    ops = http.post("/v1/auth/login", json={"username": "ops", "password": OPS_PASSWORD}).json()
    assert ops["principal"] == "ops" and ops["admin"] is True
    admin = http.post("/v1/auth/login", json={"api_key": ADMIN_KEY}).json()
    assert admin["principal"] == "admin" and admin["admin"] is True


BAD_LOGINS: list[tuple[dict[str, str], int]] = [
    ({"api_key": "wrong"}, 401),
    ({"api_key": ALICE_KEY[:-1] + "0"}, 401),
    ({"api_key": "wrm.nobody." + "c" * 48}, 401),
    ({"api_key": BOB_KEY.replace("wrm.bob.", "wrm.alice.")}, 401),
    ({"username": "ops", "password": "wrong"}, 401),
    ({"username": "alice", "password": OPS_PASSWORD}, 401),
    ({"username": "ops"}, 422),
    ({"api_key": ALICE_KEY, "username": "ops", "password": OPS_PASSWORD}, 422),
    ({}, 422),
]


def test_bad_logins(http: httpx.Client) -> None:
    for body, status in BAD_LOGINS:
        response = http.post("/v1/auth/login", json=body)
        assert response.status_code == status, (body, response.text)
        if status == 401:
            expected = {"detail": "Invalid credentials.", "error": "AuthenticationError"}
            assert response.json() == expected


def test_administration_needs_an_admin_token(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    admin = token(ADMIN_KEY)
    assert http.post("/v1/pools", json=pool_body(), headers=admin).status_code == 201
    assert http.post("/v1/policies", json=policy_body(), headers=admin).status_code == 201
    alice = token(ALICE_KEY)
    for method, path, body in ADMIN_ONLY:
        response = http.request(method, path, json=body, headers=alice)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"] == "PermissionDeniedError"
    for path in ("/v1/pools", "/v1/pools/gpus", "/v1/policies", "/v1/descriptors", "/metrics"):
        assert http.get(path, headers=alice).status_code == 200, path
    assert len(http.get("/v1/pools", headers=admin).json()) == 1  # nothing was changed


def test_requests_belong_to_their_requester(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    admin, alice, bob = token(ADMIN_KEY), token(ALICE_KEY), token(BOB_KEY)
    http.post("/v1/pools", json=pool_body(), headers=admin)
    http.post("/v1/policies", json=policy_body(), headers=admin)
    created = http.post("/v1/resource-requests", json=request_body(), headers=alice).json()
    assert created["requester"] == "alice" and created["status"] == "allocated"
    path = f"/v1/resource-requests/{created['id']}"
    for action, body in (("renew", {"lease_seconds": 30}), ("release", None), ("cancel", None)):
        response = http.post(f"{path}/{action}", json=body, headers=bob)
        assert response.status_code == 403, response.text
        assert "belongs to another requester" in response.json()["detail"]
    assert http.get(path, headers=bob).status_code == 404  # nor may he see it
    renewed = http.post(f"{path}/renew", json={"lease_seconds": 30}, headers=alice)
    assert renewed.status_code == 200
    released = http.post(f"{path}/release", headers=admin)  # an admin may change any request
    assert released.status_code == 200 and released.json()["status"] == "released"


def test_metrics_can_be_public_for_scrapers(sqlite_rm_url: str) -> None:
    """``metrics_public``: Prometheus scrapes without a token; every other route still needs
    one (and a bad token on ``/metrics`` is simply ignored, not an error)."""
    live = start_rm(sqlite_rm_url, metrics_public=True)
    try:
        with httpx.Client(base_url=live.url, timeout=30) as client:
            scraped = client.get("/metrics")
            assert scraped.status_code == 200
            assert "wharf_rm_requests" in scraped.text
            assert client.get("/metrics", headers={"Authorization": "Bearer x"}).status_code == 200
            assert client.get("/v1/pools").status_code == 401
            assert client.get("/v1/resource-requests").status_code == 401
    finally:
        live.stop()


def test_only_the_requester_and_admins_see_a_request(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    """Another principal's request does not exist for a non-admin: get and explain answer
    exactly as for an unknown id, and lists leave it out whatever the filter."""
    admin, alice, bob = token(ADMIN_KEY), token(ALICE_KEY), token(BOB_KEY)
    http.post("/v1/pools", json=pool_body(), headers=admin)
    http.post("/v1/policies", json=policy_body(), headers=admin)
    rr = "/v1/resource-requests"
    alices = http.post(rr, json=request_body(user="carol"), headers=alice).json()
    bobs = http.post(rr, json=request_body(user="bob"), headers=bob).json()
    for suffix in ("", "/explain"):
        hidden = http.get(f"{rr}/{alices['id']}{suffix}", headers=bob)
        unknown = http.get(f"{rr}/{SOME_ID}{suffix}", headers=bob)
        assert (hidden.status_code, unknown.status_code) == (404, 404), hidden.text
        assert hidden.json() == {**unknown.json(), "detail": hidden.json()["detail"]}
        assert hidden.json()["detail"] == unknown.json()["detail"].replace(SOME_ID, alices["id"])
        assert http.get(f"{rr}/{alices['id']}{suffix}", headers=admin).status_code == 200
        assert http.get(f"{rr}/{bobs['id']}{suffix}", headers=bob).status_code == 200

    def listed(headers: dict[str, str], **params: str) -> list[str]:
        page = http.get(rr, params=params, headers=headers).json()
        assert page["total"] == len(page["items"])
        return [item["id"] for item in page["items"]]

    assert listed(bob) == [bobs["id"]]
    assert listed(bob, requester="alice") == []
    assert listed(bob, **{"metadata[user]": "carol"}) == []
    assert listed(bob, subject_id="team") == [bobs["id"]]
    assert listed(alice) == [alices["id"]]  # the workspace server's principal: all of its own
    assert sorted(listed(admin)) == sorted([alices["id"], bobs["id"]])


def test_only_trusted_principals_name_other_subjects(
    http: httpx.Client, token: Callable[[str], dict[str, str]]
) -> None:
    """A pool whose only policy admits the account ``carol``: eve (not trusted) can neither
    claim to be carol nor name a project; alice (trusted to assert subjects, as a workspace
    server is) and admins may. Eve's requests are made for her own account, derived from her
    login, whatever she claims about it."""
    admin, alice, eve = token(ADMIN_KEY), token(ALICE_KEY), token(EVE_KEY)
    http.post("/v1/pools", json=pool_body(), headers=admin)
    carol_only = {"subject_type": "account", "subject_id": "carol"}
    policy = {"name": "carol", "pool": "gpus", "subject_selector": carol_only}
    assert http.post("/v1/policies", json=policy, headers=admin).status_code == 201
    rr = "/v1/resource-requests"

    def as_account(account: str, **attributes: object) -> dict[str, object]:
        node = {"subject_type": "account", "subject_id": account, "attributes": attributes}
        return {**request_body(), "subjects": [{"nodes": [node]}]}

    for body, named in ((as_account("carol"), "account 'carol'"), (request_body(), "project")):
        refused = http.post(rr, json=body, headers=eve)
        assert refused.status_code == 403, refused.text
        assert refused.json()["error"] == "PermissionDeniedError"
        assert f"cannot name {named}" in refused.json()["detail"]
    assert http.get(rr, headers=admin).json()["total"] == 0  # nothing was made

    for headers in (alice, admin):
        trusted = http.post(rr, json=as_account("carol"), headers=headers)
        assert (trusted.status_code, trusted.json()["status"]) == (201, "allocated")
        assert trusted.json()["subjects"][0]["nodes"][0]["subject_id"] == "carol"

    everyone = {"name": "accounts", "pool": "gpus", "subject_selector": {"subject_type": "account"}}
    http.post("/v1/policies", json=everyone, headers=admin)
    for body in (as_account("eve"), as_account("eve", is_superuser=True)):
        made = http.post(rr, json=body, headers=eve)
        assert made.status_code == 201, made.text
        assert made.json()["subjects"] == [
            {
                "nodes": [
                    {
                        "subject_type": "account",
                        "subject_id": "eve",
                        "attributes": {"name": "eve"},
                        "metadata": {},
                    }
                ]
            }
        ]
