"""Serving an ASGI app in the foreground with uvicorn, for the workspace server and the
Resource Manager's API alike.

Owns :func:`serve`, :func:`bind_socket` and :class:`BoundedHttpToolsProtocol`.

Workers are uvicorn's own supervisor (``Multiprocess``: a socket bound once, handed to spawned
workers, restarted if they die). Each worker builds its app by calling the factory it is given,
a picklable object holding the settings, so no import string, environment variable or
module-level app is needed to pass the settings along.

Per-request cost matters (heartbeats, lease renewals): HTTP is parsed by httptools (cheaper than
h11) through :class:`BoundedHttpToolsProtocol`, the
event loop is uvloop where it is installed (the ``server`` extra), idle keep-alive
connections are kept longer than clients keep them, and each worker's start-up heap is frozen
out of the garbage collector's full collections.

Invariant: a request line plus headers larger than ``MAX_REQUEST_HEAD_BYTES`` (431), or a target
longer than httptools parses (414), is refused with a JSON error (``detail``, ``type``) and the
connection closed, before more of it is buffered; anything smaller reaches the app, which
answers 414 beyond its own URL limit.
"""

from __future__ import annotations

import gc
import json
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_REQUEST_HEAD_BYTES = 256 * 1024
"""Request lines and headers up to about this size reach the app; larger ones are refused by
the protocol itself (431): httptools, unlike h11, sets no limit of its own."""
MAX_TARGET_BYTES = 65535
"""The longest request target httptools parses; longer ones are refused by the protocol (414).
The app's own ``max_url_bytes`` (414 as well) is usually far lower."""
HEAD_SLICE_BYTES = 8192
"""While a request head is read, data is parsed in slices of this size (see the protocol)."""
REFUSAL_LINGER_SECONDS = 5.0
"""How long a refused connection stays open, discarding input, after its answer."""


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with refusals in the service's JSON error shape (``detail``,
    and the error's kind under :attr:`KIND_KEY`) for request heads and targets too large to
    parse.

    While a head is read, received data is parsed in slices of ``HEAD_SLICE_BYTES``, so a head's
    size is known within one slice even when one read holds several pipelined requests (bodies
    are parsed whole: uvicorn copies the body gathered so far on every piece). After a refusal
    the connection is closed and nothing more of it is parsed or served.
    """

    KIND_KEY: ClassVar[str] = "type"
    """Where the service's error bodies name the kind of error (the workspace server's)."""
    _head_bytes = 0
    """Bytes of the current request head received so far; -1 while its body is read."""
    _refused = False

    def data_received(self, data: bytes) -> None:
        view, position = memoryview(data), 0
        while position < len(data) and self._serving():
            if self._head_bytes < 0:
                end = len(data)
            else:
                end = min(len(data), position + HEAD_SLICE_BYTES)
                self._head_bytes += end - position
                if self._head_bytes > MAX_REQUEST_HEAD_BYTES:
                    self._refuse(431, "The request line and headers are too large.", "HeadTooLarge")
                    return
            piece = data if position == 0 and end == len(data) else bytes(view[position:end])
            position = end
            super().data_received(piece)

    def _serving(self) -> bool:
        """Not refused, not closed, and not handed over to another protocol (an upgrade)."""
        transport = self.transport
        return not self._refused and not transport.is_closing() and transport.get_protocol() is self

    def on_message_begin(self) -> None:
        if not self._refused:
            super().on_message_begin()

    def on_url(self, url: bytes) -> None:
        if self._refused:
            return
        super().on_url(url)
        if len(self.url) > MAX_TARGET_BYTES:
            self._refuse(
                414,
                f"The request URI is longer than {MAX_TARGET_BYTES} bytes; split the filter "
                "into several requests.",
                "URITooLong",
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._refused:
            super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if not self._refused:
            self._head_bytes = -1
            super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if not self._refused:
            super().on_body(body)

    def on_message_complete(self) -> None:
        if not self._refused:
            self._head_bytes = 0
            super().on_message_complete()

    def _refuse(self, status: int, detail: str, kind: str) -> None:
        self._refused = True
        transport = self.transport
        if transport.is_closing():
            return
        body = json.dumps({"detail": detail, self.KIND_KEY: kind}).encode()
        head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n".encode()]
        head.extend(
            name + b": " + value + b"\r\n" for name, value in self.server_state.default_headers
        )
        head.append(
            b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body)
        )
        transport.write(b"".join(head) + body)
        if not transport.can_write_eof():
            transport.close()
            return
        # Closing with unread data resets the connection, and a client still sending its
        # request would lose the answer: end our side, discard what still comes, close later.
        transport.write_eof()
        self.loop.call_later(REFUSAL_LINGER_SECONDS, transport.close)


KEEP_ALIVE_SECONDS = 75
"""Longer than clients keep idle connections (httpx: 5 s by default), so a client never reuses a
connection the server is closing; steps beat every 15 s by default."""


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket for the workers.

    Created with ``proto=IPPROTO_TCP`` (uvicorn's ``Config.bind_socket`` leaves it 0): asyncio
    turns on ``TCP_NODELAY`` only for such sockets, and without it every response written in
    two parts waits ~40 ms for a delayed ACK.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


@dataclass(frozen=True)
class _FreezingFactory:
    """``build`` (picklable, run in each worker), then the worker's heap frozen: what is loaded
    and built by now lives as long as the worker, so full collections (which stall every request
    of the worker) need not walk it."""

    build: Callable[[], Any]

    def __call__(self) -> Any:
        app = self.build()
        gc.freeze()
        return app


def serve(
    factory: Callable[[], Any],
    *,
    host: str,
    port: int,
    workers: int = 1,
    log_level: str = "info",
    access_log: bool = False,
    protocol: type[BoundedHttpToolsProtocol] = BoundedHttpToolsProtocol,
) -> None:
    """Serve the app ``factory`` builds (in each worker) until interrupted: blocks.
    ``protocol``: a subclass whose refusals match the service's error shape."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    config = uvicorn.Config(
        _FreezingFactory(factory),
        factory=True,
        host=host,
        port=port,
        workers=workers,
        http=protocol,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        log_level=log_level,
        access_log=access_log,
        timeout_graceful_shutdown=10,
    )
    sock = bind_socket(host, port)
    try:
        if workers <= 1:
            uvicorn.Server(config).run(sockets=[sock])
        else:
            Multiprocess(config, sockets=[sock]).run()
    finally:
        sock.close()
