"""The HTTP protocol ``wharf server serve`` and ``wharf resource-manager serve`` run: httptools
with a bound on request heads.

A trivial ASGI app behind :class:`BoundedHttpToolsProtocol` on a real uvicorn server: long request
targets still reach the app (it answers 414 itself), targets httptools cannot parse and oversized
heads are refused by the protocol with the server's JSON errors, and keep-alive connections carry
many requests with bodies (the count restarts per request).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from wharf import serving
from wharf.serving import MAX_REQUEST_HEAD_BYTES, MAX_TARGET_BYTES, BoundedHttpToolsProtocol


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers ``<target length> <body length>``."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    target = len(scope["raw_path"]) + len(scope["query_string"])
    answer = f"{target} {len(body)}".encode()
    headers = [(b"content-length", str(len(answer)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": answer})


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    linger = serving.REFUSAL_LINGER_SECONDS
    serving.REFUSAL_LINGER_SECONDS = 0.2  # the server's shutdown waits for lingering refusals
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        _echo, http=BoundedHttpToolsProtocol, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(timeout=20)
    sock.close()
    serving.REFUSAL_LINGER_SECONDS = linger


def _exchange(port: int, *requests: bytes, answers: int | None = None) -> bytes:
    """Send ``requests`` on one connection (pipelined, each whole: the server may answer and
    end its side before it read them); what comes back, until ``answers`` responses have, or
    else until the server ends the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        for request in requests:
            conn.sendall(request)
        answer = b""
        while answers is None or _complete(answer) < answers:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
        return answer


def _complete(answer: bytes) -> int:
    """How many whole responses ``answer`` holds."""
    count, rest = 0, answer
    while (end := rest.find(b"\r\n\r\n")) >= 0:
        length = int(rest[:end].lower().split(b"content-length: ")[1].split(b"\r\n")[0])
        if len(rest) < end + 4 + length:
            break
        count, rest = count + 1, rest[end + 4 + length :]
    return count


def _put(target: str, body: bytes = b"", *headers: str) -> bytes:
    head = [f"PUT {target} HTTP/1.1", "Host: t", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _json_error(answer: bytes, status: int) -> dict[str, str]:
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {status} ".encode()), head
    assert b"content-type: application/json" in head and b"connection: close" in head
    error: dict[str, str] = json.loads(body)
    return error


def test_long_targets_reach_the_app(port: int) -> None:
    target = "/x?q=" + "a" * (MAX_TARGET_BYTES - 5)
    answer = _exchange(port, _put(target, b"{}"), answers=1)
    served = f"{len(target) - 1} 2".encode()  # path + query string, without the "?"
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(served)


def test_targets_too_long_to_parse_are_414(port: int) -> None:
    answer = _exchange(port, _put("/x?q=" + "a" * MAX_TARGET_BYTES, b"{}"), _put("/y"))
    assert _json_error(answer, 414)["type"] == "URITooLong"
    assert answer.count(b"HTTP/1.1") == 1  # the connection is closed: /y is not served


def test_an_oversized_head_is_refused_by_the_protocol(port: int) -> None:
    huge = "X-Padding: " + "p" * (MAX_REQUEST_HEAD_BYTES + 1024)
    error = _json_error(_exchange(port, _put("/x", b"", huge)), 431)
    assert error["type"] == "HeadTooLarge" and "too large" in error["detail"]


def test_keep_alive_connections_carry_many_requests(port: int) -> None:
    """Heads well under the bound add up to more than it on one connection, pipelined in few
    reads: all are served."""
    padding = "X-Padding: " + "p" * (MAX_REQUEST_HEAD_BYTES // 4)
    count = 10
    requests = [_put(f"/beat/{i}", b"x" * 1000, padding) for i in range(count)]
    answer = _exchange(port, b"".join(requests), answers=count)
    assert answer.count(b"HTTP/1.1 200") == count
    assert answer.endswith(b"1000")
