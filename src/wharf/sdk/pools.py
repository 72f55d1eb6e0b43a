"""Small conveniences over the Resource Manager for users of the embedded mode.

``ensure_pool`` creates (or updates) a pool with one capacity class, registering custom
resources it names (``license``, ``tpu``...) as descriptors with a single unit, and a policy
that admits the given account. It is idempotent: running a script twice changes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.core.resource_kinds import STOCK_RESOURCES, custom_kind
from wharf.resource_manager.contract.models import (
    CapacityClassSpec,
    PolicyCreate,
    PolicyUpdate,
    PoolCreate,
    PoolUpdate,
)
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.contract.values import (
    Pool,
    Reclaimable,
    SubjectSelector,
    SubjectType,
    descriptor_of,
)


def ensure_descriptor(client: ResourceManagerClient, name: str) -> None:
    if name in STOCK_RESOURCES:
        return
    try:
        client.descriptors.get(name)
    except EntityNotFoundError:
        with contextlib.suppress(EntityExistsError):
            client.descriptors.create(descriptor_of(custom_kind(name)))


def ensure_pool(
    client: ResourceManagerClient,
    name: str,
    capacity: Mapping[str, int | str],
    *,
    account: str,
    reclaimable: Reclaimable | str = Reclaimable.NEVER,
    priority: int = 0,
    policy: str | None = None,
    rank: int = 0,
) -> Pool:
    for resource in capacity:
        ensure_descriptor(client, resource)
    classes = (
        CapacityClassSpec(
            name="default", capacity=dict(capacity), reclaimable=Reclaimable(reclaimable)
        ),
    )
    try:
        client.pools.get(name)
        pool = client.pools.update(name, PoolUpdate(classes=classes, rank=rank))
    except EntityNotFoundError:
        pool = client.pools.create(PoolCreate(name=name, classes=classes, rank=rank))
    selector = SubjectSelector(subject_type=SubjectType.ACCOUNT, subject_id=account)
    policy_name = policy or f"{name}-{account}"
    try:
        client.policies.get(policy_name)
        client.policies.update(
            policy_name, PolicyUpdate(subject_selector=selector, priority=priority)
        )
    except EntityNotFoundError:
        client.policies.create(
            PolicyCreate(name=policy_name, pool=name, subject_selector=selector, priority=priority)
        )
    return pool
