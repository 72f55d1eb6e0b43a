"""The REST store's HTTP session: one ``httpx.Client`` (pooled keep-alive connections, safe to
share between threads), bearer authentication, JSON in and out, errors converted.

Invariants:
- Every response is checked here: an error status becomes a Wharf error (``errors``); a
  transport failure becomes ``StoreUnavailableError``; no httpx exception escapes. A URL that
  is not ``http(s)://``, does not parse or has a query string (``check_base_url``), or a
  credential that cannot be sent in a header, is an ``InputError`` at once, not an outage.
- A route a Wharf server does not have (a server older than this client) is
  ``ServerTooOldError``, one line naming the route and both versions, not a bare "Not Found"
  (nor a 422 of the server taking the route's name for an id).
- Records come back exactly as the SQL store returns them: times are aware datetimes whose
  ``tzinfo`` is ``datetime.UTC`` (pydantic would otherwise give its own UTC object).
- ``request_count`` counts the HTTP requests sent (benchmarks read it).
- A forked child never sends on nor closes a connection it inherited: a session's client is
  made anew in the child on its first request (:class:`_Connections`).
"""

from __future__ import annotations

import copy
import importlib
import itertools
import json
import os
import threading
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from functools import cache
from typing import Any, TypeVar, get_args

import httpx
from pydantic import BaseModel
from pydantic_core import PydanticSerializationError

from wharf.core.errors import InputError, StoreUnavailableError
from wharf.core.server_urls import check_base_url
from wharf.core.url_credentials import mask_credentials
from wharf.store.rest import errors

M = TypeVar("M", bound=BaseModel)
DEFAULT_TIMEOUT_SECONDS = 30.0
_JSON = {"content-type": "application/json"}


@cache
def _datetime_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    names = []
    for name, field in cls.model_fields.items():
        annotation = field.annotation
        if annotation is datetime or datetime in get_args(annotation):
            names.append(name)
    return tuple(names)


def utc(value: Any) -> Any:
    """``value`` with every datetime of it (and of the records inside it) in ``datetime.UTC``."""
    if isinstance(value, list):
        return [utc(v) for v in value]
    if isinstance(value, dict):
        return {k: utc(v) for k, v in value.items()}
    if not isinstance(value, BaseModel) or not type(value).__module__.startswith(
        ("wharf.store", "wharf.server")
    ):
        return value
    updates: dict[str, Any] = {}
    for name in _datetime_fields(type(value)):
        moment = getattr(value, name)
        if moment is not None and moment.tzinfo is not UTC:
            updates[name] = moment.astimezone(UTC)
    for name, field_value in value:
        if isinstance(field_value, BaseModel | list | dict) and name not in ("spec", "parameters"):
            fixed = utc(field_value)
            if fixed is not field_value:
                updates[name] = fixed
    return value.model_copy(update=updates) if updates else value


class _Connections:
    """The keep-alive connections of a session and of its copies (``with_credential``): one
    ``httpx.Client``, made anew in a forked child.

    A socket used by two processes interleaves their requests and responses: each may read the
    other's answer (a wrong record, "illegal status line", a disconnect or a timeout). So a
    child drops the client it inherited without closing it (nothing is sent on the parent's
    sockets) and makes its own on its first request; a transport the caller gave is the
    caller's to keep apart."""

    def __init__(self, make: Callable[[], httpx.Client]) -> None:
        self._make = make
        self._client: httpx.Client | None = make()
        self._lock = threading.Lock()
        _LIVE_CONNECTIONS.add(self)

    @property
    def client(self) -> httpx.Client:
        client = self._client
        if client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
                client = self._client
        return client

    def forget_inherited(self) -> None:
        """In a forked child: the parent's client is dropped, not closed."""
        self._client = None
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


_LIVE_CONNECTIONS: weakref.WeakSet[_Connections] = weakref.WeakSet()


def _forget_inherited_connections() -> None:
    for connections in list(_LIVE_CONNECTIONS):
        connections.forget_inherited()


os.register_at_fork(after_in_child=_forget_inherited_connections)


class HttpSession:
    def __init__(
        self,
        url: str,
        credential: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        shown = mask_credentials(url)  # never the URL's own password or token in a message
        self.shown_url = shown
        """The URL as messages show it: its password, token and secret parameters as ***."""
        if not self.url.startswith(("http://", "https://")):
            raise InputError(f"A Wharf server URL must start with http:// or https://: {shown!r}.")
        check_base_url(url, "Wharf server")
        try:
            userinfo = httpx.URL(self.url).userinfo
        except httpx.InvalidURL as exc:
            raise InputError(f"Invalid Wharf server URL {shown!r}: {exc}") from None
        if userinfo:  # httpx would send them as Basic auth in place of the bearer credential
            raise InputError(
                f"Invalid Wharf server URL {shown!r}: credentials in the URL are not supported; "
                "log in with an API key, or a username and password."
            )
        headers = {"user-agent": "wharf-rest-store"}
        if credential:
            headers["authorization"] = _bearer(credential)

        def make() -> httpx.Client:
            return httpx.Client(
                base_url=self.url,
                headers=headers,
                timeout=timeout,
                transport=transport,
                # Idle connections live longer than a heartbeat interval (15 s by default), so a
                # step's heartbeats reuse one connection instead of opening one each time.
                limits=httpx.Limits(
                    max_connections=64, max_keepalive_connections=32, keepalive_expiry=60.0
                ),
            )

        try:
            self._connections = _Connections(make)
        except httpx.InvalidURL as exc:
            raise InputError(f"Invalid Wharf server URL {shown!r}: {exc}") from None
        self._counter = itertools.count(1)
        self.request_count = 0
        self._auth: dict[str, str] = {}
        """Headers that replace the client's own (a session over another's connections)."""
        self._owns_client = True

    def with_credential(self, credential: str) -> HttpSession:
        """A session over this one's connections (and transport) that authenticates with
        ``credential`` instead; closing it leaves them open for this session, which owns
        them."""
        other = copy.copy(self)
        other._auth = {"authorization": _bearer(credential)}
        other._owns_client = False
        return other

    def send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: BaseModel | dict[str, Any] | None = None,
    ) -> Any:
        """The decoded JSON of a successful response (None for 204)."""
        content = None
        try:
            if isinstance(body, BaseModel):
                content = body.model_dump_json()
            elif body is not None:
                content = json.dumps(body)
        except (PydanticSerializationError, TypeError, ValueError) as exc:
            raise InputError(f"A value cannot be stored: {exc}") from None
        query = None if params is None else {k: v for k, v in params.items() if v is not None}
        self.request_count = next(self._counter)
        try:
            headers = {**_JSON, **self._auth} if content else self._auth or None
            response = self._connections.client.request(
                method, path, params=query, content=content, headers=headers
            )
        except httpx.HTTPError as exc:
            raise StoreUnavailableError(
                f"Cannot reach the Wharf server at {self.shown_url}: {exc or type(exc).__name__}"
            ) from None
        if response.status_code == 204:
            return None
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            status = response.status_code
            if errors.unrouted(status, data) or errors.literal_taken_for_id(status, data, path):
                self._refuse_unknown_route(method, path)
            raise errors.from_response(response.status_code, data, self.shown_url)
        return data

    def _refuse_unknown_route(self, method: str, path: str) -> None:
        """``ServerTooOldError`` if a Wharf server (its ``/health/live`` reports its version)
        has no route ``method path``; otherwise (another program, a URL with a path) nothing,
        the caller's error standing. Asked only once a route was refused."""
        # The root package (always imported before this module), read without an import the
        # import contracts would follow into the SDK through the root's lazy public names.
        client_version = str(importlib.import_module("wharf").__version__)
        self.request_count = next(self._counter)
        try:
            health = self._connections.client.get("/health/live").json()
        except (httpx.HTTPError, ValueError):
            return
        version = health.get("version") if isinstance(health, dict) else None
        if isinstance(version, str):
            message = errors.too_old(method, path, self.shown_url, version, client_version)
            raise errors.ServerTooOldError(message)

    def model(self, cls: type[M], method: str, path: str, **kwargs: Any) -> M:
        result: M = utc(cls.model_validate(self.send(method, path, **kwargs)))
        return result

    def close(self) -> None:
        if self._owns_client:
            self._connections.close()


def _bearer(credential: str) -> str:
    """The ``authorization`` header of ``credential``; InputError for one no header can carry."""
    if not all("!" <= char <= "~" for char in credential):
        raise InputError(
            "The API key or token has a space, a line break or a non-ASCII character, "
            "which no Wharf credential has: copy it again, exactly as it was shown."
        )
    return f"Bearer {credential}"


def page_params(page: Any) -> dict[str, Any]:
    return {"index": page.index, "size": page.size, "sort": page.sort}
