"""Login throttling: how many failed logins an account and a client address may make before
further attempts are refused for a while, for the password and API-key logins of both HTTP
services (the workspace server and the Resource Manager).

Owns :class:`LoginLimits`, :class:`LoginThrottle` and :class:`Refused`.

Invariants: memory is bounded whatever callers send (``max_entries`` keys per table, stored as
fixed-size digests); a refused attempt is never verified; the state is per process (N workers
or replicas allow up to N times the attempts, acceptable for limits meant to stop bursts); the
time is passed in by the caller, and the throttle is thread-safe.
"""

from __future__ import annotations

import hashlib
import math
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field


class LoginLimits(BaseModel):
    """How many failed logins are allowed per window, per account and per client address."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_failures_per_account: int = Field(default=10, ge=1)
    """Failed logins for one account within a window before its logins are refused (429)."""
    max_failures_per_address: int = Field(default=50, ge=1)
    """Failed logins from one client address within a window before its logins are refused."""
    window_seconds: float = Field(default=300.0, gt=0)
    """How long a window lasts from its first failure (and so the longest refusal)."""
    max_entries: int = Field(default=10_000, ge=1)
    """Most accounts (and, separately, addresses) remembered at once."""


@dataclass(frozen=True)
class Refused:
    """A login refused without being checked: too many failures for ``key``."""

    scope: str
    """``"account"`` or ``"address"``: which limit was reached."""
    retry_after: int
    """Whole seconds until the window closes (at least 1)."""


@dataclass
class _Entry:
    opened: float
    failures: int = 0
    pending: int = 0
    """Attempts being verified now."""


class _Table:
    """Failure windows per key, at most ``max_entries`` of them.

    An entry counts failures in a window that opens at its first failure and lasts ``window``;
    once the count reaches ``limit``, the key is refused until the window closes, then starts
    afresh. Once a window holds a failure, the attempts being verified count too (so a burst
    of guesses cannot slip past the limit), and an attempt refused only for those is told to
    retry in a second. When a new key does not fit, closed windows are dropped, then the entry
    that failed least recently.
    """

    def __init__(self, limit: int, window: float, max_entries: int) -> None:
        self._limit = limit
        self._window = window
        self._max = max_entries
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()  # least recently failed first

    def __len__(self) -> int:
        return len(self._entries)

    def refused_for(self, key: bytes, now: float) -> float | None:
        """Seconds until ``key`` may try again, or None if it may now."""
        entry = self._current(key, now)
        if entry is None or entry.failures == 0:
            return None
        if entry.failures >= self._limit:
            return entry.opened + self._window - now
        return 1.0 if entry.failures + entry.pending >= self._limit else None

    def begin(self, key: bytes, now: float) -> None:
        self._entry(key, now).pending += 1

    def fail(self, key: bytes, now: float) -> None:
        entry = self._entry(key, now)
        entry.pending = max(0, entry.pending - 1)
        if entry.failures == 0:
            entry.opened = now
        entry.failures += 1
        self._entries.move_to_end(key)

    def settle(self, key: bytes, *, forgive: bool = False) -> None:
        """An attempt of ``key`` ended without failing; ``forgive``: its failures are forgotten."""
        entry = self._entries.get(key)
        if entry is None:
            return
        entry.pending = max(0, entry.pending - 1)
        if forgive:
            entry.failures = 0
        if entry.failures == 0 and entry.pending == 0:
            del self._entries[key]

    def _entry(self, key: bytes, now: float) -> _Entry:
        entry = self._current(key, now)
        if entry is None:
            self._make_room(now)
            entry = self._entries[key] = _Entry(now)
        return entry

    def _current(self, key: bytes, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is not None and entry.failures and now >= entry.opened + self._window:
            if not entry.pending:
                del self._entries[key]
                return None
            entry.failures = 0  # its window closed; attempts still being verified count on
        return entry

    def _make_room(self, now: float) -> None:
        if len(self._entries) < self._max:
            return
        closed = [
            k for k, e in self._entries.items() if e.failures and now >= e.opened + self._window
        ]
        for key in closed:
            del self._entries[key]
        while len(self._entries) >= self._max:
            self._entries.popitem(last=False)


def _key(value: str) -> bytes:
    """A fixed-size key; equivalent Unicode spellings of a name are one key (as in the store)."""
    normal = unicodedata.normalize("NFC", value)
    return hashlib.blake2b(normal.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class LoginThrottle:
    """Per-account and per-address failed-login limits: two tables (:class:`_Table`), one keyed
    by account name, one by client address (keys are NFC-normalised digests, so a long name
    costs no more than a short one).

    Trade-off, accepted: anyone can lock an account for one window by failing on purpose; the
    address limit bounds how many accounts one address can lock.
    """

    def __init__(self, limits: LoginLimits | None = None) -> None:
        self.limits = limits = limits or LoginLimits()
        window, size = limits.window_seconds, limits.max_entries
        self._accounts = _Table(limits.max_failures_per_account, window, size)
        self._addresses = _Table(limits.max_failures_per_address, window, size)
        self._lock = threading.Lock()

    def attempt(self, account: str | None, address: str | None, now: float) -> Refused | None:
        """A login for ``account`` from ``address`` (either unknown: None) is about to be
        verified: a :class:`Refused` if a limit was reached (nothing counted), else None, and
        the caller then says how it ended: :meth:`succeeded`, :meth:`failed` or
        :meth:`abandoned`. A refused attempt must not be verified at all (no argon2 work, so
        no answer about the password).

        Right passwords never count: any number of them may be verified at once. Once a
        window holds a failure, attempts still being verified count against the limit too,
        so concurrent guesses stop at it; before the first failure is known, one burst of
        concurrent guesses (as many as the server verifies at once) may pass it.
        """
        with self._lock:
            waits = []
            if address is not None:
                wait = self._addresses.refused_for(_key(address), now)
                if wait is not None:
                    waits.append(("address", wait))
            if account is not None:
                wait = self._accounts.refused_for(_key(account), now)
                if wait is not None:
                    waits.append(("account", wait))
            if not waits:
                if address is not None:
                    self._addresses.begin(_key(address), now)
                if account is not None:
                    self._accounts.begin(_key(account), now)
                return None
        scope, wait = max(waits, key=lambda item: item[1])
        return Refused(scope, max(1, math.ceil(wait)))

    def failed(self, account: str | None, address: str | None, now: float) -> None:
        """The attempt was refused (a wrong password or key): it counts for both."""
        with self._lock:
            if address is not None:
                self._addresses.fail(_key(address), now)
            if account is not None:
                self._accounts.fail(_key(account), now)

    def succeeded(self, account: str | None, address: str | None) -> None:
        """The attempt succeeded: the account's failures are forgotten, not the address's (one
        valid account must not reset what guesses at other accounts built up)."""
        with self._lock:
            if account is not None:
                self._accounts.settle(_key(account), forgive=True)
            if address is not None:
                self._addresses.settle(_key(address))

    def abandoned(self, account: str | None, address: str | None) -> None:
        """The attempt could not be verified (e.g. the store did not answer): it counts for
        neither."""
        with self._lock:
            if account is not None:
                self._accounts.settle(_key(account))
            if address is not None:
                self._addresses.settle(_key(address))

    def sizes(self) -> tuple[int, int]:
        """How many accounts and addresses are remembered (for tests and metrics)."""
        with self._lock:
            return len(self._accounts), len(self._addresses)
