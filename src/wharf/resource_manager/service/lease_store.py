"""SQL that moves leases: renewals and the extension of every lease after a takeover.

Owns :func:`renew` (:func:`renew_many`, :class:`LeaseRenewal`) and :func:`extend_leases`, the
only writes of the lease columns of ``rm_requests`` besides inserts and endings (which end the
lease, see :mod:`.status_writes`).

Invariants: a renewal changes only the lease columns (and the runtime state), and only of a
live request of the caller whose lease has not lapsed (``lapse_at > now``), so a lapsed lease
is never revived but expired by the next cycle; ``lapse_at`` stays the request's earliest lapse
(the lease, or a pending request's earlier allocation deadline); an extension never shortens a
lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import (
    Connection,
    String,
    and_,
    bindparam,
    case,
    column,
    func,
    literal_column,
    or_,
    update,
    values,
)

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.service import codec
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.request_store import (
    LIVE,
    WRITTEN_COLUMNS,
    LeaseRow,
    Written,
)
from wharf.sql.types import UtcDateTime

_C = t.requests.c
_LIVE_STATUS = or_(*(_C.status == literal_column(f"'{status}'") for status in LIVE))
"""``status IN (live)`` with inline constants: no list to expand on every execution."""
_PENDING_PAST_LEASE = and_(
    _C.status == literal_column(f"'{S.PENDING.value}'"),
    _C.allocation_deadline.is_not(None),
    _C.allocation_deadline < bindparam("r_lease", type_=UtcDateTime()),
)
_RENEW_ANY = (
    update(t.requests)
    .where(
        _C.id == bindparam("r_id"),
        _LIVE_STATUS,
        or_(_C.lapse_at.is_(None), _C.lapse_at > bindparam("r_now", type_=UtcDateTime())),
    )
    .values(
        lease_expires_at=bindparam("r_lease", type_=UtcDateTime()),
        renewed_at=bindparam("r_now", type_=UtcDateTime()),
        lapse_at=case(
            (_PENDING_PAST_LEASE, _C.allocation_deadline),
            else_=bindparam("r_lease", type_=UtcDateTime()),
        ),
        runtime_state=func.coalesce(bindparam("r_state", type_=String()), _C.runtime_state),
    )
)
_RENEW_OWN = _RENEW_ANY.where(_C.requester == bindparam("r_requester"))
"""Built once (as every hot statement here): SQLAlchemy then reuses their compiled forms and
spends nothing on building or hashing them per renewal."""


_RENEWALS = {
    (own, returning): (_RENEW_OWN if own else _RENEW_ANY).returning(*WRITTEN_COLUMNS)
    if returning
    else (_RENEW_OWN if own else _RENEW_ANY)
    for own in (False, True)
    for returning in (False, True)
}


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """One renewal: extend ``request_id``'s lease to ``lease`` at ``now`` (of ``requester``'s
    request, unless None), recording ``runtime_state`` unless None."""

    request_id: UUID
    now: datetime
    lease: datetime
    runtime_state: ResourceRequestRuntimeState | None
    requester: str | None

    def params(self) -> dict[str, Any]:
        params: dict[str, Any] = {
            "r_id": self.request_id,
            "r_now": self.now,
            "r_lease": self.lease,
            "r_state": None if self.runtime_state is None else self.runtime_state.value,
        }
        if self.requester is not None:
            params["r_requester"] = self.requester
        return params


def renew(
    conn: Connection,
    request_id: UUID,
    *,
    now: datetime,
    lease: datetime,
    runtime_state: ResourceRequestRuntimeState | None,
    requester: str | None,
) -> Written | bool:
    """Extend a live, unlapsed lease (of ``requester``'s request, unless None). False if
    nothing was renewed; else, where the database returns updated rows
    (``conn.dialect.update_returning``: SQLite, PostgreSQL), the row as written
    (:data:`request_store.WRITTEN_COLUMNS`, so answering needs no second read), elsewhere True."""
    return renew_many(conn, [LeaseRenewal(request_id, now, lease, runtime_state, requester)])[0]


def renew_many(conn: Connection, renewals: Sequence[LeaseRenewal]) -> list[Written | bool]:
    """:func:`renew` each, in order (so the rows are locked in the order given); on PostgreSQL
    a batch of distinct requests renewed at one instant is one statement (one round trip)."""
    if (
        conn.dialect.name == "postgresql"
        and len(renewals) > 1
        and len({r.request_id for r in renewals}) == len(renewals)
        and len({r.now for r in renewals}) == 1
    ):
        return _renew_together(conn, renewals)
    if not conn.dialect.update_returning:
        return [
            bool(conn.execute(_RENEWALS[(r.requester is not None, False)], r.params()).rowcount)
            for r in renewals
        ]
    found: list[Written | bool] = []
    for r in renewals:
        row = conn.execute(_RENEWALS[(r.requester is not None, True)], r.params()).mappings()
        first = row.first()
        found.append(False if first is None else Written(**first))
    return found


def _renew_together(conn: Connection, renewals: Sequence[LeaseRenewal]) -> list[Written | bool]:
    """The renewals as one ``UPDATE ... FROM (VALUES ...) RETURNING``: each row is matched by
    the conditions of :data:`_RENEW_ANY` (and the requester, where given), and renewed alike."""
    given = values(
        column("v_id", _C.id.type),
        column("v_lease", UtcDateTime()),
        column("v_state", String()),
        column("v_requester", String()),
        name="given",
    ).data(
        [
            (
                r.request_id,
                r.lease,
                None if r.runtime_state is None else r.runtime_state.value,
                r.requester,
            )
            for r in renewals
        ]
    )
    v = given.c
    now = bindparam("r_now", renewals[0].now, type_=UtcDateTime())
    statement = (
        update(t.requests)
        .where(
            _C.id == v.v_id,
            _LIVE_STATUS,
            or_(_C.lapse_at.is_(None), _C.lapse_at > now),
            or_(v.v_requester.is_(None), _C.requester == v.v_requester),
        )
        .values(
            lease_expires_at=v.v_lease,
            renewed_at=now,
            lapse_at=case(
                (
                    and_(
                        _C.status == literal_column(f"'{S.PENDING.value}'"),
                        _C.allocation_deadline.is_not(None),
                        _C.allocation_deadline < v.v_lease,
                    ),
                    _C.allocation_deadline,
                ),
                else_=v.v_lease,
            ),
            runtime_state=func.coalesce(v.v_state, _C.runtime_state),
        )
        .returning(*WRITTEN_COLUMNS)
    )
    written = {row["id"]: Written(**row) for row in conn.execute(statement).mappings()}
    return [written.get(r.request_id, False) for r in renewals]


def extend_leases(conn: Connection, extensions: Sequence[tuple[LeaseRow, datetime]]) -> None:
    """After a takeover: move each live lease to its extended deadline (never shorten it)."""
    params = [
        {
            "b_id": row.id,
            "b_lease": lease,
            "b_lapse": codec.lapse_at(lease, row.allocation_deadline)
            if row.status == S.PENDING.value
            else lease,
        }
        for row, lease in extensions
    ]
    if not params:
        return
    statement = (
        update(t.requests)
        .where(
            _C.id == bindparam("b_id"),
            _C.lapse_at.is_not(None),  # still live (an IN list cannot be used in executemany)
            _C.lease_expires_at < bindparam("b_lease"),
        )
        .values(lease_expires_at=bindparam("b_lease"), lapse_at=bindparam("b_lapse"))
    )
    conn.execute(statement, params)
