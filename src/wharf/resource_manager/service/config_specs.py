"""Wire specs of pools and policies -> validated domain models.

Owns :func:`pool_from_spec`, :func:`updated_pool`, :func:`policy_from_spec`,
:func:`updated_policy`, :func:`updated_descriptor`.

Invariants: every quantity is converted exactly with its resource's descriptor (ints are base
units, strings carry a unit), else an :class:`~wharf.core.errors.InputError` names the
pool/policy, class and resource; results went through the domain's validation, so only
consistent aggregates reach the database; Σ reserved ≤ capacity across policies is checked by
the caller, which knows the other policies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from uuid import UUID

from wharf.core.errors import InputError
from wharf.resource_manager.contract.models import (
    CapacityClassSpec,
    DescriptorUpdate,
    GrantSpec,
    PolicyCreate,
    PolicyUpdate,
    PoolCreate,
    PoolUpdate,
    QuantityValue,
)
from wharf.resource_manager.domain import (
    Policy,
    Pool,
    ResourceDescriptor,
    load,
    parse_quantity,
    validate_policy,
    validate_pool,
)

Descriptors = Mapping[str, ResourceDescriptor]


def base_quantity(
    descriptors: Descriptors, resource: str, value: QuantityValue | None, where: str
) -> int | None:
    descriptor = descriptors.get(resource)
    if descriptor is None:
        raise InputError(
            f"{where} names unknown resource '{resource}'; known resources: "
            f"{', '.join(sorted(descriptors))}."
        )
    if value is None or isinstance(value, int):
        return value
    return parse_quantity(descriptor, value)


def _class_data(spec: CapacityClassSpec, pool: str, descriptors: Descriptors) -> dict[str, Any]:
    where = f"Pool '{pool}' class '{spec.name}'"
    return {
        "name": spec.name,
        "capacity": {
            resource: base_quantity(descriptors, resource, value, where)
            for resource, value in spec.capacity.items()
        },
        "rank": spec.rank,
        "reclaimable": spec.reclaimable,
        "attributes": spec.attributes,
        "concurrency_limit": spec.concurrency_limit,
        "target_settings": spec.target_settings,
    }


def _pool(data: dict[str, Any], descriptors: Descriptors) -> Pool:
    pool = load(Pool, data)
    validate_pool(pool, descriptors)
    return pool


def pool_from_spec(spec: PoolCreate, pool_id: UUID, descriptors: Descriptors) -> Pool:
    data = spec.model_dump(exclude={"classes"})
    data["id"] = pool_id
    data["classes"] = [_class_data(c, spec.name, descriptors) for c in spec.classes]
    return _pool(data, descriptors)


def updated_pool(pool: Pool, update: PoolUpdate, descriptors: Descriptors) -> Pool:
    data = pool.model_dump()
    for name in update.model_fields_set:
        if name == "classes":
            classes = update.classes or ()
            data["classes"] = [_class_data(c, pool.name, descriptors) for c in classes]
        else:
            data[name] = getattr(update, name)
    return _pool(data, descriptors)


def _grant_data(spec: GrantSpec, policy: str, descriptors: Descriptors) -> dict[str, Any]:
    where = f"Policy '{policy}' grant for class '{spec.class_name}'"
    resources: dict[str, Any] = {}
    for resource, entry in spec.resources.items():
        resources[resource] = {
            "reserved": base_quantity(descriptors, resource, entry.reserved, where),
            "limit": base_quantity(descriptors, resource, entry.limit, where),
            "missing_action": entry.missing_action,
            "default_value": base_quantity(descriptors, resource, entry.default_value, where),
        }
    return {
        "class_name": spec.class_name,
        "resources": resources,
        "target_settings": spec.target_settings,
    }


def _policy(data: dict[str, Any], pool: Pool, descriptors: Descriptors) -> Policy:
    policy = load(Policy, data)
    validate_policy(policy, pool, descriptors)
    return policy


def policy_from_spec(
    spec: PolicyCreate, policy_id: UUID, pool: Pool, descriptors: Descriptors
) -> Policy:
    data = spec.model_dump(exclude={"grants", "pool", "subject_selector"})
    data.update(
        id=policy_id,
        pool_id=pool.id,
        subject_selector=spec.subject_selector,
        grants=[_grant_data(g, spec.name, descriptors) for g in spec.grants],
    )
    return _policy(data, pool, descriptors)


def updated_policy(
    policy: Policy, update: PolicyUpdate, pool: Pool, descriptors: Descriptors
) -> Policy:
    data: dict[str, Any] = dict(policy)
    data["grants"] = [g.model_dump() for g in policy.grants]
    for name in update.model_fields_set:
        if name == "grants":
            grants = update.grants or ()
            data["grants"] = [_grant_data(g, policy.name, descriptors) for g in grants]
        else:
            data[name] = getattr(update, name)
    return _policy(data, pool, descriptors)


def updated_descriptor(
    descriptor: ResourceDescriptor, update: DescriptorUpdate
) -> ResourceDescriptor:
    data = descriptor.model_dump()
    for name in update.model_fields_set:
        value = getattr(update, name)
        data[name] = [u.model_dump() for u in value] if name == "units" and value else value
    return load(ResourceDescriptor, data)
