"""Pipeline snapshots: the compiled :class:`PipelineSpec` a run executes, stored as JSON.

The spec is written with ``model_dump(mode="json")`` and read back with ``model_validate``, so a
snapshot read in another process is equal to the one written. Snapshots are immutable.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Row, select

from wharf.config.spec import PipelineSpec
from wharf.core.ids import new_id
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.models import SnapshotCreate, SnapshotRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import SqlRepository, first_missing, not_found
from wharf.store.sql.repositories.run_repeats import repeated_snapshot

_SN = t.pipeline_snapshot


def _record(row: Row[Any]) -> SnapshotRecord:
    data = row._asdict()
    data["spec"] = PipelineSpec.model_validate(data["spec"])
    return SnapshotRecord.model_validate(data)


class SqlSnapshotRepository(SqlRepository):
    def create(self, snapshot: SnapshotCreate) -> SnapshotRecord:
        values = {
            "id": snapshot.id or new_id(),
            "project_id": snapshot.project_id,
            "pipeline_id": snapshot.pipeline_id,
            "stack_id": snapshot.stack_id,
            "spec": snapshot.spec.model_dump(mode="json"),
            "created": self._db.now(),
        }
        try:
            self._db.write(lambda c: c.execute(_SN.insert(), values))
        except UniqueViolationError:  # a repeat (its answer lost) gets the snapshot written
            repeated = repeated_snapshot(self._db, snapshot)
            if repeated is None:
                raise
            return repeated
        except ForeignKeyViolationError as exc:
            raise (
                first_missing(
                    self._db,
                    [
                        ("project", t.project, [snapshot.project_id]),
                        ("pipeline", t.pipeline, [snapshot.pipeline_id]),
                        ("stack", t.stack, [snapshot.stack_id]),
                    ],
                )
                or exc
            ) from None
        return SnapshotRecord.model_validate({**values, "spec": snapshot.spec})

    def get(self, snapshot_id: UUID) -> SnapshotRecord:
        stmt = select(_SN).where(_SN.c.id == snapshot_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("pipeline snapshot", snapshot_id)
        return _record(row)
