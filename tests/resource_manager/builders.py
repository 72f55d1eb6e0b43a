"""Readable builders for Resource Manager tests: pools, policies, requests, allocations.

Ids are derived from names (uuid5), times from seconds after ``T0``, so fixtures read like the
scenario they describe and every run is identical. Quantities are in base units unless a unit
is given (CPU base unit is mCPU; memory is bytes; GPU is GPU).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from wharf.core.enums import ReclaimTolerance, ResourceRequestStatus
from wharf.resource_manager.domain import (
    Allocation,
    AttributeSelector,
    CapacityClass,
    Demand,
    Grant,
    GrantResource,
    MissingAction,
    Policy,
    Pool,
    Reclaimable,
    ResourceRequest,
    SubjectChain,
    SubjectNode,
    SubjectSelector,
    SubjectType,
)
from wharf.resource_manager.scheduler import CycleDecisions, Snapshot, apply_decisions, schedule

T0 = datetime(2026, 1, 1, tzinfo=UTC)
NS = uuid.UUID("0b6f5a43-3c5e-4c55-9b7e-7a0f3d6c2e11")
GIB = 1024**3


def uid(name: str) -> UUID:
    return uuid.uuid5(NS, name)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


# -- pools -------------------------------------------------------------------------------------


def klass(
    name: str,
    *,
    rank: int = 0,
    reclaimable: str = "coordinated",
    concurrency_limit: int | None = None,
    target_settings: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
    **capacity: int | None,
) -> CapacityClass:
    return CapacityClass(
        name=name,
        capacity=dict(capacity),
        rank=rank,
        reclaimable=Reclaimable(reclaimable),
        concurrency_limit=concurrency_limit,
        target_settings=dict(target_settings or {}),
        attributes=dict(attributes or {}),
    )


def pool(
    name: str,
    *classes: CapacityClass,
    rank: int = 0,
    concurrency_limit: int | None = None,
    fair_sharing: bool = False,
    target_settings: Mapping[str, Any] | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Pool:
    return Pool(
        id=uid(f"pool:{name}"),
        name=name,
        rank=rank,
        classes=classes or (klass("default", GPU=8),),
        concurrency_limit=concurrency_limit,
        fair_sharing=fair_sharing,
        target_settings=dict(target_settings or {}),
        attributes=dict(attributes or {}),
    )


# -- policies ----------------------------------------------------------------------------------


def res(
    reserved: int = 0,
    limit: int | None = None,
    *,
    missing: str = "omit",
    default: int | None = None,
) -> GrantResource:
    return GrantResource(
        reserved=reserved,
        limit=limit,
        missing_action=MissingAction(missing),
        default_value=default,
    )


def grant(
    class_name: str, target_settings: Mapping[str, Any] | None = None, **resources: GrantResource
) -> Grant:
    return Grant(
        class_name=class_name,
        resources=dict(resources),
        target_settings=dict(target_settings or {}),
    )


def project(name: str) -> SubjectSelector:
    return SubjectSelector(subject_type=SubjectType.PROJECT, subject_id=name)


def policy(
    name: str,
    in_pool: Pool,
    *grants: Grant,
    selector: SubjectSelector | None = None,
    priority: int = 0,
    lane: bool = False,
    group: str | None = None,
    concurrency_limit: int | None = None,
    target_settings: Mapping[str, Any] | None = None,
    weight: int = 1,
) -> Policy:
    """A policy; by default it selects project ``name`` (so requests use ``project=name``)."""
    return Policy(
        id=uid(f"policy:{in_pool.name}:{name}"),
        name=name,
        pool_id=in_pool.id,
        subject_selector=selector or project(name),
        priority=priority,
        priority_lane=lane,
        preemption_group=group,
        concurrency_limit=concurrency_limit,
        grants=grants,
        target_settings=dict(target_settings or {}),
        fair_share_weight=weight,
    )


# -- requests ----------------------------------------------------------------------------------


def gpu(quantity: int, cls: str | None = None) -> Demand:
    return Demand(resource="GPU", quantity=quantity, class_name=cls)


def cpu(quantity: int, unit: str = "CPU", cls: str | None = None) -> Demand:
    return Demand(kind="cpu", quantity=quantity, unit=unit, class_name=cls)


def mem(quantity: int, unit: str = "GiB", cls: str | None = None) -> Demand:
    return Demand(kind="memory", quantity=quantity, unit=unit, class_name=cls)


def demand(resource: str, quantity: int, **kwargs: Any) -> Demand:
    return Demand(resource=resource, quantity=quantity, **kwargs)


def chains(project_id: str, name: str) -> tuple[SubjectChain, ...]:
    return (
        SubjectChain.of(
            ("organization", "org"),
            ("workspace", "ws"),
            ("project", project_id),
            ("pipeline_run", f"run-{name}"),
            ("step_run", f"step-{name}"),
        ),
        SubjectChain(
            nodes=(SubjectNode(subject_type=SubjectType.ACCOUNT, subject_id=f"user-{project_id}"),)
        ),
    )


def request(
    name: str,
    *demands: Demand,
    project: str = "team",
    created: float = 0,
    tolerance: str = "any",
    lease: float | None = None,
    wait_timeout: float | None = None,
    pool: str | None = None,
    pool_selector: AttributeSelector | None = None,
    group: SubjectSelector | None = None,
    status: ResourceRequestStatus = ResourceRequestStatus.PENDING,
) -> ResourceRequest:
    return ResourceRequest(
        id=uid(f"request:{name}"),
        subjects=chains(project, name),
        demands=demands or (gpu(1),),
        pool=pool,
        pool_selector=pool_selector,
        reclaim_tolerance=ReclaimTolerance(tolerance),
        preemption_group=group,
        status=status,
        created_at=at(created),
        lease_expires_at=at(created + lease) if lease is not None else None,
        allocation_deadline=at(created + wait_timeout) if wait_timeout is not None else None,
        metadata={"name": name},
    )


def holding(
    name: str,
    in_pool: Pool,
    by: Policy,
    amounts: Mapping[tuple[str, str], int],
    *,
    project: str | None = None,
    allocated: float = 0,
    tolerance: str = "any",
    lease: float | None = None,
    preempting: bool = False,
) -> ResourceRequest:
    """A request that already holds ``amounts`` ({(class, resource): base units})."""
    demands = tuple(
        Demand(resource=resource, quantity=quantity, unit=None, class_name=class_name)
        for (class_name, resource), quantity in amounts.items()
    )
    base = request(
        name,
        *demands,
        project=project or by.name,
        created=allocated,
        tolerance=tolerance,
        lease=lease,
    )
    allocations = tuple(
        Allocation(
            id=uid(f"allocation:{name}:{index}"),
            request_id=base.id,
            demand_index=index,
            pool_id=in_pool.id,
            class_name=class_name,
            resource=resource,
            resource_kind=resource.lower(),
            quantity=quantity,
            unit={"GPU": "GPU", "CPU": "mCPU"}.get(resource, "B"),
            base_quantity=quantity,
            policy_id=by.id,
            priority=by.effective_priority,
            priority_lane=by.priority_lane,
        )
        for index, ((class_name, resource), quantity) in enumerate(amounts.items())
    )
    status = ResourceRequestStatus.PREEMPTING if preempting else ResourceRequestStatus.ALLOCATED
    return base.model_copy(
        update={"status": status, "allocations": allocations, "allocated_at": at(allocated)}
    )


def snapshot(
    pools: Iterable[Pool], policies: Iterable[Policy], requests: Iterable[ResourceRequest]
) -> Snapshot:
    return Snapshot.of(pools=pools, policies=policies, requests=requests)


def names(ids: Iterable[UUID], requests: Iterable[ResourceRequest]) -> list[str]:
    """Map request ids back to their builder names, for readable assertions."""
    by_id = {r.id: r.metadata.get("name", str(r.id)) for r in requests}
    return [by_id[i] for i in ids]


def run(snap: Snapshot, seconds: float = 10) -> CycleDecisions:
    return schedule(snap, at(seconds))


def admitted(decisions: CycleDecisions, snap: Snapshot) -> list[str]:
    return names((a.request_id for a in decisions.admissions), snap.requests)


def preempted(decisions: CycleDecisions, snap: Snapshot) -> list[str]:
    return names((p.victim_id for p in decisions.preemptions), snap.requests)


def rejected(decisions: CycleDecisions, snap: Snapshot) -> dict[str, str]:
    found = names((r.request_id for r in decisions.rejections), snap.requests)
    return dict(zip(found, (r.reason for r in decisions.rejections), strict=True))


def waiting(decisions: CycleDecisions, snap: Snapshot) -> dict[str, str]:
    found = names((w.request_id for w in decisions.waits), snap.requests)
    return dict(zip(found, (w.reason for w in decisions.waits), strict=True))


def step(snap: Snapshot, seconds: float) -> tuple[Snapshot, CycleDecisions]:
    decisions = schedule(snap, at(seconds))
    return apply_decisions(snap, decisions), decisions
