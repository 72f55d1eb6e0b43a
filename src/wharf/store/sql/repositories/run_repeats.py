"""A repeated creation of a run or snapshot under the id its caller chose (``RunCreate.id``,
``SnapshotCreate.id``, ``RunStart.id``): the caller's first try may have been written and its
answer lost (a server replica killed after its commit, a dropped connection), so the repeat is
answered with what was written, never a second record.

Invariants: a repeat is answered only when it asks for what was recorded (the same project,
pipeline, snapshot, user, name and orchestrator run id; for a snapshot, the same spec and
stack); anything else under a stored id is refused with ``EntityExistsError`` (409 over HTTP),
never merged. A run's name and orchestrator run id may have been set since by the replacement
of its placeholder (``runs.get_or_create``): a placeholder's repeat does not compare them then.
Nothing here writes.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import select

from wharf.config.spec import PipelineSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import EntityExistsError
from wharf.sql.engine import Database
from wharf.store.models import (
    PipelineRecord,
    PipelineRunRecord,
    RunCreate,
    RunStart,
    SnapshotCreate,
    SnapshotRecord,
)
from wharf.store.sql import tables as t

_R, _SN, _P = t.pipeline_run, t.pipeline_snapshot, t.pipeline

Recorded = tuple[PipelineRecord, SnapshotRecord, PipelineRunRecord]


def _row(db: Database, table: Any, row_id: UUID) -> dict[str, Any] | None:
    stmt = select(table).where(table.c.id == row_id)
    found = db.read(lambda c: c.execute(stmt).first())
    return None if found is None else found._asdict()


def _refused(kind: str, row_id: UUID, differs: list[str]) -> EntityExistsError:
    return EntityExistsError(
        f"A {kind} with id {row_id} already exists with another {', '.join(differs)}: a "
        "repeated creation must ask for what was recorded."
    )


def _run_differs(run: RunCreate, row: dict[str, Any]) -> list[str]:
    fields = ["project_id", "pipeline_id", "snapshot_id", "user_id"]
    replaced = run.is_placeholder and not ExecutionStatus(row["status"]).is_placeholder
    if not replaced:
        fields.append("name")
        if run.orchestrator_run_id is not None or row["orchestrator_run_id"] is None:
            fields.append("orchestrator_run_id")
    return [
        f.removesuffix("_id") + (" id" if f.endswith("_id") else "")
        for f in fields
        if getattr(run, f) != row[f]
    ]


def repeated_run(db: Database, run: RunCreate) -> PipelineRunRecord | None:
    """The run recorded under ``run.id`` if ``run`` repeats its creation; None if there is
    none (or ``run`` has no id); ``EntityExistsError`` if the run there is another."""
    if run.id is None:
        return None
    row = _row(db, _R, run.id)
    if row is None:
        return None
    differs = _run_differs(run, row)
    if differs:
        raise _refused("pipeline run", run.id, differs)
    return PipelineRunRecord.model_validate(row)


def _snapshot_differs(snapshot: SnapshotCreate, row: dict[str, Any]) -> list[str]:
    differs = [
        f.removesuffix("_id") + " id"
        for f in ("project_id", "pipeline_id", "stack_id")
        if getattr(snapshot, f) != row[f]
    ]
    if PipelineSpec.model_validate(row["spec"]) != snapshot.spec:
        differs.append("spec")
    return differs


def repeated_snapshot(db: Database, snapshot: SnapshotCreate) -> SnapshotRecord | None:
    """The snapshot recorded under ``snapshot.id`` if ``snapshot`` repeats its creation; None
    if there is none; ``EntityExistsError`` if the snapshot there is another."""
    if snapshot.id is None:
        return None
    row = _row(db, _SN, snapshot.id)
    if row is None:
        return None
    differs = _snapshot_differs(snapshot, row)
    if differs:
        raise _refused("pipeline snapshot", snapshot.id, differs)
    return SnapshotRecord.model_validate({**row, "spec": snapshot.spec})


def repeated_record(
    db: Database,
    project_id: UUID,
    pipeline_name: str,
    stack_id: UUID | None,
    spec: PipelineSpec,
    run: RunStart,
) -> Recorded | None:
    """The pipeline, snapshot and run ``runs.record`` wrote for ``run.id`` if this call repeats
    it; None if no run has that id; ``EntityExistsError`` if what is there differs."""
    if run.id is None:
        return None
    row = _row(db, _R, run.id)
    if row is None:
        if run.snapshot_id is not None and _row(db, _SN, run.snapshot_id) is not None:
            raise EntityExistsError(
                f"A pipeline snapshot with id {run.snapshot_id} already exists, without the "
                f"run {run.id}: a recorded run's snapshot id must be new."
            )
        return None
    pipeline = _row(db, _P, row["pipeline_id"])
    if pipeline is None or pipeline["name"] != pipeline_name:
        raise _refused("pipeline run", run.id, ["pipeline"])
    snapshot_id = run.snapshot_id if run.snapshot_id is not None else row["snapshot_id"]
    asked = SnapshotCreate(
        id=snapshot_id,
        project_id=project_id,
        pipeline_id=pipeline["id"],
        stack_id=stack_id,
        spec=spec,
    )
    snapshot = repeated_snapshot(db, asked)
    if snapshot is None or snapshot.id != row["snapshot_id"]:
        raise _refused("pipeline run", run.id, ["snapshot"])
    recorded = repeated_run(db, run.of(snapshot))
    assert recorded is not None  # read above
    return PipelineRecord.model_validate(pipeline), snapshot, recorded
