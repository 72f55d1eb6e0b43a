"""The HTTP server ``wharf server serve`` and ``wharf resource-manager serve`` run: uvicorn with
the settings of :func:`wharf.serving.config`, on a real socket.

A trivial ASGI app: long request targets reach the app, oversized request heads are refused by
the HTTP parser before they reach it (and the connection closed), and keep-alive connections
carry many requests with bodies (the bound counts per request). And ``wharf server serve`` as
a real process: Ctrl-C ends it with exit status 0, with one worker or several.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from tests.waiting import wait_until
from wharf.server.daemon import healthy
from wharf.serving import MAX_REQUEST_HEAD_BYTES, config


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
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    settings = config(lambda: _echo, host="127.0.0.1", port=0, log_level="warning")
    settings.lifespan = "off"
    server = uvicorn.Server(settings)
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


def _exchange(port: int, *requests: bytes, answers: int | None = None) -> bytes:
    """Send ``requests`` on one connection (pipelined, each whole: the server may answer and
    end its side before it read them); what comes back, until ``answers`` responses have, or
    else until the server ends the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as conn:
        for request in requests:
            try:
                conn.sendall(request)
            except (BrokenPipeError, ConnectionResetError):
                break  # refused: the server closed its side
        answer = b""
        while answers is None or _complete(answer) < answers:
            try:
                chunk = conn.recv(65536)
            except ConnectionResetError:
                break
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


def test_long_targets_reach_the_app(port: int) -> None:
    target = "/x?q=" + "a" * (MAX_REQUEST_HEAD_BYTES // 2)
    answer = _exchange(port, _put(target, b"{}"), answers=1)
    served = f"{len(target) - 1} 2".encode()  # path + query string, without the "?"
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(served)


def test_an_oversized_head_is_refused_before_the_app(port: int) -> None:
    """h11 checks its bound while a head is incomplete, so a head is refused once more than the
    bound of it has arrived (a few reads past it at most): the server answers 400 and closes the
    connection, or resets it while the client is still sending. Either way nothing is served."""
    huge = "X-Padding: " + "p" * (4 * MAX_REQUEST_HEAD_BYTES)
    answer = _exchange(port, _put("/x", b"", huge), _put("/y"))
    assert answer == b"" or answer.startswith(b"HTTP/1.1 400 "), answer[:200]
    assert b"HTTP/1.1 200" not in answer


def test_keep_alive_connections_carry_many_requests(port: int) -> None:
    """Heads well under the bound add up to more than it on one connection, pipelined in few
    reads: all are served."""
    padding = "X-Padding: " + "p" * (MAX_REQUEST_HEAD_BYTES // 4)
    count = 10
    requests = [_put(f"/beat/{i}", b"x" * 1000, padding) for i in range(count)]
    answer = _exchange(port, b"".join(requests), answers=count)
    assert answer.count(b"HTTP/1.1 200") == count
    assert answer.endswith(b"1000")


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_ends_a_foreground_server_normally(tmp_path: Path, workers: int) -> None:
    """SIGINT to the terminal's process group, as Ctrl-C sends it: the server shuts down and
    ``wharf server serve`` exits 0 without click's "Aborted." (one worker used to exit 1)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    free = int(sock.getsockname()[1])
    sock.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env["WHARF_HOME"] = str(tmp_path / "home")
    command = [sys.executable, "-m", "wharf.cli.main", "server", "serve", "--port", str(free)]
    command += ["--workers", str(workers), "--db-url", f"sqlite:///{tmp_path / 'ws.db'}"]
    process = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        up = wait_until(lambda: healthy(f"http://127.0.0.1:{free}") or process.poll() is not None)
        assert up and process.poll() is None, process.communicate()
        os.killpg(process.pid, signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert process.returncode == 0, stderr
    assert "Aborted" not in stderr and "Traceback" not in stderr, stderr
