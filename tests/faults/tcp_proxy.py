"""A TCP proxy for fault tests: clients connect to it instead of the database, and a test cuts
the database away and brings it back.

:class:`TcpProxy` listens on ``127.0.0.1`` (a free port) and forwards every connection to
``upstream`` (PostgreSQL, MariaDB), one thread per connection.

- :meth:`TcpProxy.cut`: new connections are accepted and reset at once (as a refused
  connection would be), and the existing ones are either dropped (reset: the client sees an
  error at its next read or write) or blackholed (kept open, nothing forwarded either way and
  what arrives discarded: the client waits until its own timeout, as behind a dead network);
- :meth:`TcpProxy.restore`: new connections are forwarded again; blackholed ones are reset (their
  byte streams lost data and cannot continue);
- ``sent``: called with what a client sends, before it is forwarded (a test that cuts there
  cuts just before a given request reaches ``upstream``).

Nothing here is Wharf-specific; it is a test utility, started and closed by the test.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import threading
from collections.abc import Callable
from typing import Literal

CutMode = Literal["drop", "blackhole"]
_POLL_SECONDS = 0.05
_CHUNK = 65536


def _reset(sock: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), so the peer fails at once."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Pair:
    """One client connection and its upstream connection, pumped by one thread."""

    def __init__(
        self,
        client: socket.socket,
        upstream: socket.socket,
        sent: Callable[[bytes], object] | None = None,
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.sent = sent
        self.blackholed = False
        self.closed = threading.Event()

    def pump(self) -> None:
        peers = {self.client: self.upstream, self.upstream: self.client}
        try:
            while not self.closed.is_set():
                readable, _, _ = select.select(list(peers), [], [], _POLL_SECONDS)
                for sock in readable:
                    data = sock.recv(_CHUNK)
                    if not data:
                        return
                    if sock is self.client and self.sent is not None:
                        self.sent(data)
                    if not self.blackholed:
                        peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            self.close()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        _reset(self.client)
        _reset(self.upstream)


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``upstream``; see the module docstring."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        sent: Callable[[bytes], object] | None = None,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.sent = sent
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self._listener.settimeout(_POLL_SECONDS)
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._cut = False
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self, mode: CutMode = "drop") -> None:
        """Refuse new connections; drop or blackhole the existing ones."""
        with self._lock:
            self._cut = True
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            if mode == "drop":
                pair.close()
            else:
                pair.blackholed = True
                with self._lock:
                    self._pairs.append(pair)

    def restore(self) -> None:
        """Forward new connections again; reset the blackholed ones."""
        with self._lock:
            self._cut = False
            blackholed = [p for p in self._pairs if p.blackholed]
            self._pairs = [p for p in self._pairs if not p.blackholed]
        for pair in blackholed:
            pair.close()

    def connections(self) -> int:
        """Connections forwarded now (not counting blackholed ones)."""
        with self._lock:
            return sum(1 for p in self._pairs if not p.closed.is_set() and not p.blackholed)

    def close(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for pair in pairs:
            pair.close()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if self._cut:
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            pair = _Pair(client, upstream, self.sent)
            with self._lock:
                self._pairs.append(pair)
            threading.Thread(target=pair.pump, name="tcp-proxy-pair", daemon=True).start()
