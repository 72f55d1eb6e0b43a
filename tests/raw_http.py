"""HTTP/1.1 over a plain socket, for tests that must control what is sent and when: a head that
announces a body which never comes, a chunked body cut off midway.

:func:`exchange` sends a request head and some body bytes, then reads the answer, waiting at
most ``timeout`` seconds for it: a server that waits for the rest of the body times out (the
test fails) instead of answering.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


def head(method: str, path: str, port: int, **headers: str) -> bytes:
    """A request head; header names are given with ``_`` for ``-`` (``Content_Length``)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def exchange(
    port: int, request_head: bytes, body: Iterable[bytes] = (), timeout: float = 10
) -> Answer:
    """Send ``request_head`` and ``body`` (nothing more), then read one answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(request_head)
        for part in body:
            sock.sendall(part)
        data = b""
        while b"\r\n\r\n" not in data:
            received = sock.recv(65536)
            if not received:
                raise ConnectionError(f"the server closed the connection: {data!r}")
            data += received
        raw_head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            received = sock.recv(65536)
            if not received:
                break
            rest += received
        return Answer(int(status_line.split()[1]), headers, rest[:length])
