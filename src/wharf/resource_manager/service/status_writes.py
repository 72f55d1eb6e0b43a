"""Status writes of resource requests: every change a scheduling transaction makes to a
request's status (admissions with their allocations, endings, preemptions, wait reasons).

Owns :func:`write_transitions`.

Invariants: every write is a compare-and-set on the previous status (``WHERE status = :prev``)
and raises :class:`~.request_store.StaleStateError` when a row did not match, so a stale cache
can never write over a change it did not see; ``lapse_at`` becomes NULL when a request ends and
the lease's deadline when it is admitted; an ending also clears the runtime state and ends the
lease (:func:`~wharf.resource_manager.domain.lease_at_end`, in SQL: renewals change the lease
columns without the scheduling lock, so the cached model does not know them).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    BindParameter,
    Connection,
    Executable,
    Update,
    and_,
    bindparam,
    case,
    literal_column,
    update,
)

from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import ENDED_RUNTIME_STATE, ResourceRequest, is_terminal
from wharf.resource_manager.service import codec
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.request_store import (
    WRITTEN_COLUMNS,
    StaleStateError,
    chunks,
    first_written,
    volatile,
)
from wharf.sql.types import UtcDateTime

_C = t.requests.c
_BY_ID = and_(_C.id == bindparam("b_id"), _C.status == bindparam("b_prev"))


_ENDED: dict[str, Any] = {
    "status": bindparam("b_status"),
    "status_reason": bindparam("b_reason"),
    "released_at": bindparam("b_released_at"),
    "seq": bindparam("b_seq"),
    "lapse_at": None,
    "runtime_state": literal_column(f"'{ENDED_RUNTIME_STATE.value}'"),
    "lease_expires_at": case(
        (
            _C.lease_expires_at > bindparam("b_ended_at", type_=UtcDateTime()),
            bindparam("b_ended_at", type_=UtcDateTime()),
        ),
        else_=_C.lease_expires_at,
    ),
}
"""What an ending writes (by one id or by an id list)."""


def _ending(ids: BindParameter[Any]) -> Update:
    return (
        update(t.requests).where(_C.id.in_(ids), _C.status == bindparam("b_prev")).values(**_ENDED)
    )


_ENDING = {
    inline: _ending(bindparam("b_ids", expanding=True, literal_execute=inline))
    for inline in (False, True)
}
"""Requests that end alike (same previous and new status, reason and instant: a batch's
releases), as one statement by id list; ids are inlined on PostgreSQL for the reason
:class:`_ByIds` gives."""
_ADMIT = (
    update(t.requests)
    .where(_BY_ID)
    .values(
        status=bindparam("b_status"),
        status_reason=bindparam("b_reason"),
        allocated_at=bindparam("b_allocated_at"),
        pool_id=bindparam("b_pool_id"),
        allocations=bindparam("b_allocations"),
        seq=bindparam("b_seq"),
        lapse_at=_C.lease_expires_at,
    )
)
_OTHER = (
    update(t.requests)
    .where(_BY_ID)
    .values(
        status=bindparam("b_status"),
        status_reason=bindparam("b_reason"),
        preemption_initiated_by_id=bindparam("b_preemptor"),
        seq=bindparam("b_seq"),
    )
)


_RETURNING = {statement: statement.returning(*WRITTEN_COLUMNS) for statement in (_ADMIT, _OTHER)}
"""A lone change of its kind (an admission, a preemption ...)."""
_END_ONE = update(t.requests).where(_BY_ID).values(**_ENDED).returning(*WRITTEN_COLUMNS)
"""A lone request that ends (as :data:`_ENDING`, by one id)."""
_ENDING_RETURNING = {
    statement: statement.returning(*WRITTEN_COLUMNS) for statement in _ENDING.values()
}


def write_transitions(
    conn: Connection,
    changes: Iterable[tuple[ResourceRequest, ResourceRequest]],
    seq: int,
    now: datetime,
) -> dict[UUID, tuple[str, dict[str, Any]]]:
    """Write ``(before, after)`` request changes with compare-and-set on the previous status;
    ``now`` is when requests that end here end.

    Returns (requester, lease columns) of the rows the database handed back as written, which
    saves reading them again to answer their callers: where the database has
    ``UPDATE ... RETURNING`` (SQLite, PostgreSQL), requests that end alike are one statement
    by id list and a lone change of another kind is one statement; other changes are written
    in bulk (``executemany``) and return nothing."""
    ending: dict[tuple[Any, ...], list[UUID]] = {}
    admitted: list[dict[str, Any]] = []
    other: list[dict[str, Any]] = []
    for before, after in changes:
        if is_terminal(after.status) and not is_terminal(before.status):
            alike = (
                before.status.value,
                after.status.value,
                after.status_reason,
                after.released_at,
            )
            ending.setdefault(alike, []).append(after.id)
            continue
        params: dict[str, Any] = {
            "b_id": after.id,
            "b_prev": before.status.value,
            "b_status": after.status.value,
            "b_reason": after.status_reason,
            "b_seq": seq,
        }
        if after.status is S.ALLOCATED and before.status is S.PENDING:
            params["b_allocated_at"] = after.allocated_at
            params["b_pool_id"] = after.allocations[0].pool_id if after.allocations else None
            params["b_allocations"] = codec.allocation_entries(after.allocations)
            admitted.append(params)
        else:
            params["b_preemptor"] = after.preemption_initiated_by_id
            other.append(params)
    written: dict[UUID, tuple[str, dict[str, Any]]] = {}
    for (prev, status, reason, released_at), ids in ending.items():
        common = {
            "b_prev": prev,
            "b_status": status,
            "b_reason": reason,
            "b_released_at": released_at,
            "b_seq": seq,
            "b_ended_at": now,
        }
        _end_alike(conn, ids, common, written)
    for statement, batch in ((_ADMIT, admitted), (_OTHER, other)):
        if len(batch) == 1 and conn.dialect.update_returning:
            _write_one(conn, _RETURNING[statement], batch[0], written)
        elif batch:
            _checked(conn, conn.execute(statement, batch).rowcount, len(batch))
    return written


def _end_alike(
    conn: Connection,
    ids: list[UUID],
    common: dict[str, Any],
    written: dict[UUID, tuple[str, dict[str, Any]]],
) -> None:
    if len(ids) == 1 and conn.dialect.update_returning:
        # A lone ending (a step's release): one row by id.
        _write_one(conn, _END_ONE, {**common, "b_id": ids[0]}, written)
        return
    statement = _ENDING[conn.dialect.name == "postgresql"]
    for chunk in chunks(ids):
        params = {**common, "b_ids": list(chunk)}
        if conn.dialect.update_returning:
            rows = conn.execute(_ENDING_RETURNING[statement], params).all()
            if len(rows) != len(chunk):
                raise StaleStateError(
                    f"{len(chunk) - len(rows)} of {len(chunk)} requests changed under the "
                    "scheduling lock."
                )
            for row in rows:
                written[row.id] = (row.requester, volatile(row))
        else:
            _checked(conn, conn.execute(statement, params).rowcount, len(chunk))


def _write_one(
    conn: Connection,
    statement: Executable,
    params: dict[str, Any],
    written: dict[UUID, tuple[str, dict[str, Any]]],
) -> None:
    """One compare-and-set write by id that returns the row (StaleStateError if none)."""
    row = first_written(statement, conn, params)
    if row is None:
        raise StaleStateError("A request changed under the scheduling lock.")
    written[row.id] = (row.requester, volatile(row))


def _checked(conn: Connection, rowcount: int, expected: int) -> None:
    if conn.dialect.supports_sane_multi_rowcount and rowcount not in (-1, expected):
        raise StaleStateError(
            f"{expected - rowcount} of {expected} requests changed under the scheduling lock."
        )
