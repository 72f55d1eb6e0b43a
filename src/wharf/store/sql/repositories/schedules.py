"""Schedules: when a snapshot of a pipeline runs by itself. Unique per (project, name).

The store keeps the trigger fields as given (the SDK's ``Schedule`` model validates them);
``set_active`` pauses and resumes; ``delete`` removes the row (runs it started stay).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Row, delete, select

from wharf.core.errors import EntityExistsError
from wharf.core.ids import new_id
from wharf.sql import exact
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.sql.types import as_utc
from wharf.store.models import Page, PageRequest, ScheduleCreate, ScheduleFilter, ScheduleRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    first_missing,
    id_prefix_condition,
    list_page,
    not_found,
)

_SC = t.schedule
DEFAULT_FILTER = ScheduleFilter()


def _record(row: Row[Any]) -> ScheduleRecord:
    return ScheduleRecord.model_validate(row._asdict())


class SqlScheduleRepository(SqlRepository):
    def create(self, schedule: ScheduleCreate) -> ScheduleRecord:
        check_name(schedule.name, "schedule")
        values: dict[str, Any] = {
            "id": new_id(),
            **schedule.model_dump(),
            "active": True,
            "created": self._db.now(),
        }
        for field in ("run_once_start_time", "start_time", "end_time"):
            values[field] = as_utc(values[field])
        try:
            self._db.write(lambda c: c.execute(_SC.insert(), values))
        except UniqueViolationError:
            raise EntityExistsError(
                f"A schedule named '{schedule.name}' already exists in project "
                f"{schedule.project_id}."
            ) from None
        except ForeignKeyViolationError as exc:
            raise (
                first_missing(
                    self._db,
                    [
                        ("project", t.project, [schedule.project_id]),
                        ("pipeline", t.pipeline, [schedule.pipeline_id]),
                        ("pipeline snapshot", t.pipeline_snapshot, [schedule.snapshot_id]),
                    ],
                )
                or exc
            ) from None
        return ScheduleRecord.model_validate(values)

    def get(self, schedule_id: UUID) -> ScheduleRecord:
        stmt = select(_SC).where(_SC.c.id == schedule_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("schedule", schedule_id)
        return _record(row)

    def list(
        self, filter: ScheduleFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ScheduleRecord]:
        conditions = [
            column == value
            for column, value in (
                (_SC.c.project_id, filter.project_id),
                (_SC.c.pipeline_id, filter.pipeline_id),
            )
            if value is not None
        ]
        if filter.name is not None:
            conditions.append(exact.equals(_SC.c.name, filter.name))
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_SC, filter.id_prefix))
        return list_page(self._db, _SC, conditions, page, _record)

    def set_active(self, schedule_id: UUID, active: bool) -> ScheduleRecord:
        def apply(conn: Connection) -> ScheduleRecord:
            # Read then write: MySQL's UPDATE row count excludes rows already holding the value.
            row = conn.execute(select(_SC).where(_SC.c.id == schedule_id).with_for_update()).first()
            if row is None:
                raise not_found("schedule", schedule_id)
            if row.active != active:
                conn.execute(_SC.update().where(_SC.c.id == schedule_id), {"active": active})
            return ScheduleRecord.model_validate({**row._asdict(), "active": active})

        return self._db.write(apply)

    def delete(self, schedule_id: UUID) -> None:
        def remove(conn: Connection) -> None:
            if conn.execute(delete(_SC).where(_SC.c.id == schedule_id)).rowcount == 0:
                raise not_found("schedule", schedule_id)

        self._db.write(remove)
