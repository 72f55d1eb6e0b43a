"""Questions answered by running the scheduler without deciding anything: explain, pool queues.

Owns :func:`explain_request`, :func:`pool_queue`, :func:`queue_lengths`. Each gives the pure
scheduler the committed state (the cache's published view brought up to the database's state
version, plus the leases that lapsed but are not expired yet) in a *read* transaction and only
looks at its decisions: the answer is what the next cycle would do with the state as it is now.

Invariants: read-only (no statement here writes or locks rows, so these calls never delay
admissions or renewals); the scheduling cache is only read through its immutable view, never
adopted; the scheduler gets its own configuration index (the combiner's
:class:`~wharf.resource_manager.scheduler.Prepared` is not shared between threads).
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from sqlalchemy import Connection

from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.models import ExplanationInfo, QueueEntry
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.scheduler import SchedulerOptions, Snapshot, explain, schedule
from wharf.resource_manager.service import leader, request_store
from wharf.resource_manager.service.config_store import find_pool, pool_not_found
from wharf.resource_manager.service.convert import explanation_info, request_info
from wharf.resource_manager.service.state import CacheView, Working, open_working


def _committed(conn: Connection, view: CacheView, now: datetime) -> tuple[Working, Snapshot, int]:
    """The committed state as a snapshot (lapsed leases included), and its state version."""
    row = leader.read(conn)
    work = open_working(conn, view, row)
    requests: dict[UUID, ResourceRequest] = dict(work.requests)
    for lapsed in request_store.lapsed(conn, now, lock=False):
        known = requests.get(lapsed.id)
        if known is not None:  # the scheduler's phase 1 expires it in this what-if cycle
            requests[lapsed.id] = known.model_copy(
                update={
                    "lease_expires_at": lapsed.lease_expires_at,
                    "allocation_deadline": lapsed.allocation_deadline,
                }
            )
    config = work.config
    snapshot = Snapshot(config.descriptors, config.pools, config.policies, tuple(requests.values()))
    return work, snapshot, row.state_version


def explain_request(
    conn: Connection, view: CacheView, request_id: UUID, now: datetime, budget: int
) -> ExplanationInfo:
    work, snapshot, _ = _committed(conn, view, now)
    if request_id not in work.requests:
        loaded = request_store.load(conn, [request_id]).get(request_id)
        if loaded is None:
            raise EntityNotFoundError(f"Resource request {request_id} not found.")
        info = request_info(loaded)
        return ExplanationInfo(
            request_id=info.id,
            status=info.status,
            outcome="not_pending",
            reason=info.status_reason or f"The request is {info.status.value}.",
        )
    options = SchedulerOptions(route_search_budget=budget)
    return explanation_info(explain(snapshot, request_id, now, options))


def pool_queue(
    conn: Connection, view: CacheView, pool: str | UUID, now: datetime, budget: int
) -> list[QueueEntry]:
    found = find_pool(conn, pool)
    if found is None:
        raise pool_not_found(conn, pool)
    work, snapshot, version = _committed(conn, view, now)
    decisions = schedule(snapshot, now, SchedulerOptions(route_search_budget=budget))
    waits = sorted(
        (w for w in decisions.waits if w.pool_id == found.id),
        key=lambda w: (w.position or 0, w.request_id.int),
    )
    ids = [w.request_id for w in waits]
    loaded = request_store.current(conn, ids, work.requests, version)
    return [
        QueueEntry(
            position=w.position or 0, reason=w.reason, request=request_info(loaded[w.request_id])
        )
        for w in waits
        if w.request_id in loaded
    ]


def queue_lengths(conn: Connection, view: CacheView, now: datetime, budget: int) -> dict[UUID, int]:
    """Pool id -> number of requests the next cycle would leave waiting there (one cycle)."""
    _, snapshot, _ = _committed(conn, view, now)
    decisions = schedule(snapshot, now, SchedulerOptions(route_search_budget=budget))
    lengths: dict[UUID, int] = {}
    for wait in decisions.waits:
        if wait.pool_id is not None:
            lengths[wait.pool_id] = lengths.get(wait.pool_id, 0) + 1
    return lengths
