"""Read-only queries on requests: get, filtered and paged lists, the allocations held in a pool.

Owns these SELECTs. They run in read transactions (deferred ``BEGIN`` on SQLite), never take the
scheduling lock and never touch the scheduling cache: readers always see committed rows.

Paging invariant: rows are ordered by ``created_at`` then ``id`` in the requested direction, so
pages never overlap or skip rows; ``total`` is one ``COUNT`` over the same filter.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, exists, func, select

from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.models import (
    Page,
    PageRequest,
    PoolAllocation,
    RequestFilter,
    ResourceRequestInfo,
)
from wharf.resource_manager.service import codec, config_store, request_store
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.convert import request_info
from wharf.sql import exact


def not_found(request_id: UUID) -> str:
    """The one answer for a request that does not exist or that the caller may not see."""
    return f"Resource request {request_id} not found."


def get_request(conn: Connection, request_id: UUID) -> ResourceRequestInfo:
    loaded = request_store.load(conn, [request_id]).get(request_id)
    if loaded is None:
        raise EntityNotFoundError(not_found(request_id))
    return request_info(loaded)


def _conditions(conn: Connection, query: RequestFilter) -> list[ColumnElement[bool]] | None:
    """The WHERE clauses of ``query``; None when it can match nothing (unknown pool)."""
    c = t.requests.c
    conditions: list[ColumnElement[bool]] = []
    if query.status is not None:
        # Given ids, their primary-key lookups are the selective part; a plain status term lets
        # SQLite's planner (without statistics unless ANALYZE ran) read every request of those
        # statuses through the status index instead, history included: a wait room's lookup
        # of its waiters (ids, all statuses but pending) grew with the table. As an expression
        # the status term cannot pick an index, so the ids do.
        status = c.status if query.ids is None else c.status.concat("")
        conditions.append(status.in_([value.value for value in query.status]))
    if query.requester is not None:
        conditions.append(exact.equals(c.requester, query.requester))
    if query.ids is not None:
        conditions.append(c.id.in_(query.ids))
    if query.pool is not None:
        pool = config_store.find_pool(conn, query.pool)
        if pool is None:
            return None
        conditions.append(c.pool_id == pool.id)
    if query.subject_id is not None or query.subject_type is not None:
        s = t.subjects.c
        subject = [s.request_id == c.id]
        if query.subject_id is not None:
            subject.append(exact.equals(s.subject_id, query.subject_id))
        if query.subject_type is not None:
            subject.append(s.subject_type == query.subject_type.value)
        conditions.append(exists(select(s.request_id).where(*subject)))
    m = t.request_metadata.c
    for key, value in sorted(query.metadata.items()):
        conditions.append(
            exists(
                select(m.request_id).where(
                    m.request_id == c.id, exact.equals(m.key, key), exact.equals(m.value, value)
                )
            )
        )
    return conditions


def list_requests(
    conn: Connection, query: RequestFilter, page: PageRequest
) -> Page[ResourceRequestInfo]:
    conditions = _conditions(conn, query)
    if conditions is None:
        return Page(items=[], index=page.index, size=page.size, total=0)
    c = t.requests.c
    total = int(
        conn.execute(select(func.count()).select_from(t.requests).where(*conditions)).scalar_one()
    )
    order: list[Any] = (
        [c.created_at.asc(), c.id.asc()]
        if page.sort == "asc"
        else [c.created_at.desc(), c.id.desc()]
    )
    statement = (
        select(c.id)
        .where(*conditions)
        .order_by(*order)
        .limit(page.size)
        .offset((page.index - 1) * page.size)
    )
    ids = list(conn.execute(statement).scalars())
    loaded = request_store.load(conn, ids)
    items = [request_info(loaded[key]) for key in ids if key in loaded]
    return Page(items=items, index=page.index, size=page.size, total=total)


def pool_allocations(conn: Connection, pool: str | UUID) -> list[PoolAllocation]:
    found = config_store.find_pool(conn, pool)
    if found is None:
        raise config_store.pool_not_found(conn, pool)
    r, m = t.requests.c, t.request_metadata.c
    holding = (r.pool_id == found.id, r.status.in_(request_store.HOLDING))
    statement = (
        select(r.id, r.allocations, r.status, r.requester, r.allocated_at)
        .where(*holding)
        .order_by(r.allocated_at, r.id)
    )
    # Each request's metadata: whom a workspace server asked for (``user``), beside its own
    # principal (the requester).
    metadata: dict[UUID, dict[str, str]] = {}
    labels = select(m.request_id, m.key, m.value).join(t.requests, r.id == m.request_id)
    for label in conn.execute(labels.where(*holding)):
        metadata.setdefault(label.request_id, {})[label.key] = label.value
    return [
        PoolAllocation(
            **dict(allocation),
            request_status=row.status,
            requester=row.requester,
            metadata=metadata.get(row.id, {}),
            allocated_at=row.allocated_at,
        )
        for row in conn.execute(statement)
        for allocation in codec.allocations_from_entries(row.id, row.allocations)
    ]
