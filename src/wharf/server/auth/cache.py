"""A short-lived, per-process cache of authenticated credentials (:class:`AuthCache`): what an API
key or a run token resolved to, kept for ``settings.auth_cache_seconds`` (0 turns it off); users'
access tokens are not cached (see ``authenticate``).

Invariants: only successful authentications are cached; an entry is dropped once its time has
passed on this process's monotonic clock, and a token past its own expiry is never served; a
check under way when the cache was cleared is not cached (its caller passes the ``generation`` it
started at), so a revocation through this process cannot be undone by a concurrent request.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from wharf.server.auth.principal import Principal

MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class _Entry:
    principal: Principal
    valid_until: float
    """Monotonic time after which the credential is checked again."""
    expires_at: float | None
    """The token's own expiry (epoch seconds, token clock); None for API keys."""


class AuthCache:
    """Credentials mapped to the principal they resolved to, for ``ttl_seconds``.

    Checking a credential costs one or two database reads, and a running step sends a heartbeat
    every few seconds with the same run token. Revocation semantics (pinned down by
    ``tests/server/test_auth_cache.py``):
    - through the same worker process: immediate. Every change made through this server that
      can revoke or demote a credential (logout, user or service account deactivation, key
      revocation, admin flag, a project membership removed or changed) clears this process's
      cache;
    - through another worker process, another replica, or straight in the database: an API key,
      or a run token issued through it or to a service account, stays accepted by a worker that
      checked it recently for at most ``ttl_seconds`` more. A user's own access token is never
      cached, so logging out is immediate everywhere (a run token issued to a user follows the
      API-key rule);
    - the expiry of signed tokens is checked on every request (the cache keeps the token's
      ``exp``), so an expired token is never served from the cache.
    """

    def __init__(self, ttl_seconds: float, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl_seconds
        self._monotonic = monotonic
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self.generation = 0
        """Incremented by every :meth:`clear`."""

    def get(self, credential: str, now: float) -> Principal | None:
        if self.ttl <= 0:
            return None
        entry = self._entries.get(credential)
        if entry is None:
            return None
        if self._monotonic() >= entry.valid_until or (
            entry.expires_at is not None and now >= entry.expires_at
        ):
            self._entries.pop(credential, None)
            return None
        return entry.principal

    def put(
        self, credential: str, principal: Principal, expires_at: float | None, generation: int
    ) -> None:
        """Remember a credential checked since ``generation`` was read (else ignored)."""
        if self.ttl <= 0:
            return
        entry = _Entry(principal, self._monotonic() + self.ttl, expires_at)
        with self._lock:
            if generation != self.generation:
                return
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[credential] = entry

    def clear(self) -> None:
        with self._lock:
            self.generation += 1
            self._entries.clear()
