"""SQL for resource requests: bulk inserts, bulk loads, lapsed leases and lists.

Owns every statement on ``rm_requests`` and its child tables (subjects, metadata) but the lease
writes (:mod:`.lease_store`) and the status writes (:mod:`.status_writes`); the rules live in
the domain and in :mod:`.batch` / :mod:`.cycle`, which call these inside their transactions.

Invariants:
- loads are bulk (one ``IN`` query per table per chunk of ids), never one query per request;
  inserts are one driver ``executemany`` per table (:class:`~wharf.sql.direct.DirectStatement`);
- :func:`current` trusts a cached model only while the row's ``seq`` shows no change after the
  cache's state version, so answers read without the scheduling lock are never stale;
- ``lapse_at`` is kept equal to the request's earliest lapse while live and NULL once terminal.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

from sqlalchemy import (
    BindParameter,
    Connection,
    Executable,
    Row,
    Select,
    Table,
    bindparam,
    func,
    select,
)

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.service import codec
from wharf.resource_manager.service import tables as t
from wharf.sql.direct import DirectStatement
from wharf.sql.types import UtcDateTime

LIVE = (S.PENDING.value, S.ALLOCATED.value, S.PREEMPTING.value)
HOLDING = (S.ALLOCATED.value, S.PREEMPTING.value)
IN_CHUNK = 500


class StaleStateError(Exception):
    """A compare-and-set write found a row in another state than the cache said (internal)."""


@dataclass(frozen=True, slots=True)
class Loaded:
    request: ResourceRequest
    requester: str


def chunks(values: Sequence[Any], size: int = IN_CHUNK) -> Iterable[Sequence[Any]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


# ----------------------------------------------------------------------------- inserts


def insert_requests(
    conn: Connection, rows: Sequence[Mapping[str, Any]], children: Children
) -> None:
    """Insert requests (rows from :func:`codec.request_row`, with their demands and any
    allocations) and their child rows: one driver ``executemany`` per table."""
    _INSERT_REQUESTS.execute_many(conn, rows)
    _INSERT_SUBJECTS.execute_many(conn, children.subjects)
    _INSERT_METADATA.execute_many(conn, children.metadata)


_INSERT_REQUESTS = DirectStatement(t.requests.insert())
_INSERT_SUBJECTS = DirectStatement(t.subjects.insert())
_INSERT_METADATA = DirectStatement(t.request_metadata.insert())


@dataclass(slots=True)
class Children:
    subjects: list[dict[str, Any]]
    metadata: list[dict[str, Any]]

    @classmethod
    def empty(cls) -> Children:
        return cls([], [])

    def add(self, request: ResourceRequest) -> None:
        self.subjects.extend(codec.subject_rows(request))
        self.metadata.extend(codec.metadata_rows(request))


# ----------------------------------------------------------------------------- loads

# Built once: SQLAlchemy then reuses their cache keys and compiled forms on every call.
_IDS: BindParameter[Any] = bindparam("ids", expanding=True)
_IDS_INLINE: BindParameter[Any] = bindparam("ids", expanding=True, literal_execute=True)


@dataclass(frozen=True, slots=True)
class _ByIds:
    """A SELECT by a list of ids, with the ids bound, or inlined on PostgreSQL.

    psycopg prepares a statement once it ran five times, and PostgreSQL may then keep a generic
    plan chosen while the table was still small (a sequential scan): it stays until the table
    is analysed, while the table grows, and a lookup of a few ids then reads every row. Inlined
    ids (UUIDs, rendered by SQLAlchemy's literal processor) make each statement's text its own,
    so it is planned for its values.
    """

    bound: Select[Any]
    inline: Select[Any]

    def on(self, conn: Connection) -> Select[Any]:
        return self.inline if conn.dialect.name == "postgresql" else self.bound


def _by_ids(build: Callable[[BindParameter[Any]], Select[Any]]) -> _ByIds:
    return _ByIds(build(_IDS), build(_IDS_INLINE))


_R = t.requests.c
_LOAD_ROWS = _by_ids(lambda ids: select(t.requests).where(_R.id.in_(ids)))
_LOAD_LIVE = select(t.requests).where(_R.status.in_(LIVE))


def _children_of(table: Table) -> _ByIds:
    return _by_ids(lambda ids: select(table).where(table.c.request_id.in_(ids)))


_LOAD_CHILDREN = {table.name: _children_of(table) for table in (t.subjects, t.request_metadata)}
_VOLATILE = _by_ids(
    lambda ids: select(
        _R.id,
        _R.requester,
        _R.runtime_state,
        _R.lease_expires_at,
        _R.allocation_deadline,
        _R.renewed_at,
    ).where(_R.id.in_(ids))
)
_CHANGED = select(_R.id, _R.status).where(_R.seq > bindparam("version"))
_OWNER = select(_R.requester, _R.status).where(_R.id == bindparam("id"))


def load(conn: Connection, ids: Iterable[UUID]) -> dict[UUID, Loaded]:
    """Full requests (with leases, allocations and requester) by id; missing ids are absent."""
    wanted = list(dict.fromkeys(ids))
    found: dict[UUID, Loaded] = {}
    for chunk in chunks(wanted):
        rows = conn.execute(_LOAD_ROWS.on(conn), {"ids": list(chunk)}).all()
        found.update(_assemble(conn, [codec.mapping(r) for r in rows]))
    return found


def load_live(conn: Connection) -> dict[UUID, Loaded]:
    """Every pending, allocated or preempting request."""
    maps = [codec.mapping(r) for r in conn.execute(_LOAD_LIVE).all()]
    found: dict[UUID, Loaded] = {}
    for chunk in chunks(maps):
        found.update(_assemble(conn, chunk))
    return found


def _assemble(conn: Connection, rows: Sequence[codec.RowMap]) -> dict[UUID, Loaded]:
    if not rows:
        return {}
    ids = {"ids": [row["id"] for row in rows]}
    subjects = _children(conn, t.subjects.name, ids)
    metadata = _children(conn, t.request_metadata.name, ids)
    return {
        row["id"]: Loaded(
            codec.request_from_rows(row, subjects.get(row["id"], []), metadata.get(row["id"], [])),
            row["requester"],
        )
        for row in rows
    }


def _children(
    conn: Connection, table: str, ids: Mapping[str, Any]
) -> dict[UUID, list[codec.RowMap]]:
    grouped: dict[UUID, list[codec.RowMap]] = {}
    for row in conn.execute(_LOAD_CHILDREN[table].on(conn), ids):
        mapped = codec.mapping(row)
        grouped.setdefault(mapped["request_id"], []).append(mapped)
    return grouped


def with_volatile(conn: Connection, models: Mapping[UUID, ResourceRequest]) -> dict[UUID, Loaded]:
    """Complete requests known in memory (immutable parts, status, allocations) with the
    columns renewals change (lease, deadline, renewal time, runtime state) and the requester."""
    found: dict[UUID, Loaded] = {}
    for chunk in chunks(list(models)):
        for row in conn.execute(_VOLATILE.on(conn), {"ids": list(chunk)}):
            found[row.id] = Loaded(codec.updated(models[row.id], volatile(row)), row.requester)
    return found


WRITTEN_COLUMNS = (
    _R.id,
    _R.requester,
    _R.status,
    _R.seq,
    _R.runtime_state,
    _R.lease_expires_at,
    _R.allocation_deadline,
    _R.renewed_at,
)
"""What :func:`current` reads, and what a write returns so as to answer without reading the
row again."""


class Written(NamedTuple):
    """:data:`WRITTEN_COLUMNS` of a row, as a write sent on the driver's cursor returned them
    (read like SQLAlchemy's ``Row``: by attribute)."""

    id: UUID
    requester: str
    status: str
    seq: int
    runtime_state: str
    lease_expires_at: datetime | None
    allocation_deadline: datetime | None
    renewed_at: datetime | None


WrittenRow = Written | Row[Any]
"""A row with :data:`WRITTEN_COLUMNS`."""


def first_written(
    statement: Executable, conn: Connection, values: Mapping[str, Any]
) -> Written | None:
    """Run a write that returns :data:`WRITTEN_COLUMNS` (``.returning(*WRITTEN_COLUMNS)``) on
    one row; the row as written, None if none matched."""
    found = conn.execute(statement, values).mappings().first()
    return None if found is None else Written(**found)


def volatile(row: WrittenRow) -> dict[str, Any]:
    """The columns renewals change, from a row that has them (as :data:`VOLATILE` selects)."""
    return {
        "runtime_state": ResourceRequestRuntimeState(row.runtime_state),
        "lease_expires_at": row.lease_expires_at,
        "allocation_deadline": row.allocation_deadline,
        "renewed_at": row.renewed_at,
    }


_CURRENT = _by_ids(lambda ids: select(*WRITTEN_COLUMNS).where(_R.id.in_(ids)))


def current(
    conn: Connection,
    ids: Sequence[UUID],
    known: Mapping[UUID, ResourceRequest],
    version: int | None,
) -> dict[UUID, Loaded]:
    """Requests by id without the scheduling lock: from ``known`` (neutral models, as of state
    version ``version``) completed with the volatile columns where the row shows no
    scheduler-relevant change since ``version`` (``seq``), else loaded whole."""
    rows = [
        row
        for chunk in chunks(list(dict.fromkeys(ids)))
        for row in conn.execute(_CURRENT.on(conn), {"ids": list(chunk)})
    ]
    return current_from(conn, rows, known, version)


def current_from(
    conn: Connection,
    rows: Iterable[WrittenRow],
    known: Mapping[UUID, ResourceRequest],
    version: int | None,
) -> dict[UUID, Loaded]:
    """:func:`current` from rows already read (or returned by a write) with the columns of
    :data:`WRITTEN_COLUMNS`; requests the rows do not prove current are loaded whole."""
    found: dict[UUID, Loaded] = {}
    rest: list[UUID] = []
    for row in rows:
        model = known.get(row.id)
        if (
            model is None
            or version is None
            or row.seq > version
            or model.status.value != row.status
        ):
            rest.append(row.id)
            continue
        found[row.id] = Loaded(codec.updated(model, volatile(row)), row.requester)
    if rest:
        found.update(load(conn, rest))
    return found


def changed_since(conn: Connection, version: int) -> list[tuple[UUID, str]]:
    """(id, status) of every request whose scheduler-relevant state changed after ``version``."""
    return [(row.id, row.status) for row in conn.execute(_CHANGED, {"version": version})]


def owner(conn: Connection, request_id: UUID) -> tuple[str, str] | None:
    """(requester, status) of a request, or None if it does not exist."""
    row = conn.execute(_OWNER, {"id": request_id}).first()
    return None if row is None else (row.requester, row.status)


@dataclass(frozen=True, slots=True)
class LeaseRow:
    id: UUID
    status: str
    lease_expires_at: datetime | None
    allocation_deadline: datetime | None


LEASE_COLUMNS = (_R.id, _R.status, _R.lease_expires_at, _R.allocation_deadline)
_LAPSED_ROWS = select(*LEASE_COLUMNS).where(_R.lapse_at <= bindparam("now"))
# PostgreSQL: the same rows as a bounded range, so that even an unanalysed table is read through
# the ``lapse_at`` index (for ``<= :now`` alone the planner assumes a third of the rows match
# and scans the table in every transaction; for a range it assumes 0.5 %).
_FLOOR = datetime(1, 1, 2, tzinfo=UTC)  # below every instant a lease can lapse at
_LAPSED_RANGE_ROWS = select(*LEASE_COLUMNS).where(
    _R.lapse_at >= bindparam("floor", _FLOOR, type_=UtcDateTime()),
    _R.lapse_at <= bindparam("now"),
)
_LAPSED = {
    (postgresql, lock): query.with_for_update() if lock else query
    for postgresql, query in ((False, _LAPSED_ROWS), (True, _LAPSED_RANGE_ROWS))
    for lock in (False, True)
}
_LIVE_LEASES = select(*LEASE_COLUMNS).where(_R.lapse_at.is_not(None))


def lapsed(conn: Connection, now: datetime, *, lock: bool = True) -> list[LeaseRow]:
    """Live requests whose lease or allocation deadline has been reached, locked for update
    (unless ``lock`` is False: read-only questions)."""
    statement = _LAPSED[(conn.dialect.name == "postgresql", lock)]
    return [LeaseRow(*row) for row in conn.execute(statement, {"now": now})]


def live_leases(conn: Connection) -> list[LeaseRow]:
    """Lease columns of every live request that can lapse."""
    return [LeaseRow(*row) for row in conn.execute(_LIVE_LEASES)]


def count_live_in_pool(conn: Connection, pool_id: UUID) -> int:
    statement = select(func.count()).where(_R.pool_id == pool_id, _R.status.in_(LIVE))
    return int(conn.execute(statement).scalar_one())
