"""Projects: unique names. Every pipeline, run, step run and artifact belongs to one."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Row, select

from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.core.ids import new_id
from wharf.core.names import lookup_form
from wharf.sql.errors import UniqueViolationError
from wharf.store.models import Page, PageRequest, ProjectRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    list_page,
    not_found,
)


def _record(row: Row[Any]) -> ProjectRecord:
    return ProjectRecord.model_validate(row._asdict())


class SqlProjectRepository(SqlRepository):
    def create(self, name: str) -> ProjectRecord:
        name = check_name(name, "project")
        values = {"id": new_id(), "name": name, "created": self._db.now()}
        try:
            self._db.write(lambda c: c.execute(t.project.insert(), values))
        except UniqueViolationError:
            raise EntityExistsError(f"A project named '{name}' already exists.") from None
        return ProjectRecord.model_validate(values)

    def get(self, project_id: UUID) -> ProjectRecord:
        stmt = select(t.project).where(t.project.c.id == project_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("project", project_id)
        return _record(row)

    def get_by_name(self, name: str) -> ProjectRecord:
        stored = lookup_form(name)
        stmt = select(t.project).where(t.project.c.name == stored)
        row = None if stored is None else self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"No project named '{name}'.")
        return _record(row)

    def list(self, page: PageRequest = DEFAULT_PAGE) -> Page[ProjectRecord]:
        return list_page(self._db, t.project, [], page, _record)
