"""The per-process scheduling cache, and the working copy one transaction schedules from.

Owns :class:`SchedulingCache` (see it for the incremental refresh), :class:`CacheView`,
:class:`Working`, :func:`open_working`.

Invariants:
- cached requests are *neutral* (no lease fields, :func:`codec.neutral`): renewals change
  leases without the lock, so lapses are found with SQL (``rm_requests.lapse_at``) each cycle;
- a :class:`Working` copy is adopted only after its transaction committed; a rollback leaves
  the cache as it was (or invalidated, when a compare-and-set found it stale);
- what the cache knows is published as one immutable :class:`CacheView` (a transaction changes
  its own copies), so readers without the batch lock (renewal answers, explain) read one state
  version and exactly its requests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from uuid import UUID

from sqlalchemy import Connection

from wharf.core.enums import ResourceRequestStatus
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.scheduler import CycleRun, Prepared
from wharf.resource_manager.service import request_store
from wharf.resource_manager.service.codec import neutral
from wharf.resource_manager.service.config_store import Configuration, load_configuration
from wharf.resource_manager.service.leader import StateRow


@dataclass(frozen=True, slots=True)
class CacheView:
    """One consistent state of the cache; replaced whole, never changed."""

    config_version: int | None = None
    state_version: int | None = None
    config: Configuration | None = None
    requests: Mapping[UUID, ResourceRequest] = field(default_factory=dict)
    """Live requests (neutral) as of ``state_version``."""
    requesters: Mapping[UUID, str] = field(default_factory=dict)
    """Requester of every cached request (ownership checks need no query)."""
    pending: Mapping[UUID, ResourceRequest] = field(default_factory=dict)
    """The pending ones among :attr:`requests`."""
    holding: Mapping[UUID, ResourceRequest] = field(default_factory=dict)
    """The allocated and preempting ones among :attr:`requests`."""


@dataclass(slots=True)
class SchedulingCache:
    """What this process knows. :attr:`view` may be read by any thread; everything else is
    only touched while holding the service's batch lock.

    The configuration and the live requests are kept in memory and refreshed incrementally
    *inside* the scheduling transaction (under the scheduling lock), which costs far less than
    reloading every live request for every cycle:

    - the configuration is reloaded when ``rm_state.config_version`` differs from the cached one;
    - requests whose ``seq`` is above the cached ``state_version`` are reloaded (or dropped when
      terminal); everything else is unchanged, because every scheduler-relevant write happens
      under the lock and stamps ``seq`` with the version it publishes in the same commit;
    - a cold cache, or a version that went backwards (the database was replaced), loads all.

    The scheduler's :class:`~wharf.resource_manager.scheduler.Prepared` index is kept with the
    configuration, so cycles do not rebuild it while the configuration is unchanged.
    """

    view: CacheView = field(default_factory=CacheView)
    prepared: Prepared | None = None
    """The scheduler's index of ``view.config`` (the combiner's alone)."""
    walk: CycleRun | None = None
    """The last cycle's run, if requests appended to its queues may continue it (built on
    :attr:`prepared`; the combiner's alone, handed to one transaction at a time, see
    :meth:`take_walk`)."""

    def invalidate(self) -> None:
        self.view = CacheView()
        self.prepared = None
        self.walk = None

    def take_walk(self) -> CycleRun | None:
        """The kept walk, for one transaction: a continuation changes it in place, so a
        transaction that rolls back must not leave it here (it gets it back on :meth:`adopt`)."""
        walk, self.walk = self.walk, None
        return walk

    def adopt(self, working: Working, state_version: int, config_version: int) -> None:
        self.walk = None if working.config_dirty else working.walk
        if working.config_dirty:
            config, version, self.prepared = None, None, None
        else:
            config, version, self.prepared = working.config, config_version, working.prepared
        self.view = CacheView(
            config_version=version,
            state_version=state_version,
            config=config,
            requests=working.requests,
            requesters=working.requesters,
            pending=working.pending,
            holding=working.holding,
        )


@dataclass(slots=True)
class Working:
    """The state one transaction schedules from, changed in place as the batch proceeds."""

    config: Configuration
    requests: dict[UUID, ResourceRequest]
    """Live requests (pending, allocated, preempting), neutral."""
    requesters: dict[UUID, str]
    """Requester of each request in :attr:`requests`."""
    pending: dict[UUID, ResourceRequest]
    holding: dict[UUID, ResourceRequest]
    """:attr:`requests` split by status, kept with it by :meth:`put` and :meth:`drop`: a cycle
    reads the queue and hands the scheduler the holders without looking at each request."""
    config_dirty: bool = False
    """A configuration write happened in this transaction: reload before the next use."""
    prepared: Prepared | None = None
    """The scheduler's index of :attr:`config`, when one was built for it."""
    walk: CycleRun | None = None
    """The last cycle's run, built on :attr:`prepared`, while the live requests changed only
    by :attr:`appended`: set by a cycle that may be continued (see
    :func:`wharf.resource_manager.scheduler.continue_cycle`), dropped by any other change
    (:meth:`changed`) and with :attr:`prepared`."""
    appended: list[ResourceRequest] = field(default_factory=list)
    """Requests created since :attr:`walk`'s cycle, in order."""

    def put(self, request: ResourceRequest, requester: str | None = None) -> None:
        """Add or replace a live request (with its requester, if new)."""
        key = request.id
        self.requests[key] = request
        if requester is not None:
            self.requesters[key] = requester
        if request.status is ResourceRequestStatus.PENDING:
            self.pending[key] = request
            self.holding.pop(key, None)
        else:
            self.holding[key] = request
            self.pending.pop(key, None)

    def drop(self, key: UUID) -> None:
        """Forget a request that ended (or is gone)."""
        self.requests.pop(key, None)
        self.requesters.pop(key, None)
        self.pending.pop(key, None)
        self.holding.pop(key, None)

    def changed(self) -> None:
        """A request changed other than by a cycle's own decisions: the next cycle is full."""
        self.walk = None

    def configuration(self, conn: Connection) -> Configuration:
        if self.config_dirty:
            self.config = load_configuration(conn)
            self.config_dirty = False
            self.prepared = None
            self.walk = None
        return self.config


def open_working(
    conn: Connection,
    view: CacheView,
    row: StateRow,
    prepared: Prepared | None = None,
    walk: CycleRun | None = None,
) -> Working:
    """Bring ``view`` up to ``row``'s versions, as a copy this transaction may change.

    ``prepared``: the scheduler index of ``view.config``, kept when that configuration is still
    current; ``walk``: the last cycle's, kept when nothing changed since ``view``."""
    if view.config is not None and view.config_version == row.config_version:
        config = view.config
    else:
        config, prepared = load_configuration(conn), None
    if prepared is None:
        walk = None  # it was built on the index that is gone
    known = view.state_version
    if known is None or known > row.state_version:
        working = Working(config, {}, {}, {}, {}, prepared=prepared)
        for item in request_store.load_live(conn).values():
            working.put(neutral(item.request), item.requester)
        return working
    working = Working(
        config,
        dict(view.requests),
        dict(view.requesters),
        dict(view.pending),
        dict(view.holding),
        prepared=prepared,
        walk=walk,
    )
    if known < row.state_version:
        working.walk = None  # another writer changed requests since
        changed = request_store.changed_since(conn, known)
        live = [key for key, status in changed if status in request_store.LIVE]
        for key, _ in changed:
            working.drop(key)
        for item in request_store.load(conn, live).values():
            working.put(neutral(item.request), item.requester)
    return working
