"""Rows <-> domain models, for every Resource Manager table.

Owns the mapping only: no SQL statements, no rules. Each ``*_row(s)`` function returns the
parameters of an INSERT; each ``*_from_row(s)`` rebuilds a validated domain model.

Invariants:
- round trips are exact: ``pool_from_rows(pool_row(p), class_rows(p)) == p`` (and likewise for
  policies, descriptors and requests); class and grant order is kept through ``position``;
- selectors are stored as JSON with their wire aliases (``all``/``any``/``not``) and without
  defaults, so re-validating them yields the same model.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, cast
from uuid import UUID

from pydantic import BaseModel
from sqlalchemy import Row

from wharf.core.enums import ResourceRequestStatus
from wharf.resource_manager.domain import (
    Allocation,
    CapacityClass,
    Demand,
    Grant,
    Policy,
    Pool,
    ResourceDescriptor,
    ResourceRequest,
    SubjectChain,
    is_terminal,
)

RowMap = Mapping[str, Any]


def _json(model: BaseModel | None) -> Any:
    if model is None:
        return None
    return model.model_dump(mode="json", by_alias=True, exclude_defaults=True)


# ----------------------------------------------------------------------------- configuration


def descriptor_row(descriptor: ResourceDescriptor, *, stock: bool, now: datetime) -> dict[str, Any]:
    return {
        "name": descriptor.name,
        "kind": descriptor.kind,
        "units": [unit.model_dump(mode="json") for unit in descriptor.units],
        "default_unit": descriptor.default_unit,
        "attributes": descriptor.attributes,
        "description": descriptor.description,
        "stock": stock,
        "created": now,
        "updated": now,
    }


def descriptor_from_row(row: RowMap) -> ResourceDescriptor:
    return ResourceDescriptor(
        name=row["name"],
        kind=row["kind"],
        units=row["units"],
        default_unit=row["default_unit"],
        attributes=row["attributes"],
        description=row["description"],
    )


def pool_row(pool: Pool, now: datetime) -> dict[str, Any]:
    return {
        "id": pool.id,
        "name": pool.name,
        "rank": pool.rank,
        "attributes": pool.attributes,
        "concurrency_limit": pool.concurrency_limit,
        "target_settings": pool.target_settings,
        "fair_sharing": pool.fair_sharing,
        "created": now,
        "updated": now,
    }


def class_rows(pool: Pool) -> list[dict[str, Any]]:
    return [
        {
            "pool_id": pool.id,
            "name": item.name,
            "position": position,
            "capacity": item.capacity,
            "rank": item.rank,
            "reclaimable": item.reclaimable.value,
            "attributes": item.attributes,
            "concurrency_limit": item.concurrency_limit,
            "target_settings": item.target_settings,
        }
        for position, item in enumerate(pool.classes)
    ]


def pool_from_rows(row: RowMap, classes: Sequence[RowMap]) -> Pool:
    return Pool(
        id=row["id"],
        name=row["name"],
        rank=row["rank"],
        attributes=row["attributes"],
        concurrency_limit=row["concurrency_limit"],
        target_settings=row["target_settings"],
        fair_sharing=row["fair_sharing"],
        classes=tuple(
            CapacityClass(
                name=item["name"],
                capacity=item["capacity"],
                rank=item["rank"],
                reclaimable=item["reclaimable"],
                attributes=item["attributes"],
                concurrency_limit=item["concurrency_limit"],
                target_settings=item["target_settings"],
            )
            for item in sorted(classes, key=lambda c: int(c["position"]))
        ),
    )


def policy_row(policy: Policy, now: datetime) -> dict[str, Any]:
    return {
        "id": policy.id,
        "name": policy.name,
        "pool_id": policy.pool_id,
        "subject_selector": _json(policy.subject_selector),
        "priority": policy.priority,
        "priority_lane": policy.priority_lane,
        "preemption_group": policy.preemption_group,
        "concurrency_limit": policy.concurrency_limit,
        "target_settings": policy.target_settings,
        "fair_share_weight": policy.fair_share_weight,
        "created": now,
        "updated": now,
    }


def grant_rows(policy: Policy) -> list[dict[str, Any]]:
    return [
        {
            "policy_id": policy.id,
            "class_name": grant.class_name,
            "position": position,
            "resources": {
                name: entry.model_dump(mode="json") for name, entry in grant.resources.items()
            },
            "target_settings": grant.target_settings,
        }
        for position, grant in enumerate(policy.grants)
    ]


def policy_from_rows(row: RowMap, grants: Sequence[RowMap]) -> Policy:
    return Policy(
        id=row["id"],
        name=row["name"],
        pool_id=row["pool_id"],
        subject_selector=row["subject_selector"],
        priority=row["priority"],
        priority_lane=row["priority_lane"],
        preemption_group=row["preemption_group"],
        concurrency_limit=row["concurrency_limit"],
        target_settings=row["target_settings"],
        fair_share_weight=row["fair_share_weight"],
        grants=tuple(
            Grant(
                class_name=item["class_name"],
                resources=item["resources"],
                target_settings=item["target_settings"],
            )
            for item in sorted(grants, key=lambda g: int(g["position"]))
        ),
    )


# ----------------------------------------------------------------------------- requests


def request_row(
    request: ResourceRequest,
    *,
    requester: str,
    pool_id: UUID | None,
    seq: int,
    lease: Mapping[str, Any],
) -> dict[str, Any]:
    """The row of a new request: ``request`` neutral (see :func:`neutral`), ``lease`` its
    ``lease_expires_at`` and ``allocation_deadline``."""
    lease_expires_at = lease["lease_expires_at"]
    allocation_deadline = lease["allocation_deadline"]
    # ``lapse_at``: None once terminal; the lease while holding capacity; for a pending
    # request the earlier of its lease and its allocation deadline.
    if is_terminal(request.status):
        lapse = None
    elif request.status is ResourceRequestStatus.PENDING:
        lapse = lapse_at(lease_expires_at, allocation_deadline)
    else:
        lapse = lease_expires_at
    return {
        "id": request.id,
        "requester": requester,
        "status": request.status.value,
        "status_reason": request.status_reason,
        "runtime_state": request.runtime_state.value,
        "reclaim_tolerance": request.reclaim_tolerance.value,
        "pool": request.pool,
        "pool_selector": _json(request.pool_selector),
        "preemption_group": _json(request.preemption_group),
        "pool_id": pool_id,
        "created_at": request.created_at,
        "lease_expires_at": lease_expires_at,
        "allocation_deadline": allocation_deadline,
        "renewed_at": request.renewed_at,
        "allocated_at": request.allocated_at,
        "released_at": request.released_at,
        "preemption_initiated_by_id": request.preemption_initiated_by_id,
        "lapse_at": lapse,
        "seq": seq,
        "demands": [demand_entry(demand) for demand in request.demands],
        "allocations": allocation_entries(request.allocations),
    }


def lapse_at(lease: datetime | None, deadline: datetime | None) -> datetime | None:
    """When a pending request lapses: the earlier of its lease and its allocation deadline."""
    if lease is None or deadline is None:
        return lease or deadline
    return min(lease, deadline)


def demand_entry(demand: Demand) -> dict[str, Any]:
    """One element of ``rm_requests.demands``: the demand's fields by name, None left out."""
    entry: dict[str, Any] = {"quantity": demand.quantity}
    for name in ("resource", "kind", "unit", "class_name"):
        value = getattr(demand, name)
        if value is not None:
            entry[name] = value
    if demand.resource_selector is not None:
        entry["resource_selector"] = _json(demand.resource_selector)
    if demand.class_selector is not None:
        entry["class_selector"] = _json(demand.class_selector)
    return entry


def subject_rows(request: ResourceRequest) -> list[dict[str, Any]]:
    return [
        {
            "request_id": request.id,
            "chain": chain_index,
            "position": position,
            "subject_type": node.subject_type.value,
            "subject_id": node.subject_id,
            "attributes": node.attributes,
            "metadata": node.metadata,
        }
        for chain_index, chain in enumerate(request.subjects)
        for position, node in enumerate(chain.nodes)
    ]


def metadata_rows(request: ResourceRequest) -> list[dict[str, Any]]:
    return [
        {"request_id": request.id, "key": key, "value": value}
        for key, value in request.metadata.items()
    ]


def allocation_entries(allocations: Iterable[Allocation]) -> list[dict[str, Any]]:
    """``rm_requests.allocations``: each allocation's fields by name (the request id is the
    row's), None left out."""
    entries: list[dict[str, Any]] = []
    for item in allocations:
        entry: dict[str, Any] = {
            "id": str(item.id),
            "pool_id": str(item.pool_id),
            "class_name": item.class_name,
            "resource": item.resource,
            "resource_kind": item.resource_kind,
            "quantity": item.quantity,
            "unit": item.unit,
            "base_quantity": item.base_quantity,
            "policy_id": str(item.policy_id),
            "priority": item.priority,
            "priority_lane": item.priority_lane,
            "target_settings": item.target_settings,
        }
        if item.demand_index is not None:
            entry["demand_index"] = item.demand_index
        entries.append(entry)
    return entries


def allocations_from_entries(request_id: UUID, entries: Sequence[RowMap]) -> list[Allocation]:
    """Allocations of :func:`allocation_entries`, in demand order (grant defaults last)."""
    items = [
        Allocation.model_validate(
            {**entry, "request_id": request_id, "demand_index": entry.get("demand_index")}
        )
        for entry in entries
    ]
    return sorted(items, key=lambda a: (a.demand_index is None, a.demand_index or 0, a.resource))


def _demand(entry: RowMap) -> Demand:
    return Demand.model_validate(entry)


def _chains(rows: Sequence[RowMap]) -> tuple[SubjectChain, ...]:
    chains: dict[int, list[RowMap]] = {}
    for row in rows:
        chains.setdefault(int(row["chain"]), []).append(row)
    return tuple(
        SubjectChain.model_validate(
            {
                "nodes": [
                    {
                        "subject_type": node["subject_type"],
                        "subject_id": node["subject_id"],
                        "attributes": node["attributes"],
                        "metadata": node["metadata"],
                    }
                    for node in sorted(nodes, key=lambda n: int(n["position"]))
                ]
            }
        )
        for _, nodes in sorted(chains.items())
    )


def request_from_rows(
    row: RowMap, subjects: Sequence[RowMap], metadata: Sequence[RowMap]
) -> ResourceRequest:
    return ResourceRequest(
        id=row["id"],
        subjects=_chains(subjects),
        demands=tuple(_demand(entry) for entry in row["demands"]),
        pool=row["pool"],
        pool_selector=row["pool_selector"],
        reclaim_tolerance=row["reclaim_tolerance"],
        metadata={item["key"]: item["value"] for item in metadata},
        preemption_group=row["preemption_group"],
        status=row["status"],
        status_reason=row["status_reason"],
        runtime_state=row["runtime_state"],
        created_at=row["created_at"],
        lease_expires_at=row["lease_expires_at"],
        allocation_deadline=row["allocation_deadline"],
        renewed_at=row["renewed_at"],
        allocated_at=row["allocated_at"],
        released_at=row["released_at"],
        preemption_initiated_by_id=row["preemption_initiated_by_id"],
        allocations=tuple(allocations_from_entries(row["id"], row["allocations"])),
    )


def neutral(request: ResourceRequest) -> ResourceRequest:
    """``request`` without lease fields: how the scheduling cache holds it (see :mod:`.state`),
    because renewals change leases without the scheduling lock."""
    if request.lease_expires_at is None and request.allocation_deadline is None:
        return request
    return updated(request, {"lease_expires_at": None, "allocation_deadline": None})


def updated(request: ResourceRequest, changes: Mapping[str, Any]) -> ResourceRequest:
    """``request`` with ``changes`` (valid values of its fields), not validated again: callers
    pass values of the fields' types that come from validated models or stored rows."""
    return request.model_copy(update=changes)


def mapping(row: Row[Any]) -> RowMap:
    return cast(RowMap, row._mapping)
