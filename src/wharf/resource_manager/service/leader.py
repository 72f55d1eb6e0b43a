"""The scheduling lock and the bookkeeping row (``rm_state``): one scheduling leader at a time.

Owns :func:`acquire` (every scheduling transaction starts with it), :func:`read`,
:func:`downtime`, :func:`extended_lease`, :func:`record`, :func:`needs_record`.

Invariants:
- the row's ``state_version`` / ``config_version`` only grow and change only under the lock,
  together with the rows they describe (see :mod:`.state`);
- ``last_cycle_at`` is the last time an instance was known to serve; a serving instance with a
  liveness interval (the API server's timer) records at least that often;
- time during which no instance served does not count against lease holders (they could not
  renew): a takeover (:func:`downtime`) extends every lease live at the last record by the
  whole downtime before anything is expired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, RowMapping, bindparam, select, text, update

from wharf.core.errors import SchemaVersionError
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.options import ServiceOptions
from wharf.sql.types import UtcDateTime, is_mysql

_PG_LOCK_KEY = 0x57524D53  # "WRMS": the scheduling lock of every Resource Manager process


@dataclass(frozen=True, slots=True)
class StateRow:
    state_version: int
    config_version: int
    leader_id: str | None
    leader_epoch: int
    last_cycle_at: datetime | None
    last_sweep_at: datetime | None


_PG_LOCK = text("SELECT pg_advisory_xact_lock(:key)")
_READ_QUERY = select(
    t.state.c.state_version,
    t.state.c.config_version,
    t.state.c.leader_id,
    t.state.c.leader_epoch,
    t.state.c.last_cycle_at,
    t.state.c.last_sweep_at,
).where(t.state.c.id == t.STATE_ROW_ID)
_READ_LOCKED = _READ_QUERY.with_for_update()


def acquire(conn: Connection) -> StateRow:
    """Take the scheduling lock for this transaction and read the bookkeeping row (every
    scheduling transaction starts this way, while the lock serialises them all).

    SQLite: the transaction already began with ``BEGIN IMMEDIATE`` (the database write lock);
    PostgreSQL: ``pg_advisory_xact_lock`` on a constant key, released by commit or rollback;
    MySQL/MariaDB: ``SELECT ... FOR UPDATE`` on the singleton row (``GET_LOCK`` would belong
    to the session, not the transaction).
    """
    if conn.dialect.name == "postgresql":
        conn.execute(_PG_LOCK, {"key": _PG_LOCK_KEY})
    read = _READ_LOCKED if is_mysql(conn.dialect) else _READ_QUERY
    return _state_row(conn.execute(read).mappings().first())


def read(conn: Connection) -> StateRow:
    """The bookkeeping row without the lock (read transactions: what-if questions)."""
    return _state_row(conn.execute(_READ_QUERY).mappings().first())


def _state_row(row: RowMapping | None) -> StateRow:
    if row is None:
        raise SchemaVersionError(
            "The Resource Manager's state row is missing; the database was not migrated by Wharf."
        )
    return StateRow(**row)  # the columns are named as StateRow's fields


LIVENESS_GRACE = 3
"""With a liveness interval, a record older than this many intervals means nobody served."""


def downtime(
    row: StateRow, instance_id: str, now: datetime, options: ServiceOptions
) -> timedelta | None:
    """How long no instance served before this transaction, when the transaction is a takeover;
    None when it is not one.

    With a liveness interval, a takeover is any transaction (a process's first one included)
    after a gap of over :data:`LIVENESS_GRACE` intervals since the last record: only then may
    nobody have served. A process that starts within that time heard from no holder and has
    no downtime to give back: the instance recorded may still serve (a replica restarting
    beside it, in a loop or not, must not keep dead holders' leases alive). Without one
    (embedded mode, no timer), the first cycle of another instance after a whole sweep
    interval without a record. A handover between live processes is not a takeover.
    """
    if row.last_cycle_at is None:
        return None  # no instance ever served: no lease to keep
    gap = max(now - row.last_cycle_at, timedelta(0))
    liveness = options.liveness_interval
    if liveness is None:
        other = row.leader_id != instance_id
        return gap if other and gap >= options.sweep_interval else None
    return gap if gap > liveness * LIVENESS_GRACE else None


def extended_lease(
    lease: datetime, down_since: datetime, now: datetime, sweep_interval: timedelta
) -> datetime | None:
    """A lease's deadline after a takeover that found no instance serving since
    ``down_since``, or None to leave it (it lapsed while an instance still served).

    ``lease + (now - down_since)``: the holder keeps the time it had when the service went
    away, whatever the downtime, and at least one sweep interval from ``now`` to renew.
    """
    if lease <= down_since:
        return None
    return max(lease + (now - down_since), now + sweep_interval)


_S = t.state.c
_RECORD = (
    update(t.state)
    .where(_S.id == t.STATE_ROW_ID)
    .values(
        state_version=bindparam("s_state"),
        config_version=bindparam("s_config"),
        last_cycle_at=bindparam("s_now"),
        leader_id=bindparam("s_leader"),
        leader_epoch=bindparam("s_epoch"),
        last_sweep_at=bindparam("s_swept", type_=UtcDateTime()),
    )
)


def record(
    conn: Connection,
    row: StateRow,
    *,
    instance_id: str,
    state_version: int,
    config_version: int,
    now: datetime,
    swept: bool,
) -> None:
    """Store the versions this transaction produced and that ``instance_id`` led this cycle
    (the transaction's last write)."""
    same = row.leader_id == instance_id
    params = {
        "s_state": state_version,
        "s_config": config_version,
        "s_now": now,
        "s_leader": instance_id,
        "s_epoch": row.leader_epoch if same else row.leader_epoch + 1,
        # The row was read under the scheduling lock: its last sweep is still the current one.
        "s_swept": now if swept else row.last_sweep_at,
    }
    conn.execute(_RECORD, params)


def needs_record(row: StateRow, instance_id: str, now: datetime, options: ServiceOptions) -> bool:
    """Whether a transaction that changed nothing must still record its leader and time.

    It must when another instance is recorded (so the row names a live leader) or when the
    recorded time is half a liveness interval old (half a sweep interval without one): then a
    later takeover check can never mistake a leader that is busy with renewals alone for one
    that is gone.
    """
    if row.leader_id != instance_id or row.last_cycle_at is None:
        return True
    every = options.liveness_interval or options.sweep_interval
    return now - row.last_cycle_at >= every / 2
