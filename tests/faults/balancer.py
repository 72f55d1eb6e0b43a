"""A round-robin HTTP load balancer for replica tests: clients talk to it instead of one
replica, and every request goes to the next upstream in turn (as an nginx or a Kubernetes
Service in front of several ``wharf … serve`` processes would spread them).

:class:`Balancer` listens on ``127.0.0.1`` (a free port), one thread per client connection.
Each request is sent whole to the next upstream; an upstream that refuses the connection is
skipped for the next one (a replica that is down), and when none accepts, or one fails after
the request was sent (killed mid-request), the client gets a 502, as from a real proxy.
:attr:`Balancer.served` counts the requests each upstream answered.

Nothing here is Wharf-specific; it is a test utility, started and closed by the test.
"""

from __future__ import annotations

import http.client
import itertools
import threading
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "upgrade", "proxy-connection"}
_TIMEOUT_SECONDS = 60.0


class Balancer:
    """Spreads HTTP requests over ``upstreams`` (``host:port`` strings); see the module."""

    def __init__(self, upstreams: list[str]) -> None:
        self.upstreams = list(upstreams)
        self.served = dict.fromkeys(self.upstreams, 0)
        self.statuses: Counter[int] = Counter()
        """Status codes answered to clients, 502s of the balancer's own included."""
        self.failures: list[tuple[str, str, int, bytes]] = []
        """(method, path, status, body) of every answer with a status of 400 or more."""
        self.in_flight: dict[str, list[str]] = {u: [] for u in self.upstreams}
        """Per upstream, ``"METHOD path"`` of each request sent to it and not answered yet."""
        self.on_answered: Callable[[str, str, str], bool] | None = None
        """Called as ``(method, path, upstream)`` once an upstream answered a request, before
        the client gets the answer; returning True loses the answer (the client gets a 502), as
        when a replica dies between its commit and its reply (the hook may kill it)."""
        self._lock = threading.Lock()
        self._turn = itertools.count()
        balancer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                balancer.forward(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def _order(self) -> list[str]:
        with self._lock:
            start = next(self._turn) % len(self.upstreams)
        return self.upstreams[start:] + self.upstreams[:start]

    def forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        for upstream in self._order():
            conn = http.client.HTTPConnection(upstream, timeout=_TIMEOUT_SECONDS)
            try:
                conn.connect()
            except OSError:
                conn.close()
                continue  # down: the next replica
            call = f"{handler.command} {handler.path}"
            with self._lock:
                self.in_flight[upstream].append(call)
            try:
                conn.request(handler.command, handler.path, body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
            except (OSError, http.client.HTTPException):
                conn.close()
                self._reply(handler, 502, b'{"detail": "upstream failed"}', [])
                return
            finally:
                with self._lock:
                    self.in_flight[upstream].remove(call)
            conn.close()
            with self._lock:
                self.served[upstream] += 1
            hook = self.on_answered
            if hook is not None and hook(handler.command, handler.path, upstream):
                self._reply(handler, 502, b'{"detail": "upstream failed"}', [])
                return
            kept = [(k, v) for k, v in response.getheaders() if k.lower() not in _HOP]
            kept = [(k, v) for k, v in kept if k.lower() != "content-length"]
            self._reply(handler, response.status, payload, kept)
            return
        self._reply(handler, 502, b'{"detail": "no upstream answered"}', [])

    def _reply(
        self, handler: BaseHTTPRequestHandler, status: int, payload: bytes, headers: list[Any]
    ) -> None:
        with self._lock:
            self.statuses[status] += 1
            if status >= 400:
                self.failures.append((handler.command, handler.path, status, payload[:500]))
        try:
            handler.send_response(status)
            for name, value in headers:
                handler.send_header(name, value)
            if status == 502:
                handler.send_header("content-type", "application/json")
            handler.send_header("content-length", str(len(payload)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(payload)
        except OSError:
            pass  # the client went away

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Balancer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
