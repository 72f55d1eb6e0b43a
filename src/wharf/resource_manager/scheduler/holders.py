"""Phase 0c: the requests that hold capacity, as the ledger and the preemptor see them.

Owns: :class:`Holder`, :class:`HolderIndex`, :func:`build_holders`.

Each allocated or preempting request becomes a :class:`Holder`: its per-slot amounts, the
policy that admitted it, whether it can be reclaimed at all, and how much of it is *borrowed*.
Borrowed is computed per (policy, slot) by walking the policy's holders in allocation order
(then request id): the part of the cumulative usage above the policy's reserved share is
borrowed, so the newest allocations are the borrowers, as in ZenML's v1 window function.
Tolerance-``none`` holders are walked first: they fit the reserved share by construction and
can never give it back, so whatever exceeds the share is borrowed by reclaimable holders.

Invariants:
- a holder is reclaimable only if its tolerance is above ``none`` and none of its slots is in
  a never-reclaimable class (an all-or-nothing allocation cannot be partly taken back);
- allocations whose pool, class or resource no longer exists are ignored for accounting (the
  configuration changed under them); allocations whose policy was deleted are charged to a
  detached stand-in policy that keeps their admitted priority.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from uuid import UUID

from wharf.core.enums import ReclaimTolerance, ResourceRequestStatus
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.domain.selectors import SubjectSet
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Holding, merge_amounts

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(slots=True, eq=False)
class Holder:
    request: ResourceRequest
    holding: Holding
    reclaimable: bool
    borrowed: dict[int, int] = field(default_factory=dict)
    """Slot -> borrowed base units (only non-zero)."""
    _subjects: SubjectSet | None = None

    @property
    def policy(self) -> PolicyView:
        return self.holding.policy

    @property
    def preempting(self) -> bool:
        return self.request.status is ResourceRequestStatus.PREEMPTING

    @property
    def subjects(self) -> SubjectSet:
        if self._subjects is None:
            self._subjects = SubjectSet.of(self.request.subjects)
        return self._subjects

    @property
    def age_key(self) -> timedelta:
        """Negated allocation time: sorts the newest allocation first."""
        allocated = self.request.allocated_at or self.request.created_at
        return -(allocated - EPOCH)


@dataclass(slots=True)
class HolderIndex:
    holders: list[Holder] = field(default_factory=list)
    by_pool_slot: dict[int, dict[int, list[Holder]]] = field(default_factory=dict)
    by_id: dict[UUID, Holder] = field(default_factory=dict)

    def in_slot(self, pool_index: int, slot: int) -> list[Holder]:
        return self.by_pool_slot.get(pool_index, {}).get(slot, [])

    def in_pool(self, pool_index: int) -> list[Holder]:
        seen: dict[UUID, Holder] = {}
        for holders in self.by_pool_slot.get(pool_index, {}).values():
            for holder in holders:
                seen.setdefault(holder.request.id, holder)
        return [seen[key] for key in sorted(seen, key=lambda u: u.int)]


def _holding(catalog: Catalog, request: ResourceRequest) -> Holding | None:
    if not request.allocations:
        return None
    first = request.allocations[0]
    pool_view = catalog.pool_by_key.get(str(first.pool_id))
    if pool_view is None:
        return None
    policy = catalog.detached_policy(
        pool_view.index, first.policy_id, first.priority, first.priority_lane
    )
    classes = pool_view.class_by_name
    pairs: list[tuple[int, int]] = []
    class_indices: set[int] = set()
    for allocation in request.allocations:
        class_view = classes.get(allocation.class_name)
        if class_view is None:
            continue
        slot = class_view.slots.get(allocation.resource)
        if slot is None:
            continue
        pairs.append((slot, allocation.base_quantity))
        class_indices.add(class_view.index)
    return Holding(
        policy=policy,
        pool_index=pool_view.index,
        amounts=merge_amounts(pairs),
        class_indices=tuple(sorted(class_indices)),
        pinned=request.reclaim_tolerance is ReclaimTolerance.NONE,
    )


def build_holders(catalog: Catalog, requests: Iterable[ResourceRequest]) -> HolderIndex:
    """Index the holding requests; call before building the ledger (may add stand-ins)."""
    index = HolderIndex()
    for request in sorted(
        (r for r in requests if r.holds_capacity),
        key=lambda r: (r.allocated_at or r.created_at, r.id.int),
    ):
        holding = _holding(catalog, request)
        if holding is None:
            continue
        reclaimable = request.reclaim_tolerance is not ReclaimTolerance.NONE and not any(
            catalog.slots[slot].protected for slot, _ in holding.amounts
        )
        holder = Holder(request=request, holding=holding, reclaimable=reclaimable)
        index.holders.append(holder)
        index.by_id[request.id] = holder
        pool_slots = index.by_pool_slot.setdefault(holding.pool_index, {})
        for slot, _ in holding.amounts:
            pool_slots.setdefault(slot, []).append(holder)
    _compute_borrowed(index)
    return index


def _compute_borrowed(index: HolderIndex) -> None:
    cumulative: dict[tuple[int, int], int] = {}
    pinned = [h for h in index.holders if h.holding.pinned]
    others = [h for h in index.holders if not h.holding.pinned]
    for holder in (*pinned, *others):  # each part already in allocation order
        policy = holder.policy
        for slot, amount in holder.holding.amounts:
            key = (policy.index, slot)
            before = cumulative.get(key, 0)
            after = before + amount
            cumulative[key] = after
            reserved = policy.reserved.get(slot, 0)
            borrowed = max(0, after - reserved) - max(0, before - reserved)
            if borrowed:
                holder.borrowed[slot] = borrowed
