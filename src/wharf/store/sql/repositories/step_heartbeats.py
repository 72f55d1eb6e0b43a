"""Step heartbeats (``beat``) and the lost-heartbeat sweep (``fail_lost``), for
:mod:`wharf.store.sql.repositories.steps`, whose repository delegates here.

Invariants: a beat never modifies a step whose status is final (``FINAL_STATUSES``) and is not a
change of the step (``updated`` stays); two sweepers fail a lost step once, and only steps that
have a deadline (have beaten) are ever swept.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, bindparam, func, select

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.core.transitions import STEP_TRANSITIONS, check_step_transition
from wharf.sql.engine import Database
from wharf.sql.types import as_utc
from wharf.store.answers import HeartbeatResponse
from wharf.store.models import StepRunRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import not_found, status_times
from wharf.store.sql.repositories.step_links import load_links, step_record

_S = t.step_run

FINAL_STATUSES = frozenset(
    {*(status for status, after in STEP_TRANSITIONS.items() if not after), ExecutionStatus.RETRYING}
)
"""Statuses whose attempt has ended (finished, retrying): a heartbeat does not modify such a
step, and reaching one clears the step's heartbeat deadline. A retrying step run leaves its
status only when its retry never starts (it ends failed or stopped)."""
_FINAL = tuple(sorted(status.value for status in FINAL_STATUSES))
BEATING_STATUSES = (
    ExecutionStatus.RUNNING,
    ExecutionStatus.STOPPING,
    ExecutionStatus.CANCELLING,
)
"""The statuses of a step that can have a heartbeat, hence be lost."""
_BEATING = tuple(status.value for status in BEATING_STATUSES)

_BEAT = (
    _S.update()
    # One inequality per final status rather than NOT IN: SQLAlchemy expands an IN list on
    # every execution, about a fifth of the beat's cost in Python.
    .where(_S.c.id == bindparam("step_id"), *(_S.c.status != status for status in _FINAL))
    .values(last_heartbeat=bindparam("now"), heartbeat_deadline=bindparam("deadline"))
)
_BEAT_STATUSES = (
    select(
        _S.c.status,
        _S.c.resource_request_id,
        t.pipeline_run.c.status.label("run_status"),
    )
    .join_from(_S, t.pipeline_run, _S.c.run_id == t.pipeline_run.c.id)
    .where(_S.c.id == bindparam("step_id"))
)
_BEAT_RETURNING = _BEAT.where(
    # A heartbeat is soon superseded: its commit need not wait for the WAL flush (the
    # setting is local to the statement's own transaction, so nothing else is relaxed).
    func.set_config("synchronous_commit", "off", True).is_not(None)
).returning(
    _S.c.status,
    _S.c.resource_request_id,
    select(t.pipeline_run.c.status)
    .where(t.pipeline_run.c.id == _S.c.run_id)
    .scalar_subquery()
    .label("run_status"),
)
"""PostgreSQL's beat: one statement, one round trip."""
_IS_LOST = (_S.c.status.in_(_BEATING), _S.c.heartbeat_deadline < bindparam("cutoff"))
# No ORDER BY: SQLite would rather walk the whole ``created`` index than sort; the few rows
# found are sorted in Python.
_LOCK_LOST = select(_S).where(*_IS_LOST).with_for_update()
_OF_RUN = _S.c.run_id == bindparam("run_id")
_LOCK_LOST_OF_RUN = select(_S).where(_OF_RUN, *_IS_LOST).with_for_update()
_FAIL_LOST = _S.update().where(_S.c.id == bindparam("step_id"), *_IS_LOST)


def lost_reason(last_heartbeat: datetime | None, deadline: datetime) -> str:
    """The ``status_reason`` of a step failed by the lost-heartbeat sweep."""
    since = (
        f"no heartbeat since {last_heartbeat.isoformat()}"
        if last_heartbeat is not None
        else "no heartbeat received"
    )
    return f"Heartbeat lost: {since} (liveness timeout passed at {deadline.isoformat()})."


def beat(db: Database, step_run_id: UUID, liveness_timeout_seconds: float) -> HeartbeatResponse:
    """Record a heartbeat; the step's status, resource request and run status after it.

    Sets ``last_heartbeat = now`` and ``heartbeat_deadline = now + timeout`` (store clock) in one
    ``UPDATE`` guarded by the step's status, so a final step (finished, or retrying) is never
    modified. The beat is atomic by itself and runs without a transaction around it
    (``Database.autocommit``): on PostgreSQL one ``UPDATE ... RETURNING`` (a second read only for
    a final or unknown step), committed without waiting for the WAL flush -- a database crash may
    lose the last beats, which only makes those deadlines earlier than asked; on SQLite the
    ``UPDATE`` then a read, so the write lock is held only inside SQLite, never across Python
    code; on MySQL/MariaDB (no ``UPDATE ... RETURNING``) both in one transaction.
    """
    timeout = _liveness_timeout(liveness_timeout_seconds)
    returning = _BEAT_RETURNING if db.engine.dialect.name == "postgresql" else None

    def run(conn: Connection) -> HeartbeatResponse:
        now = db.now()
        try:
            deadline = now + timeout
        except OverflowError:
            raise InputError(
                f"A liveness timeout of {liveness_timeout_seconds} s ends after year 9999."
            ) from None
        params = {"step_id": step_run_id, "now": now, "deadline": deadline}
        row = None
        if returning is not None:
            row = conn.execute(returning, params).first()
        else:
            conn.execute(_BEAT, params)
        if row is None:  # not beaten (final or unknown step), or no UPDATE ... RETURNING
            row = conn.execute(_BEAT_STATUSES, {"step_id": step_run_id}).first()
        if row is None:
            raise not_found("step run", step_run_id)
        return HeartbeatResponse(
            step_run_id=step_run_id,
            status=ExecutionStatus(row.status),
            run_status=ExecutionStatus(row.run_status),
            resource_request_id=row.resource_request_id,
        )

    return db.autocommit(run)


def fail_lost(db: Database, now: datetime, run_id: UUID | None = None) -> list[StepRunRecord]:
    """Fail the steps (of ``run_id``) whose heartbeat deadline passed before ``now``.

    Only steps that can have a heartbeat (running, stopping, cancelling) are candidates. They are
    locked (``FOR UPDATE``; ``BEGIN IMMEDIATE`` on SQLite) by a read that checks deadline and
    status, which PostgreSQL and InnoDB evaluate on the latest committed row after any wait, and
    each ``UPDATE`` repeats both checks (compare-and-set): two sweepers fail a step once, and a
    step that beat or finished before the sweeper held its row is left alone. The deadline is
    cleared, so the deadline index only holds steps that can still be lost; the reason names the
    last beat and the deadline that passed.
    """
    cutoff = as_utc(now)

    def sweep(conn: Connection) -> list[StepRunRecord]:
        if run_id is None:
            rows = conn.execute(_LOCK_LOST, {"cutoff": cutoff}).all()
        else:
            rows = conn.execute(_LOCK_LOST_OF_RUN, {"cutoff": cutoff, "run_id": run_id}).all()
        if not rows:
            return []
        at = db.now()
        failed: list[dict[str, Any]] = []
        for row in sorted(rows, key=lambda r: (r.created, r.id)):  # the order of ``list``
            current = row._asdict()
            check_step_transition(ExecutionStatus(current["status"]), ExecutionStatus.FAILED)
            values: dict[str, Any] = {
                "status": ExecutionStatus.FAILED.value,
                "status_reason": lost_reason(
                    current["last_heartbeat"], current["heartbeat_deadline"]
                ),
                "heartbeat_deadline": None,
                "updated": at,
                **status_times(
                    ExecutionStatus.FAILED, current["start_time"], current["end_time"], at
                ),
            }
            params = {"step_id": current["id"], "cutoff": cutoff, **values}
            if conn.execute(_FAIL_LOST, params).rowcount == 1:
                current.update(values)
                failed.append(current)
        links = load_links(conn, [c["id"] for c in failed]) if failed else {}
        return [step_record(c, *links[c["id"]]) for c in failed]

    return db.write(sweep)


def _liveness_timeout(seconds: float) -> timedelta:
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"A liveness timeout must be a positive number of seconds, got {seconds}.")
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InputError(f"A liveness timeout of {seconds} s is too long.") from None
