"""The HTTP transport under :class:`~wharf.resource_manager.client.http.HttpResourceManager`:
login and token caching, idempotency keys, retries and error mapping, above one
:mod:`.http_wire` wire per transport.

Owns: :class:`RetryPolicy`, :class:`Transport`.

Invariants: no ``httpx``/``httpcore`` exception leaves this module, every failure is a
``WharfError``; a mutating call is applied by the server at most once (every retry of it,
the re-login retry included, carries the same ``X-Idempotency-Key``); a forked child never
waits for the login lock a parent thread held at the fork (it gets a fresh one).
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from pydantic import ValidationError

from wharf.core.errors import InputError, StoreError, StoreUnavailableError
from wharf.core.ids import new_id
from wharf.core.server_urls import check_base_url
from wharf.core.url_credentials import mask_credentials
from wharf.resource_manager.client.http_wire import Answer, AttemptError, Headers, open_wire
from wharf.resource_manager.contract.errors import AuthenticationError
from wharf.resource_manager.contract.http_errors import error_from_response
from wharf.resource_manager.contract.models import AccessToken, LoginRequest

RETRY_STATUSES = frozenset({408, 429, 502, 503, 504})
GATEWAY_STATUSES = frozenset({502, 504})
"""A proxy in front of an RM that is not answering: raised as an outage once retries are spent."""
REFRESH_MARGIN_SECONDS = 300.0
IDEMPOTENCY_HEADER = b"X-Idempotency-Key"
JSON_BODY: Headers = [(b"Content-Type", b"application/json")]
Params = Mapping[str, str | int | list[str]] | None


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a call is retried: 408, 429, 502, 503, 504 and connection errors or timeouts, with
    exponential backoff and jitter, at most ``attempts`` attempts in all."""

    attempts: int = 6
    """Most attempts per call, the first included."""
    backoff_seconds: float = 0.2
    """First delay; doubled each retry (see :meth:`delay` for the jitter)."""
    max_backoff_seconds: float = 10.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.backoff_seconds < 0 or self.max_backoff_seconds < 0:
            raise InputError("A retry policy needs at least one attempt and no negative delay.")

    def delay(self, retry: int, retry_after: str | None) -> float:
        """The wait before retry number ``retry``: ``Retry-After`` if given (up to the cap),
        else a random delay between half and all of ``backoff * 2**retry`` (capped)."""
        cap = min(self.max_backoff_seconds, self.backoff_seconds * 2**retry)
        if retry_after is not None:
            try:
                return min(self.max_backoff_seconds, max(0.0, float(retry_after)))
            except ValueError:
                pass
        return random.uniform(cap / 2, cap)


class Transport:
    """Sends the client's calls to one RM (modelled on the reference RM client, zenml_spec §7.2).

    - Login: ``POST /v1/auth/login`` with the API key (or username and password); the token is
      cached until five minutes before it expires (half its lifetime for shorter tokens),
      measured on this process's monotonic clock from ``expires_in``, so clock skew does not
      matter. The hot path reads the cached token without the lock (a reference read) and
      takes the lock only to log in, one login at a time.
    - 401: the token is dropped, the client logs in again and retries the call once with the
      same idempotency key; a second 401 is an :class:`AuthenticationError`.
    - Idempotency: every mutating call carries ``X-Idempotency-Key``, the caller's or a fresh
      one per logical call. Calls idempotent by nature (``natural=True``: renew, release,
      cancel) get one only from the caller, so a heartbeat costs the server no key lookup.
    - Retries (:class:`RetryPolicy`): once they are spent, a 503, a gateway's 502 or 504 or a
      connection failure is a ``StoreUnavailableError`` (an outage, which the engine's wait and
      heartbeat paths wait out); other codes map as
      :mod:`wharf.resource_manager.contract.http_errors` says.
    """

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
                "A Resource Manager URL must start with http:// or https://: "
                f"{mask_credentials(url)!r}."
            )
        check_base_url(url, "Resource Manager")
        self.url = url.rstrip("/")
        self._shown = mask_credentials(self.url)  # in messages: no ?token= value
        self._login_body = login.model_dump_json(exclude_none=True).encode()
        self._retry = retry or RetryPolicy()
        self._wire = open_wire(self.url, timeout, http)
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._auth: _Auth | None = None
        """Replaced as one reference, so a lock-free reader never mixes two logins."""
        _LIVE_TRANSPORTS.add(self)

    def forget_inherited_lock(self) -> None:
        """In a forked child: a fresh login lock. The parent's may be held by one of its
        threads (logging in at the fork), which the child does not have: it would never be
        released there. The child then logs in itself if it has no token."""
        self._lock = threading.Lock()

    def close(self) -> None:
        self._wire.close()

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
        headers: Headers = [] if content is None else JSON_BODY
        if idempotency_key is not None:
            headers = [*headers, (IDEMPOTENCY_HEADER, idempotency_key.encode())]
        elif method != "GET" and not natural:
            headers = [*headers, (IDEMPOTENCY_HEADER, new_id().hex.encode())]
        target = path if not params else f"{path}?{urlencode(params, doseq=True)}"
        token, bearer = self._access_token()
        answer = self._send(method, target, content, headers + bearer)
        if answer.status == 401:
            token, bearer = self._access_token(stale=token)
            answer = self._send(method, target, content, headers + bearer)
        return self._result(answer)

    def _result(self, answer: Answer) -> bytes | None:
        """``answer``'s JSON (None for 204), or its error; a gateway's 502 or 504 (a proxy
        whose RM is down) is an outage, for a login as for any call."""
        if answer.status in GATEWAY_STATUSES:
            raise StoreUnavailableError(
                f"The Resource Manager at {self._shown} is unavailable: HTTP {answer.status} "
                f"from a gateway ({_text(answer.body).strip()[:200] or 'no detail'})"
            )
        return _result(answer)

    def _send(self, method: str, target: str, content: bytes | None, headers: Headers) -> Answer:
        """One attempt per loop, retrying transient failures; the last answer."""
        attempts = self._retry.attempts
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                answer = self._wire.send(method, target, content, headers, not last)
            except AttemptError as exc:
                if last or not exc.transient:
                    raise StoreUnavailableError(
                        f"The Resource Manager at {self._shown} is unreachable: {exc}"
                    ) from None
                self._sleep(self._retry.delay(attempt, None))
                continue
            if last or answer.status not in RETRY_STATUSES:
                return answer
            self._sleep(self._retry.delay(attempt, answer.retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    # ------------------------------------------------------------------------- tokens

    def _access_token(self, stale: str | None = None) -> tuple[str, Headers]:
        """The cached token and its header, or new ones if due for refresh or ``stale``
        (refused)."""
        auth = self._auth
        if auth is not None and auth.token != stale and self._clock() < auth.refresh_at:
            return auth.token, auth.header
        with self._lock:
            auth = self._auth
            if auth is None or auth.token == stale or self._clock() >= auth.refresh_at:
                auth = self._auth = self._login()
            return auth.token, auth.header

    def _login(self) -> _Auth:
        started = self._clock()
        answer = self._send("POST", "/v1/auth/login", self._login_body, JSON_BODY)
        if answer.status == 401:
            detail = error_from_response(401, _json(answer.body), _text(answer.body))
            raise AuthenticationError(f"Resource Manager login failed: {detail}")
        try:
            issued = AccessToken.model_validate_json(self._result(answer) or b"")
        except ValidationError:
            raise StoreError(
                "The Resource Manager's login answer is not an access token."
            ) from None
        margin = min(REFRESH_MARGIN_SECONDS, issued.expires_in / 2)
        token = issued.access_token
        header = [(b"Authorization", f"Bearer {token}".encode())]
        return _Auth(token, started + issued.expires_in - margin, header)


_LIVE_TRANSPORTS: weakref.WeakSet[Transport] = weakref.WeakSet()


def _forget_inherited_locks() -> None:
    for transport in list(_LIVE_TRANSPORTS):
        transport.forget_inherited_lock()


os.register_at_fork(after_in_child=_forget_inherited_locks)


@dataclass(frozen=True, slots=True)
class _Auth:
    token: str
    refresh_at: float
    """On the transport's clock."""
    header: Headers


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except ValueError:
        return None


def _text(body: bytes) -> str:
    return body.decode("utf-8", errors="replace")


def _result(answer: Answer) -> bytes | None:
    if answer.status >= 400:
        raise error_from_response(answer.status, _json(answer.body), _text(answer.body))
    if answer.status == 204 or not answer.body:
        return None
    return answer.body
