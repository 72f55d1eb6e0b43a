"""The size limits both servers put in front of everything (:mod:`wharf.request_limits`), over
real HTTP: an announced body over the limit is refused from the head alone (the server does not
wait for it), a chunked one as soon as it passes the limit (the rest is never read); the
workspace server's limit is 16 MiB by default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.raw_http import chunk, exchange, head
from tests.resource_manager.api.live import LiveServer
from tests.server.live import start_server
from wharf.request_limits import Message, Receive, Scope, Send, SizeLimits
from wharf.server.settings import ServerSettings

LIMIT = 64 * 1024


async def _echo(scope: Scope, receive: Receive, send: Send) -> None:
    """Answers how many body bytes it read."""
    assert scope["type"] == "http"
    size, more = 0, True
    while more:
        message: Message = await receive()
        size += len(message.get("body", b""))
        more = message.get("more_body", False)
    body = json.dumps({"read": size}).encode()
    length = str(len(body)).encode()
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", length)]}
    )
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def limited() -> Iterator[LiveServer]:
    app: Any = SizeLimits(_echo, max_body_bytes=LIMIT, max_url_bytes=1024)
    live = LiveServer(app).start()
    yield live
    live.stop()


def test_a_body_announced_over_the_limit_is_refused_unread(limited: LiveServer) -> None:
    announced = head("POST", "/", limited.port, Content_Length=str(300 * 1024 * 1024))
    answer = exchange(limited.port, announced)  # no body is sent: nothing is waited for
    assert answer.status == 413
    assert answer.headers["connection"] == "close"
    assert json.loads(answer.body) == {
        "detail": f"The request body is larger than the {LIMIT} bytes allowed.",
        "type": "PayloadTooLarge",
    }


def test_a_chunked_body_is_refused_once_it_passes_the_limit(limited: LiveServer) -> None:
    chunked = head("POST", "/", limited.port, Transfer_Encoding="chunked")
    parts = [chunk(b"x" * 16384) for _ in range(LIMIT // 16384 + 1)]  # never terminated
    assert exchange(limited.port, chunked, parts).status == 413
    put = head("PUT", "/", limited.port, Transfer_Encoding="chunked")
    assert exchange(limited.port, put, parts).status == 413  # any method


def test_bodies_within_the_limit_reach_the_app_whole(limited: LiveServer) -> None:
    parts = [chunk(b"x" * 1000) for _ in range(LIMIT // 1000)] + [b"0\r\n\r\n"]
    chunked = head("POST", "/", limited.port, Transfer_Encoding="chunked")
    answer = exchange(limited.port, chunked, parts)
    assert (answer.status, json.loads(answer.body)) == (200, {"read": LIMIT // 1000 * 1000})
    sized = head("POST", "/", limited.port, Content_Length=str(LIMIT))
    answer = exchange(limited.port, sized, [b"y" * LIMIT])
    assert (answer.status, json.loads(answer.body)) == (200, {"read": LIMIT})
    assert exchange(limited.port, head("GET", "/" + "a" * 1100, limited.port)).status == 414


def test_the_workspace_server_refuses_bodies_over_16_mib_unread() -> None:
    limit = ServerSettings.model_fields["max_body_bytes"].default
    assert limit == 16 * 1024 * 1024
    live = start_server()  # no state: the limit answers before any route
    try:
        path = "/api/v1/service_accounts"
        over = exchange(live.port, head("POST", path, live.port, Content_Length=str(limit + 1)))
        assert over.status == 413
        assert json.loads(over.body)["type"] == "PayloadTooLarge"
        chunked = head("POST", path, live.port, Transfer_Encoding="chunked")
        parts = [chunk(b"z" * 1024 * 1024) for _ in range(17)]  # 17 MiB, never terminated
        assert exchange(live.port, chunked, parts, timeout=30).status == 413
    finally:
        live.stop()
