"""Project memberships: one role per (project, principal), the principal being a user or a
service account (exactly one of the two columns is set, checked here before any write).

``roles_of`` is what the server reads per request for a non-admin principal: one indexed
lookup (``user_id`` / ``service_account_id`` indexes).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, Row, select

from wharf.core.errors import EntityNotFoundError, InputError
from wharf.core.ids import new_id
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.account_models import MembershipRecord, ProjectRole
from wharf.store.models import Page, PageRequest
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import DEFAULT_PAGE, SqlRepository, first_missing, list_page

_M = t.project_member
MAX_RETRIES = 3


def _record(row: Row[Any] | dict[str, Any]) -> MembershipRecord:
    return MembershipRecord.model_validate(row if isinstance(row, dict) else row._asdict())


def _principal(user_id: UUID | None, service_account_id: UUID | None) -> ColumnElement[bool]:
    if (user_id is None) == (service_account_id is None):
        raise InputError("Name exactly one member: a user id or a service account id.")
    if user_id is not None:
        return _M.c.user_id == user_id
    return _M.c.service_account_id == service_account_id


class SqlMembershipRepository(SqlRepository):
    def set_role(
        self,
        project_id: UUID,
        role: ProjectRole,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> MembershipRecord:
        who = _principal(user_id, service_account_id)
        role = ProjectRole(role)

        def apply(conn: Connection) -> MembershipRecord:
            stmt = select(_M).where(_M.c.project_id == project_id, who).with_for_update()
            row = conn.execute(stmt).first()
            if row is not None:
                if row.role != role.value:
                    conn.execute(_M.update().where(_M.c.id == row.id), {"role": role.value})
                return _record({**row._asdict(), "role": role})
            values = {
                "id": new_id(),
                "project_id": project_id,
                "user_id": user_id,
                "service_account_id": service_account_id,
                "role": role.value,
                "created": self._db.now(),
            }
            conn.execute(_M.insert(), values)
            return _record(values)

        for _ in range(MAX_RETRIES):
            try:
                return self._db.write(apply)
            except UniqueViolationError:
                continue  # a concurrent writer added the same member: update theirs
            except ForeignKeyViolationError as exc:
                raise (
                    first_missing(
                        self._db,
                        [
                            ("project", t.project, [project_id]),
                            ("user", t.user_account, [user_id]),
                            ("service account", t.service_account, [service_account_id]),
                        ],
                    )
                    or exc
                ) from None
        return self._db.write(apply)

    def remove(
        self,
        project_id: UUID,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> None:
        who = _principal(user_id, service_account_id)

        def apply(conn: Connection) -> None:
            stmt = _M.delete().where(_M.c.project_id == project_id, who)
            if conn.execute(stmt).rowcount == 0:
                member = user_id or service_account_id
                raise EntityNotFoundError(f"{member} is not a member of project {project_id}.")

        self._db.write(apply)

    def role_of(
        self,
        project_id: UUID,
        *,
        user_id: UUID | None = None,
        service_account_id: UUID | None = None,
    ) -> ProjectRole | None:
        stmt = select(_M.c.role).where(
            _M.c.project_id == project_id, _principal(user_id, service_account_id)
        )
        value = self._db.read(lambda c: c.execute(stmt).scalar())
        return None if value is None else ProjectRole(value)

    def roles_of(
        self, *, user_id: UUID | None = None, service_account_id: UUID | None = None
    ) -> dict[UUID, ProjectRole]:
        stmt = select(_M.c.project_id, _M.c.role).where(_principal(user_id, service_account_id))
        rows = self._db.read(lambda c: c.execute(stmt).all())
        return {row.project_id: ProjectRole(row.role) for row in rows}

    def list(self, project_id: UUID, page: PageRequest = DEFAULT_PAGE) -> Page[MembershipRecord]:
        return list_page(self._db, _M, [_M.c.project_id == project_id], page, _record)
