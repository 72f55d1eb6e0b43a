"""Users' login data: password hashes, external identities, activation, token revocation.

Invariants: at most one credential row per user (keyed by the user id; a user without one cannot
log in), created (active) by its first change, a concurrent creator's row being updated instead;
an external id belongs to at most one user; ``set_admin`` is the only change ever made to a
``user_account`` row (external identity maps the provider's superuser flag on every login).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, select

from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.sql import exact
from wharf.sql.errors import UniqueViolationError
from wharf.store.account_models import UserCredentialRecord
from wharf.store.models import UserRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import SqlRepository, not_found
from wharf.store.sql.tables import NAME_LENGTH

_C = t.user_credential
_U = t.user_account


def _record(values: dict[str, Any]) -> UserCredentialRecord:
    return UserCredentialRecord.model_validate(values)


class SqlCredentialRepository(SqlRepository):
    def get(self, user_id: UUID) -> UserCredentialRecord:
        stmt = select(_C).where(_C.c.user_id == user_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"User {user_id} has no credentials.")
        return _record(row._asdict())

    def get_by_external_id(self, external_id: str) -> UserCredentialRecord:
        stmt = select(_C).where(exact.equals(_C.c.external_id, external_id))
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"No user is linked to external id '{external_id}'.")
        return _record(row._asdict())

    def set_password(self, user_id: UUID, password_hash: str | None) -> UserCredentialRecord:
        return self._upsert(user_id, lambda _: {"password_hash": password_hash})

    def link_external(self, user_id: UUID, external_id: str) -> UserCredentialRecord:
        if not external_id or len(external_id) > NAME_LENGTH:
            raise InputError(f"An external id must have 1 to {NAME_LENGTH} characters.")
        if external_id != external_id.strip():
            # MariaDB's unique key would take 'sub ' for 'sub' (its collation pads with spaces).
            raise InputError(
                f"An external id must not start or end with whitespace: {external_id!r}."
            )
        try:
            return self._upsert(user_id, lambda _: {"external_id": external_id})
        except UniqueViolationError:
            raise EntityExistsError(
                f"Another user is already linked to external id '{external_id}'."
            ) from None

    def set_active(self, user_id: UUID, active: bool) -> UserCredentialRecord:
        return self._upsert(user_id, lambda _: {"active": active})

    def deactivated(self, user_ids: Collection[UUID]) -> set[UUID]:
        if not user_ids:
            return set()
        stmt = select(_C.c.user_id).where(_C.c.user_id.in_(list(user_ids)), _C.c.active.is_(False))
        return set(self._db.read(lambda c: c.execute(stmt).scalars().all()))

    def revoke_tokens(self, user_id: UUID) -> UserCredentialRecord:
        """Increment ``token_generation`` under the row lock: every token issued in an earlier
        generation is refused by the server from then on."""
        return self._upsert(user_id, lambda row: {"token_generation": row + 1})

    def set_admin(self, user_id: UUID, is_admin: bool) -> UserRecord:
        def apply(conn: Connection) -> UserRecord:
            row = conn.execute(select(_U).where(_U.c.id == user_id).with_for_update()).first()
            if row is None:
                raise not_found("user", user_id)
            if row.is_admin != is_admin:
                conn.execute(_U.update().where(_U.c.id == user_id), {"is_admin": is_admin})
            return UserRecord.model_validate({**row._asdict(), "is_admin": is_admin})

        return self._db.write(apply)

    def _upsert(
        self, user_id: UUID, change: Callable[[int], dict[str, Any]]
    ) -> UserCredentialRecord:
        """Apply ``change(current token generation)`` to the user's row, created if missing."""

        def apply(conn: Connection) -> UserCredentialRecord:
            now = self._db.now()
            row = conn.execute(select(_C).where(_C.c.user_id == user_id).with_for_update()).first()
            if row is not None:
                values = {**change(row.token_generation), "updated": now}
                conn.execute(_C.update().where(_C.c.user_id == user_id), values)
                return _record({**row._asdict(), **values})
            values = {**change(0), "updated": now}
            if conn.execute(select(_U.c.id).where(_U.c.id == user_id)).first() is None:
                raise not_found("user", user_id)
            new = {
                "user_id": user_id,
                "password_hash": None,
                "external_id": None,
                "active": True,
                "token_generation": 0,
                **values,
            }
            conn.execute(_C.insert(), new)
            return _record(new)

        try:
            return self._db.write(apply)
        except UniqueViolationError as exc:
            if "external_id" in str(exc):
                raise
            # A concurrent writer created the user's row first (server replicas starting
            # together): it is there to lock now.
            return self._db.write(apply)
