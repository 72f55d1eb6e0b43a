"""The per-process scheduling cache, and the working copy one transaction schedules from.

Owns: :class:`SchedulingCache`, :class:`Working`, :func:`open_working`.

Reloading every live request for every cycle would cost more than the cycle itself, so each
process keeps the configuration and its live requests in memory and refreshes them
incrementally, *inside* the scheduling transaction (under the scheduling lock):

- the configuration is reloaded when ``rm_state.config_version`` differs from the cached one;
- requests whose ``seq`` is above the cached ``state_version`` are reloaded (or dropped when
  terminal); everything else is known to be unchanged, because every scheduler-relevant write
  (creation, status, allocations) happens under the lock and stamps ``seq`` with the version it
  publishes in the same commit;
- a cold cache, or a version that went backwards (the database was replaced), loads everything.

Invariants:
- cached requests are *neutral* (no lease fields, see :func:`codec.neutral`): renewals change
  leases without the lock, so the cache never pretends to know them; lapses are found with SQL
  (``rm_requests.lapse_at``) at the start of each cycle instead;
- a :class:`Working` copy is adopted by the cache only after its transaction committed; a
  rollback leaves the cache as it was (or invalidated, when a compare-and-set found it stale).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from sqlalchemy import Connection

from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.service import request_store
from wharf.resource_manager.service.codec import neutral
from wharf.resource_manager.service.config_store import Configuration, load_configuration
from wharf.resource_manager.service.leader import StateRow


@dataclass(slots=True)
class SchedulingCache:
    """What this process knows; only touched while holding the service's batch lock."""

    config_version: int | None = None
    state_version: int | None = None
    config: Configuration | None = None
    requests: dict[UUID, ResourceRequest] = field(default_factory=dict)
    requesters: dict[UUID, str] = field(default_factory=dict)
    """Requester of every cached request (ownership checks need no query)."""

    def invalidate(self) -> None:
        self.config_version = None
        self.state_version = None
        self.config = None
        self.requests = {}
        self.requesters = {}

    def adopt(self, working: Working, state_version: int, config_version: int) -> None:
        self.requests = working.requests
        self.requesters = working.requesters
        self.state_version = state_version
        if working.config_dirty:
            self.config, self.config_version = None, None
        else:
            self.config, self.config_version = working.config, config_version


@dataclass(slots=True)
class Working:
    """The state one transaction schedules from, changed in place as the batch proceeds."""

    config: Configuration
    requests: dict[UUID, ResourceRequest]
    """Live requests (pending, allocated, preempting), neutral."""
    requesters: dict[UUID, str]
    """Requester of each request in :attr:`requests`."""
    config_dirty: bool = False
    """A configuration write happened in this transaction: reload before the next use."""

    def configuration(self, conn: Connection) -> Configuration:
        if self.config_dirty:
            self.config = load_configuration(conn)
            self.config_dirty = False
        return self.config


def open_working(conn: Connection, cache: SchedulingCache, row: StateRow) -> Working:
    """Bring the cache's view up to ``row``'s versions, as a copy this transaction may change."""
    if cache.config is not None and cache.config_version == row.config_version:
        config = cache.config
    else:
        config = load_configuration(conn)
    known = cache.state_version
    if known is None or known > row.state_version:
        loaded = request_store.load_live(conn)
        requests = {key: neutral(item.request) for key, item in loaded.items()}
        requesters = {key: item.requester for key, item in loaded.items()}
        return Working(config=config, requests=requests, requesters=requesters)
    requests = dict(cache.requests)
    requesters = dict(cache.requesters)
    if known < row.state_version:
        changed = request_store.changed_since(conn, known)
        live = [key for key, status in changed if status in request_store.LIVE]
        for key, _ in changed:
            requests.pop(key, None)
            requesters.pop(key, None)
        for key, item in request_store.load(conn, live).items():
            requests[key] = neutral(item.request)
            requesters[key] = item.requester
    return Working(config=config, requests=requests, requesters=requesters)
