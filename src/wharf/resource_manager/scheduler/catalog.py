"""Phase 0a: index the snapshot's static configuration (descriptors, pools, classes, policies).

Owns: :class:`Catalog` and its views (:class:`PoolView`, :class:`ClassView`, :class:`SlotInfo`,
:class:`PolicyView`) and :class:`PolicyMatcher`.

A *slot* is one (pool, class, resource) triple, the unit of capacity accounting; slots, classes
and policies get dense integer indices. Invariants: every order is total (see :class:`Catalog`),
so every later phase is deterministic; a catalog depends on the configuration only, and each
cycle works on a :meth:`Catalog.fork`, so no cycle's stand-in policies leak into the next.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from wharf.resource_manager.domain.policies import PRIORITY_LANE_PRIORITY, Grant, Policy
from wharf.resource_manager.domain.pools import CapacityClass, Pool, Reclaimable
from wharf.resource_manager.domain.selectors import Anchor, SubjectSelector, SubjectSet
from wharf.resource_manager.domain.target_settings import merge_target_settings
from wharf.resource_manager.domain.units import ResourceDescriptor
from wharf.resource_manager.scheduler.snapshot import Snapshot


@dataclass(slots=True)
class SlotInfo:
    index: int
    pool_index: int
    class_index: int
    class_name: str
    resource: str
    descriptor: ResourceDescriptor
    capacity: int | None
    reclaimable: Reclaimable
    reserved_total: int = 0
    protected: bool = field(init=False)
    """Allocations here can never be reclaimed, so they must fit shares or unreserved (a
    field, not a property: route searches read it for every slot they try)."""

    def __post_init__(self) -> None:
        self.protected = self.reclaimable is Reclaimable.NEVER

    @property
    def unreserved(self) -> int | None:
        """Capacity no grant reserves; None when unlimited."""
        return None if self.capacity is None else self.capacity - self.reserved_total

    @property
    def unreserved_or_zero(self) -> int:
        return 0 if self.capacity is None else self.capacity - self.reserved_total


@dataclass(slots=True)
class ClassView:
    index: int
    pool_index: int
    spec: CapacityClass
    slots: dict[str, int] = field(default_factory=dict)
    """Resource name -> slot index."""


@dataclass(slots=True)
class PolicyView:
    index: int
    policy: Policy
    pool_index: int
    priority: int
    lane: bool
    grants: dict[int, Grant] = field(default_factory=dict)
    """Class index -> grant; empty for a grantless policy."""
    reserved: dict[int, int] = field(default_factory=dict)
    """Slot index -> reserved base units (only non-zero entries)."""
    limit: dict[int, int] = field(default_factory=dict)
    """Slot index -> explicit limit (absent: the class quantity)."""

    @property
    def grantless(self) -> bool:
        return not self.policy.grants


@dataclass(slots=True)
class PoolView:
    index: int
    pool: Pool
    classes: tuple[ClassView, ...] = ()
    policies: tuple[PolicyView, ...] = ()
    class_by_name: dict[str, ClassView] = field(default_factory=dict)


class PolicyMatcher:
    """Which policies match a request's subjects, using the selectors' anchors as an index.

    :meth:`match` returns exactly the policies whose selector matches, in policy order; the
    anchor index only avoids evaluating selectors that cannot match."""

    def __init__(self, policies: Iterable[PolicyView]) -> None:
        self._by_anchor: dict[Anchor, list[int]] = {}
        self._unanchored: list[int] = []
        self._views: dict[int, PolicyView] = {}
        self._tests: dict[int, Callable[[SubjectSet], bool]] = {}
        for view in policies:
            selector = view.policy.subject_selector
            self._views[view.index] = view
            self._tests[view.index] = selector.compile()
            anchors = selector.anchors()
            if anchors is None:
                self._unanchored.append(view.index)
                continue
            for anchor in sorted(anchors):
                self._by_anchor.setdefault(anchor, []).append(view.index)

    def match(self, subjects: SubjectSet) -> list[PolicyView]:
        candidates = set(self._unanchored)
        by_anchor = self._by_anchor
        for anchor in subjects.anchors():
            found = by_anchor.get(anchor)
            if found:
                candidates.update(found)
        tests = self._tests
        return [self._views[i] for i in sorted(candidates) if tests[i](subjects)]


class Catalog:
    """Dense, ordered indices over the static part of a snapshot.

    Pools are ordered by rank (higher first), then name, then id; classes by rank, then name;
    policies of a pool by priority lane, effective priority (higher first), then name, then id.
    Policies whose pool is not in the snapshot, and grants for unknown classes, are ignored
    (the service validates on save; a snapshot taken mid-change must not crash the cycle).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.descriptors: dict[str, ResourceDescriptor] = {d.name: d for d in snapshot.descriptors}
        kinds: dict[str, list[ResourceDescriptor]] = {}
        for descriptor in sorted(snapshot.descriptors, key=lambda d: d.name):
            kinds.setdefault(descriptor.kind, []).append(descriptor)
        self.kinds: dict[str, tuple[ResourceDescriptor, ...]] = {
            kind: tuple(items) for kind, items in kinds.items()
        }
        self.slots: list[SlotInfo] = []
        self.classes: list[ClassView] = []
        self.policies: list[PolicyView] = []
        self.pools: tuple[PoolView, ...] = ()
        self.pool_by_key: dict[str, PoolView] = {}
        self._settings: dict[tuple[UUID, int], dict[str, Any]] = {}
        self._build_pools(snapshot.pools)
        self._build_policies(snapshot.policies)
        self.matcher = PolicyMatcher(self.policies)
        self.policy_by_id: dict[UUID, PolicyView] = {v.policy.id: v for v in self.policies}
        self._owns_policies = True
        """False in a fork until it adds a stand-in (its lists are the base's until then)."""

    def fork(self) -> Catalog:
        """A catalog for one cycle: static indices shared, stand-in policies its own (the two
        collections a cycle may add detached stand-in policies to are copied on first write)."""
        clone = copy.copy(self)
        clone._owns_policies = False
        return clone

    def _build_pools(self, pools: Iterable[Pool]) -> None:
        views: list[PoolView] = []
        for pool in sorted(pools, key=lambda p: (-p.rank, p.name, str(p.id))):
            view = PoolView(index=len(views), pool=pool)
            class_views: list[ClassView] = []
            for spec in sorted(pool.classes, key=lambda c: (-c.rank, c.name)):
                class_view = ClassView(index=len(self.classes), pool_index=view.index, spec=spec)
                self.classes.append(class_view)
                class_views.append(class_view)
                for resource in sorted(spec.capacity):
                    descriptor = self.descriptors.get(resource)
                    if descriptor is None:
                        continue  # validated on save; an unknown resource offers nothing
                    slot = SlotInfo(
                        index=len(self.slots),
                        pool_index=view.index,
                        class_index=class_view.index,
                        class_name=spec.name,
                        resource=resource,
                        descriptor=descriptor,
                        capacity=spec.capacity[resource],
                        reclaimable=spec.reclaimable,
                    )
                    self.slots.append(slot)
                    class_view.slots[resource] = slot.index
            view.classes = tuple(class_views)
            view.class_by_name = {c.spec.name: c for c in class_views}
            views.append(view)
            self.pool_by_key[str(pool.id)] = view
            self.pool_by_key.setdefault(pool.name, view)
        self.pools = tuple(views)

    def _build_policies(self, policies: Iterable[Policy]) -> None:
        by_pool: dict[int, list[Policy]] = {}
        for policy in policies:
            pool_view = self.pool_by_key.get(str(policy.pool_id))
            if pool_view is not None:
                by_pool.setdefault(pool_view.index, []).append(policy)
        for pool_view in self.pools:
            ordered = sorted(
                by_pool.get(pool_view.index, []),
                key=lambda p: (-int(p.priority_lane), -p.effective_priority, p.name, str(p.id)),
            )
            views = [self._policy_view(pool_view, policy) for policy in ordered]
            pool_view.policies = tuple(views)

    def _policy_view(self, pool_view: PoolView, policy: Policy) -> PolicyView:
        view = PolicyView(
            index=len(self.policies),
            policy=policy,
            pool_index=pool_view.index,
            priority=policy.effective_priority,
            lane=policy.priority_lane,
        )
        for grant in policy.grants:
            class_view = pool_view.class_by_name.get(grant.class_name)
            if class_view is None:
                continue
            view.grants[class_view.index] = grant
            for resource, entry in grant.resources.items():
                slot_index = class_view.slots.get(resource)
                if slot_index is None:
                    continue
                if entry.reserved:
                    view.reserved[slot_index] = entry.reserved
                    self.slots[slot_index].reserved_total += entry.reserved
                if entry.limit is not None:
                    view.limit[slot_index] = entry.limit
        self.policies.append(view)
        return view

    def detached_policy(
        self, pool_index: int, policy_id: UUID, priority: int, lane: bool
    ) -> PolicyView:
        """A stand-in for an allocation's policy that is no longer configured.

        Its allocations still use capacity; they keep the priority they were admitted with and
        never match new requests. Must be called before the ledger is built.
        """
        known = self.policy_by_id.get(policy_id)
        if known is not None:
            return known
        if not self._owns_policies:
            self.policies = list(self.policies)
            self.policy_by_id = dict(self.policy_by_id)
            self._owns_policies = True
        pool = self.pools[pool_index].pool
        top = PRIORITY_LANE_PRIORITY - 1
        policy = Policy(
            id=policy_id,
            name=f"detached-{policy_id}",
            pool_id=pool.id,
            subject_selector=SubjectSelector(subject_id=f"detached-{policy_id}"),
            priority=0 if lane else max(-PRIORITY_LANE_PRIORITY, min(priority, top)),
            priority_lane=lane,
        )
        view = PolicyView(
            index=len(self.policies),
            policy=policy,
            pool_index=pool_index,
            priority=policy.effective_priority,
            lane=lane,
        )
        self.policies.append(view)
        self.policy_by_id[policy_id] = view
        return view

    def pool_of(self, slot: int) -> PoolView:
        return self.pools[self.slots[slot].pool_index]

    def target_settings(self, policy: PolicyView, class_index: int) -> dict[str, Any]:
        """pool < class < policy < grant, cached per (policy, class).

        Keyed by policy id, not index: the cache is shared by every fork, and stand-ins of
        different cycles may get the same index."""
        key = (policy.policy.id, class_index)
        cached = self._settings.get(key)
        if cached is None:
            class_view = self.classes[class_index]
            grant = policy.grants.get(class_index)
            cached = merge_target_settings(
                self.pools[policy.pool_index].pool.target_settings,
                class_view.spec.target_settings,
                policy.policy.target_settings,
                grant.target_settings if grant else None,
            )
            self._settings[key] = cached
        return cached
