"""The records of a pipeline call and its end, one write transaction each: :func:`record` and
:func:`finish` of the ``RunRepository`` port, for the SQL run repository.

Invariants: ``record`` is all or nothing and follows the rules of the pipeline, snapshot and run
repositories (repeated under the run's chosen id, it answers what it wrote: ``run_repeats``);
``finish`` never changes a finished run and always honours a stop committed before it. Both
are on the per-run path of every pipeline call, so their statements run on the driver's
cursor (``wharf.sql.direct``) and records are assembled from values already in hand.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Table, bindparam, select

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import StoreError
from wharf.core.ids import new_id
from wharf.core.transitions import check_run_initial, check_run_transition, run_end
from wharf.sql.direct import DirectStatement
from wharf.sql.engine import MAX_CONFLICT_RETRIES, Database
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.sql.types import LONG_TEXT
from wharf.store.models import (
    PipelineRecord,
    PipelineRunRecord,
    RunCreate,
    RunStart,
    SnapshotRecord,
)
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import check_name, first_missing, not_found, status_times
from wharf.store.sql.repositories.run_liveness import ended_values, liveness_values
from wharf.store.sql.repositories.run_repeats import repeated_record

_P, _SN, _R = t.pipeline, t.pipeline_snapshot, t.pipeline_run
_PIPELINE = DirectStatement(
    select(_P).where(_P.c.project_id == bindparam("project_id"), _P.c.name == bindparam("name"))
)
_INSERT_PIPELINE = DirectStatement(_P.insert())
# The spec goes in as the JSON text pydantic writes (cheaper than ``json.dumps`` of
# ``model_dump(mode="json")``, which is what the column's own type would do, with equal text:
# ``tests/store/sql/test_run_records.py``); it is read back through the column's type.
_INSERT_SNAPSHOT = DirectStatement(
    _SN.insert().values(spec=bindparam("spec_json", type_=LONG_TEXT))
)
_INSERT_RUN = DirectStatement(_R.insert())
_LOCK_RUN = DirectStatement(select(_R).where(_R.c.id == bindparam("run_id")).with_for_update())
_UPDATE_RUN = DirectStatement(_R.update().where(_R.c.id == bindparam("run_id")))

Recorded = tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]


def run_record(values: Mapping[str, Any]) -> PipelineRunRecord:
    return PipelineRunRecord.model_validate(values)


def run_values(run: RunCreate, now: Any) -> dict[str, Any]:
    """The row of a new run (``runs.create`` and ``record`` build it alike)."""
    values: dict[str, Any] = {
        "id": run.id or new_id(),
        "project_id": run.project_id,
        "pipeline_id": run.pipeline_id,
        "snapshot_id": run.snapshot_id,
        "user_id": run.user_id,
        "name": run.name,
        "status": run.status.value,
        "status_reason": run.status_reason,
        "orchestrator_run_id": run.orchestrator_run_id,
        "start_time": None,
        "end_time": None,
        "created": now,
        "updated": now,
    }
    values.update(status_times(run.status, None, None, now))
    if not run.is_placeholder:
        values.update(liveness_values(run.orchestrator, now))
    return values


def record(
    db: Database,
    project_id: UUID,
    pipeline_name: str,
    stack_id: UUID | None,
    spec: PipelineSpec,
    run: RunStart,
) -> Recorded:
    """Write the pipeline (got or created), the snapshot and the run in one transaction, by the
    rules of their repositories (unique pipeline per project and name; the run's initial status
    checked; ``start_time`` set when created running). Two concurrent creators of one pipeline
    are reconciled by its unique constraint: the loser's transaction rolls back and starts over,
    finding the winner's pipeline."""
    check_name(pipeline_name, "pipeline")
    check_run_initial(run.status)
    spec_json = spec.model_dump_json()  # once, outside the transaction (retries reuse it)

    def write(conn: Connection) -> Recorded:
        now = db.now()
        pipeline = _PIPELINE.first(conn, {"project_id": project_id, "name": pipeline_name})
        if pipeline is None:
            pipeline = {"id": new_id(), "project_id": project_id, "name": pipeline_name}
            pipeline["created"] = now
            _INSERT_PIPELINE.execute(conn, pipeline)
        snapshot_values = {
            "id": run.snapshot_id or new_id(),
            "project_id": project_id,
            "pipeline_id": pipeline["id"],
            "stack_id": stack_id,
            "spec_json": spec_json,
            "created": now,
        }
        _INSERT_SNAPSHOT.execute(conn, snapshot_values)
        snapshot_values.pop("spec_json")
        snapshot = SnapshotRecord.model_validate({**snapshot_values, "spec": spec})
        values = run_values(run.of(snapshot), now)
        _INSERT_RUN.execute(conn, values)
        return PipelineRecord.model_validate(pipeline), snapshot, run_record(values)

    for _ in range(MAX_CONFLICT_RETRIES):
        try:
            return db.write(write)
        except UniqueViolationError:
            # A repeat whose first answer was lost finds what it wrote; else a concurrent
            # caller created the pipeline first: the next pass finds it.
            repeated = repeated_record(db, project_id, pipeline_name, stack_id, spec, run)
            if repeated is not None:
                return repeated
            continue
        except ForeignKeyViolationError as exc:
            checks: list[tuple[str, Table, list[UUID | None]]] = [
                ("project", t.project, [project_id]),
                ("stack", t.stack, [stack_id]),
                ("user", t.user_account, [run.user_id]),
            ]
            raise first_missing(db, checks) or exc from None
    raise StoreError(
        f"Could not record a run of pipeline '{pipeline_name}' after {MAX_CONFLICT_RETRIES} "
        "conflicting attempts."
    )


def finish(
    db: Database, run_id: UUID, status: ExecutionStatus, reason: str | None
) -> PipelineRunRecord:
    """End the run: read it with its row locked (``SELECT ... FOR UPDATE``; ``BEGIN IMMEDIATE``
    on SQLite) and decide its end from that status (``wharf.core.transitions.run_end``), so a
    stop committed before it is always honoured and a finished run is never changed."""

    def apply(conn: Connection) -> PipelineRunRecord:
        row = _LOCK_RUN.first(conn, {"run_id": run_id})
        if row is None:
            raise not_found("pipeline run", run_id)
        current = ExecutionStatus(row["status"])
        end = run_end(current, status, reason, forced=bool(row["stop_forced"]))
        if end is None:
            return run_record(row)
        target, why = end
        check_run_transition(current, target)
        now = db.now()
        values: dict[str, Any] = {"status": target.value, "updated": now}
        values.update(status_times(target, row["start_time"], row["end_time"], now))
        values.update(ended_values(target, row["heartbeat_deadline"]))
        if why is not None:
            values["status_reason"] = why
        _UPDATE_RUN.execute(conn, {**values, "run_id": run_id})
        return run_record({**row, **values})

    return db.write(apply)
