"""The scheduling lock and the bookkeeping row (``rm_state``): one scheduling leader at a time.

Owns: :func:`acquire` (take the lock, read the row), :func:`is_takeover`, :func:`record`.

Every scheduling transaction starts with :func:`acquire`, which serialises it against every other
scheduling transaction of every process:

- SQLite: the transaction already began with ``BEGIN IMMEDIATE`` (the database write lock);
- PostgreSQL: ``pg_advisory_xact_lock`` on a constant key, released by commit or rollback;
- MySQL/MariaDB: ``SELECT ... FOR UPDATE`` on the singleton row (``GET_LOCK`` would belong to
  the session, not the transaction).

Invariants:
- the row's ``state_version`` / ``config_version`` only grow and change only under the lock,
  together with the rows they describe (see :mod:`.state`);
- a *takeover* is the first cycle of a leader that is not the one recorded, after no cycle ran
  for a whole sweep interval (the Resource Manager was down): in that cycle every live lease is
  extended by one sweep interval and nothing expires, so holders that could not renew against a
  dead service keep their allocations (as etcd does on leader change). A handover between live
  processes (embedded mode, replicas) is not a takeover: renewals never stopped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection, select, text, update

from wharf.core.errors import SchemaVersionError
from wharf.resource_manager.service import tables as t
from wharf.store.sql.types import is_mysql

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
_READ = select(
    t.state.c.state_version,
    t.state.c.config_version,
    t.state.c.leader_id,
    t.state.c.leader_epoch,
    t.state.c.last_cycle_at,
    t.state.c.last_sweep_at,
).where(t.state.c.id == t.STATE_ROW_ID)
_READ_LOCKED = _READ.with_for_update()


def acquire(conn: Connection) -> StateRow:
    """Take the scheduling lock for this transaction and read the bookkeeping row."""
    if conn.dialect.name == "postgresql":
        conn.execute(_PG_LOCK, {"key": _PG_LOCK_KEY})
    row = conn.execute(_READ_LOCKED if is_mysql(conn.dialect) else _READ).first()
    if row is None:
        raise SchemaVersionError(
            "The Resource Manager's state row is missing; the database was not migrated by Wharf."
        )
    return StateRow(*row)


def is_takeover(row: StateRow, instance_id: str, now: datetime, sweep_interval: timedelta) -> bool:
    if row.leader_id == instance_id:
        return False
    return row.last_cycle_at is None or now - row.last_cycle_at >= sweep_interval


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
    """Store the versions this transaction produced and that ``instance_id`` led this cycle."""
    values: dict[str, object] = {
        "state_version": state_version,
        "config_version": config_version,
        "last_cycle_at": now,
    }
    if row.leader_id != instance_id:
        values["leader_id"] = instance_id
        values["leader_epoch"] = row.leader_epoch + 1
    if swept:
        values["last_sweep_at"] = now
    conn.execute(update(t.state).where(t.state.c.id == t.STATE_ROW_ID).values(**values))
