"""Service accounts (unique names) and their API keys (unique names per account).

Invariants:
- Keys are stored as the SHA-256 digest of their secret only; the secret never reaches the store.
- A key is revoked once (``revoked_at`` keeps its first value); revoked keys stay listed.
- ``touch`` writes ``last_used`` only when it is older than the given interval, in one
  conditional ``UPDATE`` (no read): authentication stays a read on most requests.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Row, select

from wharf.core.errors import EntityExistsError, EntityNotFoundError, InputError
from wharf.core.ids import new_id
from wharf.core.names import lookup_form
from wharf.sql.errors import ForeignKeyViolationError, UniqueViolationError
from wharf.store.account_models import ApiKeyAuthRecord, ApiKeyRecord, ServiceAccountRecord
from wharf.store.models import Page, PageRequest
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import (
    DEFAULT_PAGE,
    SqlRepository,
    check_name,
    list_page,
    not_found,
)

_SA = t.service_account
_K = t.api_key
_KEY_AND_ACCOUNT = select(*_K.c, *(c.label(f"sa_{c.name}") for c in _SA.c)).join_from(
    _K, _SA, _K.c.service_account_id == _SA.c.id
)


def _account(row: Row[Any] | dict[str, Any]) -> ServiceAccountRecord:
    return ServiceAccountRecord.model_validate(row if isinstance(row, dict) else row._asdict())


def _key(values: dict[str, Any]) -> ApiKeyRecord:
    values = {k: v for k, v in values.items() if k != "key_hash"}
    return ApiKeyRecord.model_validate(values)


class SqlServiceAccountRepository(SqlRepository):
    def create(
        self, name: str, *, description: str | None = None, is_admin: bool = False
    ) -> ServiceAccountRecord:
        name = check_name(name, "service account")
        values = {
            "id": new_id(),
            "name": name,
            "description": description,
            "is_admin": is_admin,
            "active": True,
            "created": self._db.now(),
        }
        try:
            self._db.write(lambda c: c.execute(_SA.insert(), values))
        except UniqueViolationError:
            raise EntityExistsError(f"A service account named '{name}' already exists.") from None
        return _account(values)

    def get(self, account_id: UUID) -> ServiceAccountRecord:
        row = self._db.read(lambda c: c.execute(select(_SA).where(_SA.c.id == account_id)).first())
        if row is None:
            raise not_found("service account", account_id)
        return _account(row)

    def get_by_name(self, name: str) -> ServiceAccountRecord:
        stored = lookup_form(name)
        stmt = select(_SA).where(_SA.c.name == stored)
        row = None if stored is None else self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise EntityNotFoundError(f"No service account named '{name}'.")
        return _account(row)

    def list(self, page: PageRequest = DEFAULT_PAGE) -> Page[ServiceAccountRecord]:
        return list_page(self._db, _SA, [], page, _account)

    def set_active(self, account_id: UUID, active: bool) -> ServiceAccountRecord:
        def apply(conn: Connection) -> ServiceAccountRecord:
            row = conn.execute(select(_SA).where(_SA.c.id == account_id).with_for_update()).first()
            if row is None:
                raise not_found("service account", account_id)
            if row.active != active:
                conn.execute(_SA.update().where(_SA.c.id == account_id), {"active": active})
            return _account({**row._asdict(), "active": active})

        return self._db.write(apply)


class SqlApiKeyRepository(SqlRepository):
    def create(self, service_account_id: UUID, name: str, key_hash: str) -> ApiKeyRecord:
        check_name(name, "API key")
        if len(key_hash) != 64:
            raise InputError("An API key hash must be a SHA-256 hex digest.")
        values = {
            "id": new_id(),
            "service_account_id": service_account_id,
            "name": name,
            "key_hash": key_hash,
            "created": self._db.now(),
            "last_used": None,
            "revoked_at": None,
        }
        try:
            self._db.write(lambda c: c.execute(_K.insert(), values))
        except UniqueViolationError:
            raise EntityExistsError(
                f"Service account {service_account_id} already has an API key named '{name}'."
            ) from None
        except ForeignKeyViolationError:
            raise not_found("service account", service_account_id) from None
        return _key(values)

    def get(self, key_id: UUID) -> ApiKeyRecord:
        row = self._db.read(lambda c: c.execute(select(_K).where(_K.c.id == key_id)).first())
        if row is None:
            raise not_found("API key", key_id)
        return _key(row._asdict())

    def get_for_auth(self, key_id: UUID) -> ApiKeyAuthRecord:
        stmt = _KEY_AND_ACCOUNT.where(_K.c.id == key_id)
        row = self._db.read(lambda c: c.execute(stmt).first())
        if row is None:
            raise not_found("API key", key_id)
        data = row._asdict()
        account = {k[3:]: v for k, v in data.items() if k.startswith("sa_")}
        key = {k: v for k, v in data.items() if not k.startswith("sa_")}
        return ApiKeyAuthRecord(key=_key(key), key_hash=key["key_hash"], account=_account(account))

    def list(
        self, service_account_id: UUID, page: PageRequest = DEFAULT_PAGE
    ) -> Page[ApiKeyRecord]:
        condition = _K.c.service_account_id == service_account_id
        return list_page(self._db, _K, [condition], page, lambda r: _key(r._asdict()))

    def revoke(self, key_id: UUID) -> ApiKeyRecord:
        def apply(conn: Connection) -> ApiKeyRecord:
            row = conn.execute(select(_K).where(_K.c.id == key_id).with_for_update()).first()
            if row is None:
                raise not_found("API key", key_id)
            values = row._asdict()
            if values["revoked_at"] is None:
                values["revoked_at"] = self._db.now()
                conn.execute(
                    _K.update().where(_K.c.id == key_id), {"revoked_at": values["revoked_at"]}
                )
            return _key(values)

        return self._db.write(apply)

    def touch(self, key_id: UUID, min_interval_seconds: float) -> None:
        now = self._db.now()
        stale = now - timedelta(seconds=min_interval_seconds)
        stmt = (
            _K.update()
            .where(_K.c.id == key_id, _K.c.last_used.is_(None) | (_K.c.last_used < stale))
            .values(last_used=now)
        )
        self._db.write(lambda c: c.execute(stmt))
