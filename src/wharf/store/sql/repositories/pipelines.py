"""Pipelines: one per (project, name), created on first use by ``get_or_create``.

``get_or_create`` is race-safe without locks: the unique constraint decides which concurrent
creator wins, and the losers read the winner's row.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Row, select

from wharf.core.ids import new_id
from wharf.sql import exact
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.models import Page, PageRequest, PipelineFilter, PipelineRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    id_prefix_condition,
    list_page,
    not_found,
)

_P = t.pipeline
DEFAULT_FILTER = PipelineFilter()


def _record(row: Row[Any]) -> PipelineRecord:
    return PipelineRecord.model_validate(row._asdict())


class SqlPipelineRepository(SqlRepository):
    def get_or_create(self, project_id: UUID, name: str) -> PipelineRecord:
        check_name(name, "pipeline")
        lookup = select(_P).where(_P.c.project_id == project_id, _P.c.name == name)
        row = self._db.read(lambda c: c.execute(lookup).first())
        if row is not None:
            return _record(row)
        values = {"id": new_id(), "project_id": project_id, "name": name, "created": self._db.now()}
        try:
            self._db.write(lambda c: c.execute(_P.insert(), values))
        except UniqueViolationError:
            # A concurrent caller created it first: theirs is the pipeline.
            row = self._db.read(lambda c: c.execute(lookup).first())
            if row is None:  # pragma: no cover - the winner's row cannot vanish
                raise
            return _record(row)
        except ForeignKeyViolationError:
            raise not_found("project", project_id) from None
        return PipelineRecord.model_validate(values)

    def get(self, pipeline_id: UUID) -> PipelineRecord:
        stmt = select(_P).where(_P.c.id == pipeline_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("pipeline", pipeline_id)
        return _record(row)

    def list(
        self, filter: PipelineFilter = DEFAULT_FILTER, page: PageRequest = DEFAULT_PAGE
    ) -> Page[PipelineRecord]:
        conditions = []
        if filter.project_id is not None:
            conditions.append(_P.c.project_id == filter.project_id)
        if filter.name is not None:
            conditions.append(exact.equals(_P.c.name, filter.name))
        if filter.id_prefix is not None:
            conditions.append(id_prefix_condition(_P, filter.id_prefix))
        return list_page(self._db, _P, conditions, page, _record)
