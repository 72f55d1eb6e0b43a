"""Streaming responses of the emulator: watch event streams and followed pod logs.

Both use HTTP/1.1 chunked transfer encoding on the request's own connection. A watch stream
writes one ``{"type": …, "object": …}`` JSON line per chunk until its server-side timeout, an
``ERROR`` event, the client going away, or ``drop()`` (which cuts the connection without the
terminating chunk, as a lost connection looks to a client). Bookmarks: when asked to, and at a
timeout end, a stream first drains every event its watcher already holds, then writes the
watcher's ``BOOKMARK`` (the store's current version, taken once nothing is queued), so a client
resuming from it misses nothing. ``WatchRegistry`` holds the open watch streams (for bookmarks, faults and shutdown).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.kube.emulator.resources import ResourceType
    from tests.kube.emulator.store import ObjectStore, Watcher, WatchEvent

POLL_SECONDS = 0.05
MAX_BOOKMARK_ATTEMPTS = 100


class ChunkedResponse:
    """A 200 response with a chunked body, written on the handler's connection."""

    def __init__(self, handler: BaseHTTPRequestHandler, content_type: str) -> None:
        self._handler = handler
        self._lock = threading.Lock()
        self.dropped = threading.Event()
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()
        handler.wfile.flush()

    def write(self, data: bytes) -> bool:
        """Send one chunk; False if the client is gone or the stream was dropped."""
        if not data:
            return True
        if self.dropped.is_set():
            return False
        try:
            with self._lock:
                self._handler.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self._handler.wfile.flush()
        except OSError:
            self._handler.close_connection = True
            return False
        return True

    def finish(self) -> None:
        """End the body properly (the connection stays usable for the next request)."""
        if self.dropped.is_set():
            return
        try:
            with self._lock:
                self._handler.wfile.write(b"0\r\n\r\n")
                self._handler.wfile.flush()
        except OSError:
            self._handler.close_connection = True

    def drop(self) -> None:
        """Cut the connection now, mid-body: the client sees the stream break."""
        self.dropped.set()
        self._handler.close_connection = True
        with contextlib.suppress(OSError):
            self._handler.connection.shutdown(socket.SHUT_RDWR)

    def client_gone(self) -> bool:
        """True once the client closed its end (or the stream was dropped)."""
        if self.dropped.is_set():
            return True
        sock = self._handler.connection
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable and sock.recv(1, socket.MSG_PEEK) == b"":
                self._handler.close_connection = True
                return True
        except (OSError, ValueError):
            self._handler.close_connection = True
            return True
        return False


class WatchRegistry:
    """The open watch streams of one server (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: set[WatchStream] = set()

    def add(self, stream: WatchStream) -> None:
        with self._lock:
            self._streams.add(stream)

    def remove(self, stream: WatchStream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def snapshot(self) -> list[WatchStream]:
        with self._lock:
            return list(self._streams)


class WatchStream:
    """One watch request being served: store watcher -> chunked JSON lines."""

    def __init__(
        self,
        response: ChunkedResponse,
        watcher: Watcher,
        store: ObjectStore,
        rtype: ResourceType,
        *,
        timeout_seconds: float,
        bookmarks: bool,
        stopping: threading.Event,
    ) -> None:
        self._response = response
        self._watcher = watcher
        self._store = store
        self._rtype = rtype
        self._deadline = time.monotonic() + timeout_seconds
        self._bookmarks = bookmarks
        self._stopping = stopping
        self._bookmark_requested = threading.Event()

    def request_bookmark(self) -> None:
        """Ask for a BOOKMARK event soon (ignored unless the client allowed bookmarks)."""
        self._bookmark_requested.set()

    def drop(self) -> None:
        self._response.drop()

    def run(self) -> None:
        """Serve events until the timeout, an ERROR event, the client leaving or a drop."""
        try:
            self._serve()
        finally:
            self._watcher.close()

    def _serve(self) -> None:
        response = self._response
        while not self._stopping.is_set():
            remaining = self._deadline - time.monotonic()
            if remaining <= 0:
                if self._bookmarks and not self._send_bookmark():
                    return
                response.finish()
                return
            if self._bookmark_requested.is_set():
                self._bookmark_requested.clear()
                if self._bookmarks and not self._send_bookmark():
                    return
            event = self._watcher.next(timeout=min(POLL_SECONDS, remaining))
            if event is None:
                if self._watcher.closed:
                    # The store closed the watch (as a restarting server would): cut the stream.
                    response.drop()
                    return
                if response.client_gone():
                    return
                continue
            if not self._send(event):
                return
            if event.type == "ERROR":
                response.finish()
                return
        response.drop()

    def _send(self, event: WatchEvent) -> bool:
        line = json.dumps({"type": event.type, "object": event.object}, separators=(",", ":"))
        return self._response.write(line.encode() + b"\n")

    def _send_bookmark(self) -> bool:
        # The watcher only hands out a bookmark once its queue is empty: drain it first.
        for _ in range(MAX_BOOKMARK_ATTEMPTS):
            while (event := self._watcher.next(timeout=0)) is not None:
                if not self._send(event):
                    return False
                if event.type == "ERROR":
                    self._response.finish()
                    return False
            bookmark = self._watcher.bookmark()
            if bookmark is not None:
                return self._send(bookmark)
        return True


def error_event_line(status: dict[str, Any]) -> bytes:
    """The single ``ERROR`` event a real server sends for a watch it cannot serve (e.g. 410)."""
    return json.dumps({"type": "ERROR", "object": status}, separators=(",", ":")).encode() + b"\n"
