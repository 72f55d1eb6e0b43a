"""The HTTP transport under :class:`~wharf.resource_manager.client.http.HttpResourceManager`:
login and token caching, idempotency keys, retries, error mapping.

Owns: :class:`RetryPolicy`, :class:`Transport`.

Behaviour (modelled on the reference RM client, zenml_spec §7.2):
- **Login**: ``POST /v1/auth/login`` with the API key (or username and password); the token is
  cached and reused until five minutes before it expires (half its lifetime for tokens shorter
  than ten minutes), measured on this process's monotonic clock from ``expires_in``, so clock
  skew between client and server does not matter. One login at a time (a lock).
- **401**: the cached token is dropped, the client logs in again and retries the call once, with
  the same idempotency key; a second 401 is an :class:`AuthenticationError`.
- **Idempotency**: every mutating call carries ``X-Idempotency-Key``: the caller's key, or a
  fresh one per logical call; every retry and the re-login retry reuse it, so the server applies
  the call at most once. Calls that are idempotent by nature (``natural=True``: renewing a lease,
  releasing or cancelling a request — repeating them changes nothing more) get a key only when
  the caller gives one: a heartbeat then costs the server no key lookup and no stored answer.
- **Connections** are kept alive and sent with ``TCP_NODELAY``: httpcore writes a request's
  headers and body separately, and Nagle's algorithm would hold the body back until the
  server acknowledged the headers.
- **Retries**: 408, 429, 502, 503, 504 and connection errors/timeouts are retried with
  exponential backoff and jitter (a random delay between half and all of ``backoff * 2**n``;
  ``Retry-After`` is honoured up to the cap), at most
  ``RetryPolicy.attempts`` attempts in all; then a 503/connection failure is a
  ``StoreUnavailableError`` and other codes map as :mod:`.http_errors` says.

Invariant: no ``httpx`` exception leaves this module; every failure is a ``WharfError``.
"""

from __future__ import annotations

import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import ValidationError

from wharf.core.errors import InputError, StoreError, StoreUnavailableError
from wharf.resource_manager.client.http_errors import AuthenticationError, error_from_response
from wharf.resource_manager.client.models import AccessToken, LoginRequest

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
TRANSIENT_ERRORS = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
"""Connection failures worth retrying (not, say, an unsupported URL scheme)."""
REFRESH_MARGIN_SECONDS = 300.0
IDEMPOTENCY_HEADER = "X-Idempotency-Key"
JSON = "application/json"
NO_DELAY = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
Params = Mapping[str, str | int | list[str]] | None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    attempts: int = 6
    """Most attempts per call, the first included."""
    backoff_seconds: float = 0.2
    """First delay; doubled each retry (see the module docstring for the jitter)."""
    max_backoff_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_seconds < 0 or self.max_backoff_seconds < 0:
            raise InputError("A retry policy needs at least one attempt and no negative delay.")

    def delay(self, retry: int, retry_after: str | None) -> float:
        cap = min(self.max_backoff_seconds, self.backoff_seconds * 2**retry)
        if retry_after is not None:
            try:
                return min(self.max_backoff_seconds, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return random.uniform(cap / 2, cap)


class Transport:
    def __init__(
        self,
        url: str,
        login: LoginRequest,
        *,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise InputError(
                f"A Resource Manager URL must start with http:// or https://: {url!r}."
            )
        self.url = url.rstrip("/")
        self._login_body = login.model_dump_json(exclude_none=True).encode()
        self._retry = retry or RetryPolicy()
        try:
            self._http = http or httpx.Client(
                base_url=self.url,
                timeout=timeout,
                transport=httpx.HTTPTransport(socket_options=NO_DELAY),
            )
        except httpx.InvalidURL as exc:
            raise InputError(f"Invalid Resource Manager URL {url!r}: {exc}") from None
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._token: str | None = None
        self._refresh_at = 0.0

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------------- calls

    def call(
        self,
        method: str,
        path: str,
        *,
        content: bytes | None = None,
        params: Params = None,
        idempotency_key: str | None = None,
        natural: bool = False,
    ) -> bytes | None:
        """Send one logical call (``content``: a JSON body); the answer's JSON, None for 204.

        ``natural``: the call is idempotent by nature, so it needs a key only if the caller
        gave one."""
        headers: dict[str, str] = {}
        if content is not None:
            headers["Content-Type"] = JSON
        if idempotency_key is not None:
            headers[IDEMPOTENCY_HEADER] = idempotency_key
        elif method != "GET" and not natural:
            headers[IDEMPOTENCY_HEADER] = uuid.uuid4().hex
        token = self._access_token()
        response = self._send(method, path, content, params, {**headers, **_bearer(token)})
        if response.status_code == 401:
            token = self._access_token(stale=token)
            response = self._send(method, path, content, params, {**headers, **_bearer(token)})
        return _result(response)

    def _send(
        self,
        method: str,
        path: str,
        content: bytes | None,
        params: Params,
        headers: dict[str, str],
    ) -> httpx.Response:
        """One attempt per loop, retrying transient failures; the last response."""
        attempts = self._retry.attempts
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                response = self._http.request(
                    method, path, content=content, params=params, headers=headers
                )
            except httpx.TransportError as exc:
                if last or not isinstance(exc, TRANSIENT_ERRORS):
                    raise StoreUnavailableError(
                        f"The Resource Manager at {self.url} is unreachable: "
                        f"{type(exc).__name__}: {exc}"
                    ) from None
                self._sleep(self._retry.delay(attempt, None))
                continue
            except httpx.HTTPError as exc:  # e.g. an undecodable answer: not worth a retry
                raise StoreError(f"HTTP error talking to the Resource Manager: {exc}") from None
            if response.status_code not in RETRY_STATUSES or last:
                return response
            self._sleep(self._retry.delay(attempt, response.headers.get("retry-after")))
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------------- tokens

    def _access_token(self, stale: str | None = None) -> str:
        """The cached token, or a new one if it is due for refresh or is ``stale`` (refused)."""
        with self._lock:
            token = self._token
            if token is not None and token != stale and self._clock() < self._refresh_at:
                return token
            return self._login()

    def _login(self) -> str:
        started = self._clock()
        headers = {"Content-Type": JSON}
        response = self._send("POST", "/v1/auth/login", self._login_body, None, headers)
        if response.status_code == 401:
            detail = error_from_response(401, _json(response), response.text)
            raise AuthenticationError(f"Resource Manager login failed: {detail}")
        try:
            issued = AccessToken.model_validate_json(_result(response) or b"")
        except ValidationError:
            raise StoreError(
                "The Resource Manager's login answer is not an access token."
            ) from None
        margin = min(REFRESH_MARGIN_SECONDS, issued.expires_in / 2)
        self._token = issued.access_token
        self._refresh_at = started + issued.expires_in - margin
        return issued.access_token


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _result(response: httpx.Response) -> bytes | None:
    if response.status_code >= 400:
        raise error_from_response(response.status_code, _json(response), response.text)
    if response.status_code == 204 or not response.content:
        return None
    return response.content
