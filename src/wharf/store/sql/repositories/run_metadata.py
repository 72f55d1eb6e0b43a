"""Run metadata: JSON values attached to a run, a step run or an artifact version.

Invariant: at most one row per (resource type, resource id, key), enforced by a unique
constraint. ``add`` replaces the row of a key it writes again, so "a later value wins" holds on
read without any ordering tie-break, and concurrent writers of the same key cannot leave two rows
(the loser's transaction conflicts and is retried, then replaces the winner's value).
"""

from __future__ import annotations

import builtins
import json
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import Connection, Table, delete, select

from wharf.core.enums import MetadataResourceType
from wharf.core.errors import InputError, StoreError
from wharf.core.ids import new_id
from wharf.sql import exact
from wharf.sql.engine import MAX_CONFLICT_RETRIES
from wharf.sql.errors import UniqueViolationError
from wharf.store.models import RunMetadataRecord
from wharf.store.sql import tables as t
from wharf.store.sql.repositories._base import SqlRepository, check_name, not_found

_M = t.run_metadata
_RESOURCES: dict[MetadataResourceType, tuple[str, Table]] = {
    MetadataResourceType.PIPELINE_RUN: ("pipeline run", t.pipeline_run),
    MetadataResourceType.STEP_RUN: ("step run", t.step_run),
    MetadataResourceType.ARTIFACT_VERSION: ("artifact version", t.artifact_version),
}


def check_values(values: dict[str, Any]) -> None:
    """Every key a valid name and every value JSON-serialisable (else ``InputError``)."""
    for key, value in values.items():
        check_name(key, "metadata key")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as exc:
            raise InputError(f"Metadata value of '{key}' is not JSON-serialisable: {exc}") from None


def insert_values(
    conn: Connection,
    now: datetime,
    resource_type: MetadataResourceType,
    resource_id: UUID,
    values: dict[str, Any],
) -> builtins.list[dict[str, Any]]:
    """Insert ``values`` (checked by :func:`check_values`) of a resource that has none of their
    keys yet, in the caller's transaction; the rows written."""
    rows = [
        {
            "id": new_id(),
            "resource_type": resource_type.value,
            "resource_id": resource_id,
            "key": key,
            "value": value,
            "created": now,
        }
        for key, value in values.items()
    ]
    if rows:
        conn.execute(_M.insert(), rows)
    return rows


class SqlRunMetadataRepository(SqlRepository):
    def add(
        self, resource_type: MetadataResourceType, resource_id: UUID, values: dict[str, Any]
    ) -> builtins.list[RunMetadataRecord]:
        check_values(values)
        kind, table = _RESOURCES[MetadataResourceType(resource_type)]

        def write(conn: Connection) -> builtins.list[dict[str, Any]]:
            if conn.execute(select(table.c.id).where(table.c.id == resource_id)).first() is None:
                raise not_found(kind, resource_id)
            if values:
                conn.execute(
                    delete(_M).where(
                        _M.c.resource_type == resource_type.value,
                        _M.c.resource_id == resource_id,
                        _M.c.key.in_(builtins.list(values)),
                    )
                )
            return insert_values(conn, self._db.now(), resource_type, resource_id, values)

        for _ in range(MAX_CONFLICT_RETRIES):
            try:
                rows = self._db.write(write)
            except UniqueViolationError:
                continue  # a concurrent writer added one of the keys; replace its value
            return [RunMetadataRecord.model_validate(r) for r in rows]
        raise StoreError(f"Could not add metadata to {kind} {resource_id}: too many conflicts.")

    def list(
        self, resource_type: MetadataResourceType, resource_id: UUID
    ) -> builtins.list[RunMetadataRecord]:
        stmt = (
            select(_M)
            .where(_M.c.resource_type == resource_type.value, _M.c.resource_id == resource_id)
            .order_by(_M.c.created, exact.in_code_point_order(_M.c.key))
        )
        rows = self._db.read(lambda c: c.execute(stmt).all())
        return [RunMetadataRecord.model_validate(r._asdict()) for r in rows]
