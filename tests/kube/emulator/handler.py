"""The HTTP/1.1 plumbing of the emulator's server: connections, bodies, answers, streams.

``RequestHandler`` reads each request (Content-Length or chunked body, always fully, so
keep-alive connections stay in step), checks the bearer token, hands the request to the
``ApiServer`` and turns any ``ApiError`` into its ``Status`` body (plus ``Retry-After`` for
429). Small answers go out as one write with TCP_NODELAY. ``Server`` is a
``ThreadingHTTPServer`` on 127.0.0.1 that tracks its connections so that ``close_connections``
can end them all, idle keep-alive ones included, when the emulator stops.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.routes import Query, method_not_allowed
from tests.kube.emulator.streams import ChunkedResponse

if TYPE_CHECKING:
    from tests.kube.emulator.http import ApiServer

log = logging.getLogger(__name__)


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Buffered writes, flushed after each answer (and each stream chunk): headers and a small
    # body leave in one segment.
    wbufsize = 64 * 1024
    server: Server

    def setup(self) -> None:
        super().setup()
        # Small answers go out at once (no Nagle / delayed-ACK stalls of ~40 ms per request).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def do_HEAD(self) -> None:
        self._handle("HEAD")

    def do_OPTIONS(self) -> None:
        self._handle("OPTIONS")

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def _handle(self, method: str) -> None:
        self._streaming = False
        body = self._read_body()
        try:
            self._answer(method, body)
        except ConnectionError:
            # The client went away mid-answer: nothing more to say on this connection.
            self.close_connection = True

    def _answer(self, method: str, body: bytes) -> None:
        url = urlsplit(self.path)
        api = self.server.api
        try:
            user = api.user_of(self.headers.get("Authorization"))
            if method in ("HEAD", "OPTIONS"):
                raise method_not_allowed()
            api.dispatch(self, method, url.path, Query(url.query), body, user=user)
        except ApiError as error:
            self._fail(error)
        except ConnectionError:
            raise
        except Exception:
            log.exception("emulator: %s %s failed", method, self.path)
            self._fail(ApiError(500, "InternalError", f"internal error serving {url.path}"))

    def _fail(self, error: ApiError) -> None:
        if self._streaming:
            self.close_connection = True
            return
        headers = {}
        retry_after = (error.details or {}).get("retryAfterSeconds")
        if error.code == 429 or retry_after is not None:
            headers["Retry-After"] = str(retry_after or 1)
        self.send_json(error.code, error.status(), headers)

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            return self._read_chunked_body()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _read_chunked_body(self) -> bytes:
        body = bytearray()
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                return bytes(body)
            body += self.rfile.read(size)
            self.rfile.readline()  # the CRLF after the chunk

    def content_type(self) -> str:
        return self.headers.get("Content-Type") or "application/json"

    def send_json(self, code: int, obj: Any, headers: dict[str, str] | None = None) -> None:
        self.send_body(code, json.dumps(obj).encode(), "application/json", headers)

    def send_body(
        self,
        code: int,
        data: bytes,
        content_type: str | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.send_response(code)
        if content_type:
            self.send_header("Content-Type", content_type)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def start_stream(self, content_type: str) -> ChunkedResponse:
        self._streaming = True
        return ChunkedResponse(self, content_type)


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, api: ApiServer, port: int = 0) -> None:
        super().__init__(("127.0.0.1", port), RequestHandler)
        self.api = api
        self._connections_lock = threading.Lock()
        self._connections: set[socket.socket] = set()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("emulator: connection from %s ended with an error", client_address, exc_info=True)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._connections_lock:
                self._connections.discard(request)

    def close_connections(self) -> None:
        """Cut every open connection (idle keep-alive ones included): their threads end."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
