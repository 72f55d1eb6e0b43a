"""Users: unique names; an admin flag. Users are never deleted (runs keep pointing at them)."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from sqlalchemy import Row, select

from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.core.ids import new_id
from wharf.core.names import lookup_form
from wharf.sql.errors import UniqueViolationError
from wharf.store.models import Page, PageRequest, UserRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    list_page,
    not_found,
)


def _record(row: Row[Any]) -> UserRecord:
    return UserRecord.model_validate(row._asdict())


class SqlUserRepository(SqlRepository):
    def create(self, name: str, *, is_admin: bool = False) -> UserRecord:
        name = check_name(name, "user")
        values = {"id": new_id(), "name": name, "is_admin": is_admin, "created": self._db.now()}
        try:
            self._db.write(lambda c: c.execute(t.user_account.insert(), values))
        except UniqueViolationError:
            raise EntityExistsError(f"A user named '{name}' already exists.") from None
        return UserRecord.model_validate(values)

    def get(self, user_id: UUID) -> UserRecord:
        stmt = select(t.user_account).where(t.user_account.c.id == user_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("user", user_id)
        return _record(row)

    def get_by_name(self, name: str) -> UserRecord:
        stored = lookup_form(name)
        stmt = select(t.user_account).where(t.user_account.c.name == stored)
        row = None if stored is None else self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"No user named '{name}'.")
        return _record(row)

    def list(self, page: PageRequest = DEFAULT_PAGE) -> Page[UserRecord]:
        return list_page(self._db, t.user_account, [], page, _record)
