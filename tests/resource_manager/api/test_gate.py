"""What the RM checks before reading a body (:mod:`wharf.resource_manager.api.gate`), over real
HTTP with raw sockets: a body over ``max_body_bytes`` (1 MiB by default) is refused with 413 from
the head alone, or as soon as a chunked one passes the limit, on every route (FastAPI's, the
lean ones, login); an anonymous body for a route that needs a principal gets 401, whatever it
holds, never a 422 describing the schema."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from tests.raw_http import chunk, exchange, head
from tests.resource_manager.api.bodies import pool_body, request_body
from tests.resource_manager.api.live import ADMIN_KEY, LiveServer
from wharf.resource_manager.api.settings import ApiSettings

ROUTES = [
    ("POST", "/v1/auth/login"),
    ("POST", "/v1/pools"),
    ("PATCH", "/v1/pools/gpus"),
    ("POST", "/v1/policies"),
    ("POST", "/v1/descriptors"),
    ("POST", "/v1/resource-requests"),
    ("POST", "/v1/resource-requests/renew"),
    ("POST", "/v1/resource-requests/00000000-0000-0000-0000-000000000001/renew"),
    ("GET", "/v1/resource-requests"),
    ("GET", "/health"),
    ("POST", "/nowhere"),
]
HUGE = 300 * 1024 * 1024


def test_the_default_limit_is_one_mib() -> None:
    assert ApiSettings.model_fields["max_body_bytes"].default == 1024 * 1024


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("authenticated", [False, True])
def test_a_huge_announced_body_is_refused_before_it_is_sent(
    server: LiveServer,
    token: Callable[[str], dict[str, str]],
    method: str,
    path: str,
    authenticated: bool,
) -> None:
    headers = token(ADMIN_KEY) if authenticated else {}
    announced = head(method, path, server.port, Content_Length=str(HUGE), **headers)
    answer = exchange(server.port, announced)  # the body never comes: nothing waits for it
    assert answer.status == 413, answer.body
    assert json.loads(answer.body) == {
        "detail": "The request body is larger than the 1048576 bytes allowed.",
        "error": "InputError",
    }


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_chunked_body_is_refused_once_it_passes_the_limit(
    server: LiveServer, token: Callable[[str], dict[str, str]], method: str, path: str
) -> None:
    chunked = head(method, path, server.port, Transfer_Encoding="chunked", **token(ADMIN_KEY))
    parts = [chunk(b"x" * 65536) for _ in range(17)]  # 1 MiB + 64 KiB, never terminated
    assert exchange(server.port, chunked, parts).status == 413


def test_anonymous_bodies_are_401_whatever_they_hold(http: httpx.Client) -> None:
    """Before the body is parsed: malformed JSON, a body of the wrong shape and a valid one
    alike, on FastAPI's routes and the lean ones."""
    bodies: list[bytes] = [b"{not json", b'{"name": 5}', json.dumps(pool_body()).encode()]
    for path in ("/v1/pools", "/v1/policies", "/v1/descriptors", "/v1/resource-requests"):
        for body in (*bodies, json.dumps(request_body()).encode()):
            for headers in ({}, {"Authorization": "Bearer forged"}):
                response = http.post(path, content=body, headers=headers)
                assert response.status_code == 401, (path, body, response.text)
                assert response.json()["error"] == "AuthenticationError"
    patched = http.patch("/v1/pools/gpus", content=b"{not json")
    assert patched.status_code == 401
    login = http.post("/v1/auth/login", content=b"{not json")  # public: parsed, refused
    assert login.status_code == 422


@pytest.mark.parametrize("path", ["/v1/pools", "/v1/policies", "/v1/resource-requests"])
def test_anonymous_bodies_within_the_limit_are_refused_unread(
    server: LiveServer, path: str
) -> None:
    """Authentication comes before the body: an anonymous caller announcing 512 KiB gets its
    401 without sending any of it."""
    for headers in ({}, {"Authorization": "Bearer forged"}):
        announced = head("POST", path, server.port, Content_Length=str(512 * 1024), **headers)
        answer = exchange(server.port, announced)
        assert answer.status == 401, answer.body
        assert json.loads(answer.body)["error"] == "AuthenticationError"
