"""A short-lived, per-process cache of authenticated credentials.

Checking a credential costs one or two database reads; a running step sends a heartbeat every
few seconds with the same run token, so the server remembers what an API key or a run token
resolved to for ``settings.auth_cache_seconds`` (default 5 s; 0 turns the cache off). Users'
access tokens are not cached (see ``authenticate``).

Invariants:
- Only successful authentications are cached; a refused credential is checked again each time.
- Every change made through this server that can revoke or demote a credential (logout, user or
  service account deactivation, key revocation, admin flag) clears this process's cache, so it
  takes effect at once here; other worker processes and replicas see it within the TTL (for
  API keys and run tokens; users' own access tokens are never cached).
- Expiry of signed tokens is still checked on every request (the cache keeps the token's
  ``exp``), so an expired token is never served from the cache.
"""

from __future__ import annotations

import threading
import time
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
    def __init__(self, ttl_seconds: float) -> None:
        self.ttl = ttl_seconds
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()

    def get(self, credential: str, now: float) -> Principal | None:
        if self.ttl <= 0:
            return None
        entry = self._entries.get(credential)
        if entry is None:
            return None
        if time.monotonic() >= entry.valid_until or (
            entry.expires_at is not None and now >= entry.expires_at
        ):
            self._entries.pop(credential, None)
            return None
        return entry.principal

    def put(self, credential: str, principal: Principal, expires_at: float | None) -> None:
        if self.ttl <= 0:
            return
        entry = _Entry(principal, time.monotonic() + self.ttl, expires_at)
        with self._lock:
            if len(self._entries) >= MAX_ENTRIES:
                self._entries.clear()
            self._entries[credential] = entry

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
