"""Batched configuration operations: descriptors, pools and policies (create, update, delete).

They run in scheduling transactions because they change what the scheduler may decide: each
bumps ``config_version`` and triggers a cycle in the same transaction (a new pool can admit
waiting requests at once; a removed policy can reject them).

Invariants: only admins change the configuration (:func:`~.principal.require_admin`); names
are unique (:class:`EntityExistsError`); stock descriptors are read-only and a descriptor a pool
still offers cannot be deleted; Σ reserved ≤ capacity holds after every pool or policy save
(:func:`~wharf.resource_manager.domain.validate_reserved_totals`); a pool with live requests
cannot be deleted, nor a policy live allocations were made under, nor a class (or a class's
resource) that live allocations hold dropped; deleting a pool deletes its policies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar
from uuid import UUID

from wharf.core.errors import (
    EntityExistsError,
    IllegalOperationError,
    InputError,
)
from wharf.core.ids import new_id
from wharf.resource_manager.contract.models import (
    DescriptorUpdate,
    PolicyCreate,
    PolicyUpdate,
    PoolCreate,
    PoolUpdate,
)
from wharf.resource_manager.domain import (
    Policy,
    Pool,
    ResourceDescriptor,
    check_custom_name,
    check_unit_names,
    descriptors_by_name,
    validate_reserved_totals,
)
from wharf.resource_manager.service import config_specs, queries, request_store
from wharf.resource_manager.service import config_store as store
from wharf.resource_manager.service import tables as t
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.principal import Principal, require_admin
from wharf.resource_manager.service.transaction import Finisher, Tx

MAX_DESCRIPTION_LENGTH = 16_383
"""Longest descriptor description: what MySQL/MariaDB's ``TEXT`` holds (65,535 bytes) in
characters of up to 4 bytes, so every database keeps the same ones."""


def _check_description(descriptor: ResourceDescriptor) -> None:
    if len(descriptor.description) > MAX_DESCRIPTION_LENGTH:
        raise InputError(
            f"A resource descriptor's description takes at most {MAX_DESCRIPTION_LENGTH} "
            f"characters, got {len(descriptor.description)}."
        )


def _descriptors(tx: Tx) -> config_specs.Descriptors:
    return descriptors_by_name(list(tx.configuration().descriptors))


def _pool(tx: Tx, ref: str | UUID) -> Pool:
    pool = store.find_pool(tx.conn, ref)
    if pool is None:
        raise store.pool_not_found(tx.conn, ref)
    return pool


def _policy(tx: Tx, ref: str | UUID) -> Policy:
    policy = store.find_policy(tx.conn, ref)
    if policy is None:
        raise store.policy_not_found(tx.conn, ref)
    return policy


def _descriptor(tx: Tx, name: str, action: str) -> ResourceDescriptor:
    found = store.find_descriptor(tx.conn, name)
    if found is None:
        raise store.descriptor_not_found(tx.conn, name)
    descriptor, stock = found
    if stock:
        raise IllegalOperationError(f"The stock resource descriptor '{name}' cannot be {action}.")
    return descriptor


def _refuse_a_case_twin(tx: Tx, name: str) -> None:
    """Refuse a resource whose name differs from another's only in case (``License`` beside
    ``license``): a pool offering one and a step asking for the other never meet."""
    twin = next(
        (d.name for d in tx.configuration().descriptors if d.name.lower() == name.lower()), None
    )
    if twin is not None:
        raise EntityExistsError(
            f"Resource '{name}' differs from the existing resource '{twin}' only in case: use "
            f"'{twin}', or a name of its own."
        )


def _done(value: Any) -> Finisher:
    return lambda: value


# ----------------------------------------------------------------------------- descriptors


@dataclass(slots=True)
class CreateDescriptor:
    name: ClassVar[str] = "descriptors.create"
    result_type: ClassVar[Any] = ResourceDescriptor
    principal: Principal
    descriptor: ResourceDescriptor
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "create resource descriptors")
        check_custom_name(self.descriptor.name, self.descriptor.kind)
        check_unit_names(self.descriptor)
        _check_description(self.descriptor)
        if store.find_descriptor(tx.conn, self.descriptor.name) is not None:
            raise EntityExistsError(f"Resource descriptor '{self.descriptor.name}' already exists.")
        _refuse_a_case_twin(tx, self.descriptor.name)
        store.insert_descriptor(tx.conn, self.descriptor, tx.now)
        tx.config_written()
        return _done(self.descriptor)


@dataclass(slots=True)
class UpdateDescriptor:
    name: ClassVar[str] = "descriptors.update"
    result_type: ClassVar[Any] = ResourceDescriptor
    principal: Principal
    descriptor_name: str
    update: DescriptorUpdate
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "update resource descriptors")
        current = _descriptor(tx, self.descriptor_name, "changed")
        updated = config_specs.updated_descriptor(current, self.update)
        if self.update.units is not None:
            check_unit_names(updated)
        _check_description(updated)
        store.replace_descriptor(tx.conn, updated, tx.now)
        tx.config_written()
        return _done(updated)


@dataclass(slots=True)
class DeleteDescriptor:
    name: ClassVar[str] = "descriptors.delete"
    result_type: ClassVar[Any] = type(None)
    principal: Principal
    descriptor_name: str
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "delete resource descriptors")
        _descriptor(tx, self.descriptor_name, "deleted")
        offering = store.pools_offering(tx.conn, self.descriptor_name)
        if offering:
            raise IllegalOperationError(
                f"Resource descriptor '{self.descriptor_name}' is still offered by pools: "
                f"{', '.join(offering)}."
            )
        store.delete_descriptor(tx.conn, self.descriptor_name)
        tx.config_written()
        return _done(None)


# ----------------------------------------------------------------------------- pools


@dataclass(slots=True)
class CreatePool:
    name: ClassVar[str] = "pools.create"
    result_type: ClassVar[Any] = Pool
    principal: Principal
    spec: PoolCreate
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "create resource pools")
        if store.name_taken(tx.conn, t.pools, self.spec.name):
            raise EntityExistsError(f"Resource pool '{self.spec.name}' already exists.")
        pool = config_specs.pool_from_spec(self.spec, new_id(), _descriptors(tx))
        store.insert_pool(tx.conn, pool, tx.now)
        tx.config_written()
        return _done(pool)


@dataclass(slots=True)
class UpdatePool:
    name: ClassVar[str] = "pools.update"
    result_type: ClassVar[Any] = Pool
    principal: Principal
    pool: str | UUID
    update: PoolUpdate
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "update resource pools")
        current = _pool(tx, self.pool)
        descriptors = _descriptors(tx)
        updated = config_specs.updated_pool(current, self.update, descriptors)
        if store.name_taken(tx.conn, t.pools, updated.name, except_id=updated.id):
            raise EntityExistsError(f"Resource pool '{updated.name}' already exists.")
        validate_reserved_totals(updated, store.list_policies(tx.conn, updated.id), descriptors)
        _keep_held_classes(tx, updated)
        store.replace_pool(tx.conn, updated, tx.now)
        tx.config_written()
        return _done(updated)


def _keep_held_classes(tx: Tx, updated: Pool) -> None:
    """Refuse an update that drops a class, or a resource of a class, that live allocations
    hold: the scheduler counts usage only against the pool's classes, so what they hold would
    no longer be accounted and the pool would be overcommitted while they run."""
    offered = {(c.name, resource) for c in updated.classes for resource in c.capacity}
    held: dict[tuple[str, str], set[UUID]] = {}
    for allocation in queries.pool_allocations(tx.conn, updated.id):
        key = (allocation.class_name, allocation.resource)
        if key not in offered:
            held.setdefault(key, set()).add(allocation.request_id)
    if held:
        (class_name, resource), requests = min(held.items())
        raise IllegalOperationError(
            f"Resource pool '{updated.name}' cannot drop {resource} of class '{class_name}': "
            f"{len(requests)} live resource request(s) hold it; release them first."
        )


@dataclass(slots=True)
class DeletePool:
    name: ClassVar[str] = "pools.delete"
    result_type: ClassVar[Any] = type(None)
    principal: Principal
    pool: str | UUID
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "delete resource pools")
        current = _pool(tx, self.pool)
        live = request_store.count_live_in_pool(tx.conn, current.id)
        if live:
            raise IllegalOperationError(
                f"Resource pool '{current.name}' still has {live} live resource request(s); "
                "release or cancel them before deleting it."
            )
        store.delete_pool(tx.conn, current.id)
        tx.config_written()
        return _done(None)


# ----------------------------------------------------------------------------- policies


@dataclass(slots=True)
class CreatePolicy:
    name: ClassVar[str] = "policies.create"
    result_type: ClassVar[Any] = Policy
    principal: Principal
    spec: PolicyCreate
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "create resource policies")
        if store.name_taken(tx.conn, t.policies, self.spec.name):
            raise EntityExistsError(f"Resource policy '{self.spec.name}' already exists.")
        pool = _pool(tx, self.spec.pool)
        descriptors = _descriptors(tx)
        policy = config_specs.policy_from_spec(self.spec, new_id(), pool, descriptors)
        others = store.list_policies(tx.conn, pool.id)
        validate_reserved_totals(pool, [*others, policy], descriptors)
        store.insert_policy(tx.conn, policy, tx.now)
        tx.config_written()
        return _done(policy)


@dataclass(slots=True)
class UpdatePolicy:
    name: ClassVar[str] = "policies.update"
    result_type: ClassVar[Any] = Policy
    principal: Principal
    policy: str | UUID
    update: PolicyUpdate
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "update resource policies")
        current = _policy(tx, self.policy)
        pool = _pool(tx, current.pool_id)
        descriptors = _descriptors(tx)
        updated = config_specs.updated_policy(current, self.update, pool, descriptors)
        if store.name_taken(tx.conn, t.policies, updated.name, except_id=updated.id):
            raise EntityExistsError(f"Resource policy '{updated.name}' already exists.")
        others = [p for p in store.list_policies(tx.conn, pool.id) if p.id != updated.id]
        validate_reserved_totals(pool, [*others, updated], descriptors)
        store.replace_policy(tx.conn, updated, tx.now)
        tx.config_written()
        return _done(updated)


@dataclass(slots=True)
class DeletePolicy:
    name: ClassVar[str] = "policies.delete"
    result_type: ClassVar[Any] = type(None)
    principal: Principal
    policy: str | UUID
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        require_admin(self.principal, "delete resource policies")
        current = _policy(tx, self.policy)
        # As for a pool: what they hold would name a policy that is gone (its raw id).
        holders = {
            allocation.request_id
            for allocation in queries.pool_allocations(tx.conn, current.pool_id)
            if allocation.policy_id == current.id
        }
        if holders:
            raise IllegalOperationError(
                f"Resource policy '{current.name}' still has {len(holders)} live resource "
                "request(s) allocated under it; release or cancel them before deleting it."
            )
        store.delete_policy(tx.conn, current.id)
        tx.config_written()
        return _done(None)
