"""The liveness of a run's orchestrating process: its record (:func:`liveness_values`), its beats
(:func:`beat`), the lost-run sweep (:func:`candidates`, :func:`fail_lost`).

Invariants: a finished run never regains a deadline (beats move it only while the run is running
or stopping), and every write that ends a run clears it (:func:`ended_values`), so the deadline
index holds unfinished runs only; two sweepers end a run once. Releasing the lost steps'
resource requests is the caller's (``wharf.store.lost_runs``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, and_, bindparam, func, or_, select

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import InputError
from wharf.core.transitions import ORCHESTRATOR_LOST
from wharf.sql.engine import Database
from wharf.sql.types import as_utc
from wharf.store.answers import LostRun, RunHeartbeatResponse
from wharf.store.models import OrchestratorProcess, PipelineRunRecord, StepRunRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import not_found
from wharf.store.sql.repositories.step_heartbeats import FINAL_STATUSES
from wharf.store.sql.repositories.step_links import load_links, step_record

_R, _S = t.pipeline_run, t.step_run
LIVE_STATUSES = (ExecutionStatus.RUNNING.value, ExecutionStatus.STOPPING.value)
"""The statuses of a run whose orchestrating process can be lost."""
_FINAL_STEPS = tuple(
    sorted(status.value for status in FINAL_STATUSES if status is not ExecutionStatus.RETRYING)
)
"""The statuses of steps a lost run leaves as they are: a retrying step's retry never starts."""
_LIVE = (_R.c.status.in_(LIVE_STATUSES), _R.c.heartbeat_deadline.is_not(None))

_BEAT = _R.update().where(_R.c.id == bindparam("run_id"), _R.c.status.in_(LIVE_STATUSES))
_BEAT_ANSWER = select(_R.c.status, _R.c.stop_forced).where(_R.c.id == bindparam("run_id"))


def lost_reason(last_heartbeat: datetime | None) -> str:
    """The ``status_reason`` of a run whose orchestrating process was lost: when it was last
    seen in UTC to the second (``2026-12-07 00:37:01 UTC``), or ``never``."""
    seen = "never"
    if (utc := as_utc(last_heartbeat)) is not None:
        seen = utc.strftime("%Y-%m-%d %H:%M:%S UTC")
    return f"{ORCHESTRATOR_LOST}{seen})"


def step_lost_reason(last_heartbeat: datetime | None) -> str:
    return f"The step's run ended: its {lost_reason(last_heartbeat)}."


def retry_lost_reason(last_heartbeat: datetime | None, failure: str | None) -> str:
    """The ``status_reason`` of a retrying step whose run was lost before its retry started."""
    why = f" (it failed: {failure})" if failure else ""
    return f"{step_lost_reason(last_heartbeat)[:-1]}; its retry never started{why}."


def _deadline(now: datetime, seconds: float) -> datetime:
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        raise InputError(f"A liveness timeout of {seconds} s ends after year 9999.") from None


def liveness_values(process: OrchestratorProcess | None, now: datetime) -> dict[str, Any]:
    """The columns that record ``process`` (host, pid, start token) running a run, with a beat
    at ``now``: written by the write that starts the run."""
    if process is None:
        return {}
    return {
        "orchestrator_host": process.host,
        "orchestrator_pid": process.pid,
        "orchestrator_start": process.start,
        "last_heartbeat": now,
        "heartbeat_deadline": _deadline(now, process.liveness_timeout_seconds),
    }


def ended_values(status: ExecutionStatus, current_deadline: datetime | None) -> dict[str, Any]:
    """What a run moving to ``status`` loses: its deadline once it has finished."""
    if status.is_finished and current_deadline is not None:
        return {"heartbeat_deadline": None}
    return {}


def beat(db: Database, run_id: UUID, process: OrchestratorProcess) -> RunHeartbeatResponse:
    """Record that ``process`` is alive and running the run; the run's status after it. The beat
    moves ``last_heartbeat`` and ``heartbeat_deadline`` only while the run is running or
    stopping."""

    def run(conn: Connection) -> RunHeartbeatResponse:
        values = liveness_values(process, db.now())
        conn.execute(_BEAT, {"run_id": run_id, **values})
        row = conn.execute(_BEAT_ANSWER, {"run_id": run_id}).first()
        if row is None:
            raise not_found("pipeline run", run_id)
        return RunHeartbeatResponse(
            run_id=run_id, status=ExecutionStatus(row.status), stop_forced=bool(row.stop_forced)
        )

    return db.write(run)


def candidates(db: Database, now: datetime, host: str | None) -> list[PipelineRunRecord]:
    """Unfinished runs with a liveness record whose deadline passed before ``now``, or whose
    orchestrating process runs on ``host`` (the caller checks those processes itself)."""
    which = _R.c.heartbeat_deadline < as_utc(now)
    if host is not None:
        which = or_(which, _R.c.orchestrator_host == host)
    stmt = select(_R).where(*_LIVE, which)
    rows = db.read(lambda conn: conn.execute(stmt).all())
    return sorted(
        (PipelineRunRecord.model_validate(r._asdict()) for r in rows),
        key=lambda r: (r.created, r.id),
    )


def fail_lost(
    db: Database, now: datetime, orphaned: Sequence[UUID] = (), spared: Sequence[UUID] = ()
) -> list[LostRun]:
    """End failed the unfinished runs whose deadline passed before ``now`` and those of
    ``orphaned`` (runs whose orchestrating process the caller saw gone), with their steps;
    never those of ``spared`` (runs whose process the caller saw alive).

    The candidates are locked and each ``UPDATE`` repeats the conditions (compare-and-set), so
    two sweepers end a run once. A run is ended failed with the reason ``orchestrator lost (last
    seen <time>)`` and every unfinished step of it failed (a retrying one too: its retry never
    starts), in one transaction. Their end time is
    the run's last sign of life (or a step's own, if later), not the sweep's time
    (:func:`_last_seen`): a lower bound, which ``wharf runs show`` says (``ended_unseen``).
    """
    cutoff = as_utc(now)
    which = _R.c.heartbeat_deadline < cutoff
    if orphaned:
        which = or_(which, _R.c.id.in_(list(orphaned)))
    if spared:
        which = and_(which, _R.c.id.not_in(list(spared)))

    def sweep(conn: Connection) -> list[LostRun]:
        rows = conn.execute(select(_R).where(*_LIVE, which).with_for_update()).all()
        lost: list[LostRun] = []
        for row in sorted(rows, key=lambda r: (r.created, r.id)):
            current = row._asdict()
            at = db.now()
            values: dict[str, Any] = {
                "status": ExecutionStatus.FAILED.value,
                "status_reason": lost_reason(current["last_heartbeat"]),
                "heartbeat_deadline": None,
                "updated": at,
                "end_time": _last_seen(at, current, *_steps_last_seen(conn, current["id"])),
            }
            done = conn.execute(
                _R.update().where(_R.c.id == current["id"], *_LIVE, which).values(values)
            )
            if done.rowcount != 1:
                continue
            current.update(values)
            steps = _end_steps(
                conn, current["id"], at, current["last_heartbeat"], values["end_time"]
            )
            lost.append(LostRun(run=PipelineRunRecord.model_validate(current), steps=steps))
        return lost

    return db.write(sweep)


def _end_steps(
    conn: Connection,
    run_id: UUID,
    at: datetime,
    last_seen: datetime | None,
    run_seen: datetime,
) -> list[StepRunRecord]:
    """End failed the run's unfinished steps. A step in flight was alive as long as its run's
    process was: it ends when the run was last seen (``run_seen``: its latest beat, or a step's
    start, beat or end), or at its own latest sign if later; ``last_seen`` (the run's last
    beat) is what their reasons quote."""
    unfinished = (_S.c.run_id == run_id, *(_S.c.status != s for s in _FINAL_STEPS))
    rows = conn.execute(select(_S).where(*unfinished).with_for_update()).all()
    latest = _latest_attempts(conn, run_id)
    ended: list[dict[str, Any]] = []
    for row in sorted(rows, key=lambda r: (r.created, r.id)):
        current = row._asdict()
        if current["status"] == ExecutionStatus.RETRYING.value and (
            current["attempt"] < latest.get(current["name"], 0)
        ):
            continue  # retried: its next attempt is the step's
        values: dict[str, Any] = {
            "status": ExecutionStatus.FAILED.value,
            "status_reason": step_lost_reason(last_seen),
            "heartbeat_deadline": None,
            "updated": at,
            "end_time": _last_seen(at, current, run_seen),
        }
        if current["status"] == ExecutionStatus.RETRYING.value:  # its attempt ended already
            values["status_reason"] = retry_lost_reason(last_seen, current["status_reason"])
            values["end_time"] = current["end_time"] or values["end_time"]
        conn.execute(_S.update().where(_S.c.id == current["id"], *unfinished).values(values))
        current.update(values)
        ended.append(current)
    links = load_links(conn, [c["id"] for c in ended]) if ended else {}
    return [step_record(c, *links[c["id"]]) for c in ended]


def _latest_attempts(conn: Connection, run_id: UUID) -> dict[str, int]:
    """The latest attempt of each step of the run, by name."""
    stmt = select(_S.c.name, func.max(_S.c.attempt)).where(_S.c.run_id == run_id)
    return {name: int(attempt) for name, attempt in conn.execute(stmt.group_by(_S.c.name))}


def _steps_last_seen(conn: Connection, run_id: UUID) -> tuple[datetime | None, ...]:
    """The latest start, beat and end of the run's steps (signs of its orchestrator's life)."""
    columns = (_S.c.start_time, _S.c.last_heartbeat, _S.c.end_time)
    row = conn.execute(select(*(func.max(c) for c in columns)).where(_S.c.run_id == run_id))
    return tuple(None if value is None else as_utc(value) for value in row.one())


def _last_seen(at: datetime, row: dict[str, Any], *more: datetime | None) -> datetime:
    """When a lost run or step was last seen alive: the latest of its start, its last beat and
    ``more``, never after ``at`` (the sweep's time, also when nothing was recorded)."""
    seen = [t for t in (row["start_time"], row["last_heartbeat"], *more) if t is not None]
    return min(at, max(seen)) if seen else at
