"""The embedded default pool: ``local``, describing this machine, and a policy admitting the
local user.

Owns :func:`ensure_local_pool`, :func:`local_pool_spec` (see it for the pool's shape),
:func:`gpu_class_name`.

Invariant: :func:`ensure_local_pool` is idempotent and race-safe: calling it again (from any
process) converges to the same pool and policy, updating the pool only when the machine's
figures changed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from wharf.core import resource_kinds as kinds
from wharf.core.errors import EntityExistsError, EntityNotFoundError
from wharf.resource_manager.contract.models import (
    CapacityClassSpec,
    PolicyCreate,
    PolicyUpdate,
    PoolCreate,
    PoolUpdate,
)
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import Pool, Reclaimable, SubjectSelector, SubjectType

LOCAL_POOL = "local"
LOCAL_POLICY = "local-default"
DEFAULT_CLASS = "default"


def gpu_class_name(model: str) -> str:
    """``NVIDIA A100-SXM4-40GB`` -> ``gpu-nvidia-a100-sxm4-40gb``."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-") or "unknown"
    return f"gpu-{slug}"[:128]


def local_pool_spec(
    *, cpus: int, memory_bytes: int, gpus: Sequence[Mapping[str, Any]], isolated_step_slots: int
) -> PoolCreate:
    """The ``local`` pool for these figures.

    - class ``default``: every CPU (in mCPU) and all memory, never reclaimable;
    - one class per GPU model (``gpu-<model>``): that many GPUs, attributes ``model`` and
      ``memory_bytes``, never reclaimable;
    - pool concurrency limit ``isolated_step_slots``: at most that many requests hold capacity
      at once (each isolated step holds one request).
    """
    by_model: dict[str, list[Mapping[str, Any]]] = {}
    for gpu in gpus:
        by_model.setdefault(str(gpu.get("model") or gpu.get("name") or "unknown"), []).append(gpu)
    classes = [
        CapacityClassSpec(
            name=DEFAULT_CLASS,
            capacity={
                kinds.CPU.resource: cpus * kinds.CPU.multiplier(kinds.CPU.default_unit),
                kinds.MEMORY.resource: memory_bytes,  # bytes: memory's base unit
            },
            rank=0,
            reclaimable=Reclaimable.NEVER,
        )
    ]
    for model, items in sorted(by_model.items()):
        memory = items[0].get("memory_bytes")
        attributes: dict[str, str | int | bool] = {"model": model}
        if isinstance(memory, int):
            attributes["memory_bytes"] = memory
        classes.append(
            CapacityClassSpec(
                name=gpu_class_name(model),
                capacity={kinds.GPU.resource: len(items)},
                rank=1,
                reclaimable=Reclaimable.NEVER,
                attributes=attributes,
            )
        )
    figures = [cpus, memory_bytes, [dict(gpu) for gpu in gpus], isolated_step_slots]
    digest = hashlib.sha256(json.dumps(figures, sort_keys=True, default=str).encode()).hexdigest()
    return PoolCreate(
        name=LOCAL_POOL,
        classes=tuple(classes),
        attributes={"local": True, "machine": digest[:16]},
        concurrency_limit=isolated_step_slots,
    )


def ensure_local_pool(
    client: ResourceManagerClient,
    *,
    cpus: int,
    memory_bytes: int,
    gpus: Sequence[Mapping[str, Any]],
    isolated_step_slots: int,
    account_subject: str,
) -> Pool:
    """Create or update the ``local`` pool and its ``local-default`` policy; the pool.

    The policy selects the ``account`` subject ``account_subject`` and has no grants, so the
    whole machine is unreserved and any of the user's requests may use it. The figures the
    pool was last made from are kept in its ``machine`` attribute (a digest), so an
    administrator's edit of the pool (``wharf pool update local``) stays until the figures
    change, instead of being undone by the next command or run that opens the embedded
    Resource Manager.
    """
    spec = local_pool_spec(
        cpus=cpus, memory_bytes=memory_bytes, gpus=gpus, isolated_step_slots=isolated_step_slots
    )
    pool = _ensure_pool(client, spec)
    selector = SubjectSelector(subject_type=SubjectType.ACCOUNT, subject_id=account_subject)
    try:
        policy = client.policies.get(LOCAL_POLICY)
    except EntityNotFoundError:
        with contextlib.suppress(EntityExistsError):  # another process created it first
            client.policies.create(
                PolicyCreate(name=LOCAL_POLICY, pool=LOCAL_POOL, subject_selector=selector)
            )
        return pool
    if policy.subject_selector != selector or policy.grants:
        client.policies.update(LOCAL_POLICY, PolicyUpdate(subject_selector=selector, grants=()))
    return pool


def _ensure_pool(client: ResourceManagerClient, spec: PoolCreate) -> Pool:
    try:
        current = client.pools.get(LOCAL_POOL)
    except EntityNotFoundError:
        try:
            return client.pools.create(spec)
        except EntityExistsError:
            current = client.pools.get(LOCAL_POOL)
    if current.attributes.get("machine") == spec.attributes["machine"]:
        return current  # made from these figures: as made, or as an administrator edited it
    wanted = PoolUpdate(
        classes=spec.classes,
        attributes={**current.attributes, **spec.attributes},
        concurrency_limit=spec.concurrency_limit,
    )
    return client.pools.update(LOCAL_POOL, wanted)
