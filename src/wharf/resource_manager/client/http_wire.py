"""One HTTP attempt against the Resource Manager, over ``httpcore`` (the fast path) or ``httpx``.

Owns: :class:`Answer`, :class:`AttemptError`, :class:`Wire` (the interface), :class:`CoreWire`,
:class:`HttpxWire` and :func:`open_wire`. A wire only sends one request: retries, login,
idempotency keys and error mapping live once in :mod:`.http_transport`.

Invariants: no ``httpx``/``httpcore`` exception escapes a wire (a failed attempt is an
:class:`AttemptError`, an unreadable answer a :class:`~wharf.core.errors.StoreError`). A forked
child never sends on nor closes a connection it inherited (a :class:`CoreWire`'s, or the
``httpx.Client`` an :class:`HttpxWire` made): it opens its own.
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.request
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import httpcore
import httpx

from wharf.core.errors import InputError, StoreError
from wharf.core.url_credentials import mask_credentials

Headers = list[tuple[bytes, bytes]]
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
"""A request's headers and body go out in separate writes; Nagle's algorithm would hold the body
back until the server acknowledged the headers."""
KEEPALIVE_EXPIRY = httpx.Limits().keepalive_expiry
"""How long an idle connection is kept: what an ``httpx.Client`` gets by default."""
DEFAULT_PORTS = {b"http": 80, b"https": 443}
RETRY_AFTER = b"retry-after"
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
"""Sent with ``Content-Length: 0`` when bodiless, as ``httpx`` sends them."""
CORE_TRANSIENT = (httpcore.TimeoutException, httpcore.NetworkError, httpcore.RemoteProtocolError)
CORE_FAILURES = (
    *CORE_TRANSIENT,
    httpcore.LocalProtocolError,
    httpcore.ProxyError,
    httpcore.UnsupportedProtocol,
)
HTTPX_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
"""Connection failures worth retrying (not, say, an unsupported URL scheme)."""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes
    retry_after: str | None
    """The ``Retry-After`` header, read only for the statuses the transport retries."""


class AttemptError(Exception):
    """No answer came back: ``kind`` is the failure's class name (``ConnectError``...)."""

    def __init__(self, kind: str, message: str, *, transient: bool) -> None:
        super().__init__(f"{kind}: {message}")
        self.transient = transient


class Wire(Protocol):
    def send(
        self, method: str, target: str, content: bytes | None, headers: Headers, retry: bool
    ) -> Answer:
        """One attempt: ``target`` is the path (and query) below the base URL; ``retry``: the
        caller retries this status, so read ``Retry-After``."""
        ...

    def close(self) -> None: ...


class CoreWire:
    """Requests straight through ``httpcore``, one keep-alive connection per calling thread
    (thread-safe: no two threads share a connection), with the URL and fixed headers prepared
    once and no pool: the fast path, lighter than an ``httpx.Client``. It reproduces what
    :class:`HttpxWire` configures (keep-alive expiry, ``TCP_NODELAY``, one timeout, TLS verified
    as ``httpx`` does) and never asks for a compressed answer.

    A socket used by two processes interleaves their requests and answers: each may read the
    other's. So a forked child drops the connections it inherited without closing them (they
    stay the parent's, kept in ``_inherited``) and opens its own on its first call."""

    def __init__(self, url: httpx.URL, timeout: float) -> None:
        self._scheme = url.raw_scheme
        self._host = url.raw_host
        self._port = url.port
        self._prefix = url.raw_path.rstrip(b"/")
        # Sent as given so an IPv6 literal keeps its brackets (httpcore would drop them).
        self._fixed: Headers = [(b"Host", url.netloc), (b"Accept", b"*/*")]
        self._extensions = {"timeout": {"connect": timeout, "read": timeout, "write": timeout}}
        self._ssl = httpx.create_ssl_context(trust_env=True) if self._scheme == b"https" else None
        self._origin = httpcore.Origin(
            self._scheme, self._host, self._port or DEFAULT_PORTS[self._scheme]
        )
        self._local = threading.local()
        self._connections: dict[threading.Thread, httpcore.HTTPConnection] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._inherited: list[dict[threading.Thread, httpcore.HTTPConnection]] = []
        _LIVE_WIRES.add(self)

    def forget_inherited(self) -> None:
        """In a forked child: the parent's connections are dropped, not closed."""
        self._inherited.append(self._connections)
        self._connections = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    def _connection(self, *, replace: bool = False) -> httpcore.HTTPConnection:
        """This thread's connection: the one it kept alive, else a new one (on its first call,
        after the server closed it or its keep-alive expired, or to ``replace`` it)."""
        kept: httpcore.HTTPConnection | None = getattr(self._local, "connection", None)
        if kept is not None and not (
            replace or self._closed or kept.is_closed() or kept.has_expired()
        ):
            return kept
        connection = httpcore.HTTPConnection(
            self._origin,
            ssl_context=self._ssl,
            keepalive_expiry=KEEPALIVE_EXPIRY,
            socket_options=NO_DELAY,
        )
        with self._lock:
            if self._closed:
                raise AttemptError("ClosedError", "the client is closed", transient=False)
            # Threads that ended leave their connection behind: closed here, so they do not
            # linger until garbage collection.
            ended = [thread for thread in self._connections if not thread.is_alive()]
            stale = [self._connections.pop(thread) for thread in ended]
            if kept is not None:
                stale.append(kept)
            self._connections[threading.current_thread()] = connection
        for old in stale:
            old.close()
        self._local.connection = connection
        return connection

    def send(
        self, method: str, target: str, content: bytes | None, headers: Headers, retry: bool
    ) -> Answer:
        url = httpcore.URL(
            scheme=self._scheme,
            host=self._host,
            port=self._port,
            target=self._prefix + target.encode("ascii"),
        )
        # The headers are complete here (Host fixed, the length as httpx would send it), so
        # the request goes to handle_request itself: a pool's request() would redo that work.
        if content:
            headers = [*self._fixed, (b"Content-Length", str(len(content)).encode()), *headers]
        elif method in BODY_METHODS:
            headers = [*self._fixed, (b"Content-Length", b"0"), *headers]
        else:
            headers = self._fixed + headers
        request = httpcore.Request(
            method.encode(), url, headers=headers, content=content, extensions=self._extensions
        )
        try:
            try:
                response = self._connection().handle_request(request)
            except httpcore.ConnectionNotAvailable:  # lost since the check: one new one
                response = self._connection(replace=True).handle_request(request)
            try:
                body = response.read()
            finally:
                response.close()
        except CORE_FAILURES as exc:
            raise AttemptError(
                type(exc).__name__, str(exc), transient=isinstance(exc, CORE_TRANSIENT)
            ) from None
        retry_after = None
        if retry:
            for name, value in response.headers:
                if name.lower() == RETRY_AFTER:
                    retry_after = value.decode("latin-1")
                    break
        return Answer(response.status, body, retry_after)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()


class HttpxWire:
    """Requests through an ``httpx.Client`` whose ``base_url`` is the RM's URL.

    A client the wire made (``make`` given) is made anew in a forked child on its first call:
    the inherited one is dropped without closing (its pooled sockets stay the parent's, kept in
    ``_inherited``), as :class:`CoreWire` drops its connections. A client the caller gave is
    the caller's to keep apart."""

    def __init__(
        self, client: httpx.Client, make: Callable[[], httpx.Client] | None = None
    ) -> None:
        self._http: httpx.Client | None = client
        self._make = make
        self._lock = threading.Lock()
        self._closed = False
        self._inherited: list[httpx.Client] = []
        if make is not None:
            _LIVE_WIRES.add(self)

    def forget_inherited(self) -> None:
        """In a forked child: the client is dropped, not closed (made anew on first use)."""
        if self._http is not None:
            self._inherited.append(self._http)
        self._http = None
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        http = self._http
        if http is None:
            with self._lock:
                if self._closed or self._make is None:
                    raise AttemptError("ClosedError", "the client is closed", transient=False)
                if self._http is None:
                    self._http = self._make()
                http = self._http
        return http

    def send(
        self, method: str, target: str, content: bytes | None, headers: Headers, retry: bool
    ) -> Answer:
        http = self._client()
        try:
            response = http.request(method, target, content=content, headers=headers)
        except httpx.TransportError as exc:
            raise AttemptError(
                type(exc).__name__, str(exc), transient=isinstance(exc, HTTPX_TRANSIENT)
            ) from None
        except httpx.HTTPError as exc:  # e.g. an undecodable answer: not worth a retry
            raise StoreError(f"HTTP error talking to the Resource Manager: {exc}") from None
        return Answer(
            response.status_code,
            response.content,
            response.headers.get("retry-after") if retry else None,
        )

    def close(self) -> None:
        with self._lock:
            self._closed = True
            http, self._http = self._http, None
        if http is not None:
            http.close()


_LIVE_WIRES: weakref.WeakSet[CoreWire | HttpxWire] = weakref.WeakSet()


def _forget_inherited_connections() -> None:
    for wire in list(_LIVE_WIRES):
        wire.forget_inherited()


os.register_at_fork(after_in_child=_forget_inherited_connections)


def open_wire(url: str, timeout: float, http: httpx.Client | None) -> Wire:
    """The wire for ``url``: an :class:`HttpxWire` over the caller's client, or over a new one
    when the environment names a proxy; else a :class:`CoreWire`.

    A URL holding credentials (``http://user:pass@host``) is refused: ``httpx`` would send them
    as Basic auth in place of the RM's bearer token, so every authenticated call would fail."""
    if http is not None:
        return HttpxWire(http)
    try:
        parsed = httpx.URL(url)
        if parsed.userinfo:
            shown = parsed.copy_with(username=None, password=None)
            raise InputError(
                f"Invalid Resource Manager URL '{shown}' (credentials removed): credentials in "
                "the URL are not supported; give an API key, or a username and password."
            )
        if _env_proxy(parsed.scheme):

            def make() -> httpx.Client:
                return httpx.Client(
                    base_url=url,
                    timeout=timeout,
                    transport=httpx.HTTPTransport(socket_options=NO_DELAY),
                )

            return HttpxWire(make(), make)
    except httpx.InvalidURL as exc:
        masked = mask_credentials(url)
        raise InputError(f"Invalid Resource Manager URL {masked!r}: {exc}") from None
    if not parsed.host:
        raise InputError(f"Invalid Resource Manager URL {mask_credentials(url)!r}: no host.")
    return CoreWire(parsed, timeout)


def _env_proxy(scheme: str) -> bool:
    """Whether the environment names a proxy ``httpx`` could route this scheme through; the
    fast path then steps aside rather than reimplement ``NO_PROXY`` matching."""
    proxies = urllib.request.getproxies()
    return scheme in proxies or "all" in proxies
