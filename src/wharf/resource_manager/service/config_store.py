"""SQL for the configuration: resource descriptors, pools (+ classes), policies (+ grants).

Owns every statement on those tables. Callers validate first (see :mod:`.config_ops`); these
functions only read and write whole aggregates: a pool is written with all its classes, a policy
with all its grants, so a half-written aggregate never exists.

Invariants: references accept an id or a name (:func:`find_pool`, :func:`find_policy`); lists
are ordered by name so every reader sees the same order; a reference that matches nothing is
refused with the close names there are (:func:`pool_not_found` and the like).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from sqlalchemy import ColumnElement, Connection, delete, select, update

from wharf.core.errors import EntityNotFoundError
from wharf.core.suggestions import did_you_mean
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor
from wharf.resource_manager.service import codec
from wharf.resource_manager.service import tables as t
from wharf.sql import exact


@dataclass(frozen=True, slots=True)
class Configuration:
    descriptors: tuple[ResourceDescriptor, ...]
    pools: tuple[Pool, ...]
    policies: tuple[Policy, ...]


def load_configuration(conn: Connection) -> Configuration:
    return Configuration(
        descriptors=tuple(list_descriptors(conn)),
        pools=tuple(list_pools(conn)),
        policies=tuple(list_policies(conn)),
    )


def as_uuid(ref: str | UUID) -> UUID | None:
    if isinstance(ref, UUID):
        return ref
    try:
        return UUID(ref)
    except ValueError:
        return None


def _not_found(conn: Connection, kind: str, table: Any, ref: str | UUID) -> EntityNotFoundError:
    names = conn.execute(select(table.c.name)).scalars()
    return EntityNotFoundError(f"{kind} '{ref}' not found{did_you_mean(str(ref), names) or '.'}")


def pool_not_found(conn: Connection, ref: str | UUID) -> EntityNotFoundError:
    """The error for a pool reference that matches none: ``Resource pool 'lcal' not found;
    did you mean 'local'?`` when a pool's name is close."""
    return _not_found(conn, "Resource pool", t.pools, ref)


def policy_not_found(conn: Connection, ref: str | UUID) -> EntityNotFoundError:
    return _not_found(conn, "Resource policy", t.policies, ref)


def descriptor_not_found(conn: Connection, name: str) -> EntityNotFoundError:
    return _not_found(conn, "Resource descriptor", t.descriptors, name)


# ----------------------------------------------------------------------------- descriptors


def list_descriptors(conn: Connection) -> list[ResourceDescriptor]:
    rows = conn.execute(
        select(t.descriptors).order_by(exact.in_code_point_order(t.descriptors.c.name))
    )
    return [codec.descriptor_from_row(codec.mapping(row)) for row in rows]


def find_descriptor(conn: Connection, name: str) -> tuple[ResourceDescriptor, bool] | None:
    """(descriptor, stock) or None."""
    row = conn.execute(
        select(t.descriptors).where(exact.equals(t.descriptors.c.name, name))
    ).first()
    if row is None:
        return None
    return codec.descriptor_from_row(codec.mapping(row)), bool(row.stock)


def insert_descriptor(conn: Connection, descriptor: ResourceDescriptor, now: datetime) -> None:
    conn.execute(t.descriptors.insert(), codec.descriptor_row(descriptor, stock=False, now=now))


def replace_descriptor(conn: Connection, descriptor: ResourceDescriptor, now: datetime) -> None:
    row = codec.descriptor_row(descriptor, stock=False, now=now)
    for column in ("name", "stock", "created"):
        row.pop(column)
    conn.execute(
        update(t.descriptors)
        .where(exact.equals(t.descriptors.c.name, descriptor.name))
        .values(**row)
    )


def delete_descriptor(conn: Connection, name: str) -> None:
    conn.execute(delete(t.descriptors).where(exact.equals(t.descriptors.c.name, name)))


def pools_offering(conn: Connection, resource: str) -> list[str]:
    """Names of the pools with a class that offers ``resource``."""
    statement = select(t.pools.c.name, t.capacity_classes.c.capacity).join(
        t.capacity_classes, t.capacity_classes.c.pool_id == t.pools.c.id
    )
    return sorted({row.name for row in conn.execute(statement) if resource in row.capacity})


# ----------------------------------------------------------------------------- pools


def list_pools(conn: Connection) -> list[Pool]:
    rows = [
        codec.mapping(r)
        for r in conn.execute(select(t.pools).order_by(exact.in_code_point_order(t.pools.c.name)))
    ]
    classes: dict[UUID, list[codec.RowMap]] = {}
    for row in conn.execute(select(t.capacity_classes)):
        mapped = codec.mapping(row)
        classes.setdefault(mapped["pool_id"], []).append(mapped)
    return [codec.pool_from_rows(row, classes.get(row["id"], [])) for row in rows]


def _by_ref(table: Any, ref_id: UUID | None, ref: str | UUID) -> ColumnElement[bool]:
    """Rows of ``table`` with id ``ref_id`` if given, else named exactly ``ref``."""
    if ref_id is not None:
        return table.c.id == ref_id  # type: ignore[no-any-return]
    return exact.equals(table.c.name, str(ref))


def find_pool(conn: Connection, ref: str | UUID) -> Pool | None:
    pool_id = as_uuid(ref)
    row = conn.execute(select(t.pools).where(_by_ref(t.pools, pool_id, ref))).first()
    if row is None and pool_id is not None and isinstance(ref, str):
        row = conn.execute(select(t.pools).where(exact.equals(t.pools.c.name, ref))).first()
    if row is None:
        return None
    mapped = codec.mapping(row)
    classes = conn.execute(
        select(t.capacity_classes).where(t.capacity_classes.c.pool_id == mapped["id"])
    )
    return codec.pool_from_rows(mapped, [codec.mapping(c) for c in classes])


def name_taken(conn: Connection, table: Any, name: str, except_id: UUID | None = None) -> bool:
    statement = select(table.c.id).where(exact.equals(table.c.name, name))
    if except_id is not None:
        statement = statement.where(table.c.id != except_id)
    return conn.execute(statement).first() is not None


def insert_pool(conn: Connection, pool: Pool, now: datetime) -> None:
    conn.execute(t.pools.insert(), codec.pool_row(pool, now))
    conn.execute(t.capacity_classes.insert(), codec.class_rows(pool))


def replace_pool(conn: Connection, pool: Pool, now: datetime) -> None:
    row = codec.pool_row(pool, now)
    for column in ("id", "created"):
        row.pop(column)
    conn.execute(update(t.pools).where(t.pools.c.id == pool.id).values(**row))
    conn.execute(delete(t.capacity_classes).where(t.capacity_classes.c.pool_id == pool.id))
    conn.execute(t.capacity_classes.insert(), codec.class_rows(pool))


def delete_pool(conn: Connection, pool_id: UUID) -> None:
    """Delete a pool with its classes, policies and grants (children first: no cascade needed)."""
    policy_ids = list(conn.execute(select(t.policies.c.id).where(t.policies.c.pool_id == pool_id)))
    if policy_ids:
        ids = [row.id for row in policy_ids]
        conn.execute(delete(t.grants).where(t.grants.c.policy_id.in_(ids)))
        conn.execute(delete(t.policies).where(t.policies.c.id.in_(ids)))
    conn.execute(delete(t.capacity_classes).where(t.capacity_classes.c.pool_id == pool_id))
    conn.execute(delete(t.pools).where(t.pools.c.id == pool_id))


# ----------------------------------------------------------------------------- policies


def list_policies(conn: Connection, pool_id: UUID | None = None) -> list[Policy]:
    statement = select(t.policies).order_by(exact.in_code_point_order(t.policies.c.name))
    if pool_id is not None:
        statement = statement.where(t.policies.c.pool_id == pool_id)
    rows = [codec.mapping(r) for r in conn.execute(statement)]
    return _with_grants(conn, rows)


def _with_grants(conn: Connection, rows: Sequence[codec.RowMap]) -> list[Policy]:
    if not rows:
        return []
    grants: dict[UUID, list[codec.RowMap]] = {}
    ids = [row["id"] for row in rows]
    for row in conn.execute(select(t.grants).where(t.grants.c.policy_id.in_(ids))):
        mapped = codec.mapping(row)
        grants.setdefault(mapped["policy_id"], []).append(mapped)
    return [codec.policy_from_rows(row, grants.get(row["id"], [])) for row in rows]


def find_policy(conn: Connection, ref: str | UUID) -> Policy | None:
    policy_id = as_uuid(ref)
    row = conn.execute(select(t.policies).where(_by_ref(t.policies, policy_id, ref))).first()
    if row is None and policy_id is not None and isinstance(ref, str):
        row = conn.execute(select(t.policies).where(exact.equals(t.policies.c.name, ref))).first()
    if row is None:
        return None
    found = _with_grants(conn, [codec.mapping(row)])
    return found[0]


def insert_policy(conn: Connection, policy: Policy, now: datetime) -> None:
    conn.execute(t.policies.insert(), codec.policy_row(policy, now))
    rows = codec.grant_rows(policy)
    if rows:
        conn.execute(t.grants.insert(), rows)


def replace_policy(conn: Connection, policy: Policy, now: datetime) -> None:
    row = codec.policy_row(policy, now)
    for column in ("id", "created", "pool_id"):
        row.pop(column)
    conn.execute(update(t.policies).where(t.policies.c.id == policy.id).values(**row))
    conn.execute(delete(t.grants).where(t.grants.c.policy_id == policy.id))
    rows = codec.grant_rows(policy)
    if rows:
        conn.execute(t.grants.insert(), rows)


def delete_policy(conn: Connection, policy_id: UUID) -> None:
    conn.execute(delete(t.grants).where(t.grants.c.policy_id == policy_id))
    conn.execute(delete(t.policies).where(t.policies.c.id == policy_id))
