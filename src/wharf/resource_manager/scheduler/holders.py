"""Phase 0c: the requests that hold capacity, as the ledger and the preemptor see them.

Owns: :class:`Holder`, :class:`HolderIndex`, :func:`build_holders`.

Invariants:
- a holder is reclaimable only if its tolerance is above ``none`` and none of its slots is in
  a never-reclaimable class (an all-or-nothing allocation cannot be partly taken back);
- the newest allocations of a policy are its borrowers (:func:`compute_borrowed`);
- allocations whose pool, class or resource no longer exists are ignored for accounting;
  allocations whose policy was deleted are charged to a detached stand-in policy that keeps
  their admitted priority.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol
from uuid import UUID

from wharf.core.enums import ReclaimTolerance, ResourceRequestStatus
from wharf.resource_manager.domain.requests import ResourceRequest
from wharf.resource_manager.domain.selectors import SubjectSet
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Holding, merge_amounts

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class BorrowedOwner(Protocol):
    """Whoever computes the ``borrowed`` amounts of the holders it keeps, when first asked."""

    def settle_borrowed(self, holder: Holder) -> None: ...


@dataclass(slots=True, eq=False)
class Holder:
    """One allocated or preempting request: its per-slot amounts, the policy that admitted it,
    whether it can be reclaimed at all, and how much of it is *borrowed*."""

    request: ResourceRequest
    holding: Holding
    reclaimable: bool
    _borrowed: dict[int, int] = field(default_factory=dict)
    _owner: BorrowedOwner | None = None
    """Set for holders kept between cycles (:mod:`.holder_state`): it brings ``borrowed`` up
    to date before it is read."""
    _subjects: SubjectSet | None = None

    @property
    def borrowed(self) -> dict[int, int]:
        """Slot -> borrowed base units (only non-zero)."""
        if self._owner is not None:
            self._owner.settle_borrowed(self)
        return self._borrowed

    def kept_by(self, owner: BorrowedOwner) -> None:
        """From now on ``owner`` brings :attr:`borrowed` up to date before it is read."""
        self._owner = owner

    def set_borrowed(self, slot: int, amount: int) -> None:
        """Record what this holder borrows in ``slot`` (0: nothing)."""
        if amount:
            self._borrowed[slot] = amount
        else:
            self._borrowed.pop(slot, None)

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


Group = tuple[int, int]
"""(policy index, slot index): the scope in which ``borrowed`` is cumulative."""


@dataclass(slots=True)
class HolderIndex:
    """The holders of one cycle. Consumers must not depend on the order of :meth:`in_slot`
    or :attr:`by_group` (the preemptor sorts by a total key; :meth:`in_pool` is sorted by
    request id)."""

    by_id: dict[UUID, Holder] = field(default_factory=dict)
    by_group: dict[Group, dict[UUID, Holder]] = field(default_factory=dict)
    group_used: dict[Group, int] = field(default_factory=dict)
    """What a group's holders hold in its slot: the group borrows (some of its holders have
    ``borrowed`` in that slot) exactly when this exceeds the policy's reserved share."""
    slot_policies: dict[int, dict[int, PolicyView]] = field(default_factory=dict)
    """Slot -> the policies that have holders in it."""
    preempting: dict[UUID, Holder] = field(default_factory=dict)

    def add(self, holder: Holder) -> None:
        key = holder.request.id
        self.by_id[key] = holder
        if holder.preempting:
            self.preempting[key] = holder
        policy = holder.policy
        for slot, amount in holder.holding.amounts:
            group = (policy.index, slot)
            self.by_group.setdefault(group, {})[key] = holder
            self.group_used[group] = self.group_used.get(group, 0) + amount
            self.slot_policies.setdefault(slot, {})[policy.index] = policy

    def remove(self, holder: Holder) -> None:
        key = holder.request.id
        del self.by_id[key]
        self.preempting.pop(key, None)
        policy_index = holder.policy.index
        for slot, amount in holder.holding.amounts:
            group = (policy_index, slot)
            members = self.by_group[group]
            del members[key]
            self.group_used[group] -= amount
            if not members:
                del self.by_group[group], self.group_used[group]
                del self.slot_policies[slot][policy_index]

    def groups(self, slot: int) -> list[tuple[PolicyView, dict[UUID, Holder]]]:
        """The policies with holders in ``slot``, each with its holders there."""
        return [
            (policy, self.by_group[(policy_index, slot)])
            for policy_index, policy in self.slot_policies.get(slot, {}).items()
        ]

    def borrowing_groups(self, slot: int) -> list[tuple[PolicyView, dict[UUID, Holder]]]:
        """Those of :meth:`groups` some of whose holders borrow in ``slot``."""
        return [
            (policy, members)
            for policy, members in self.groups(slot)
            if self.group_used[(policy.index, slot)] > policy.reserved.get(slot, 0)
        ]

    def in_slot(self, slot: int) -> list[Holder]:
        """Every holder of ``slot`` (slots are numbered across pools)."""
        return [holder for _, members in self.groups(slot) for holder in members.values()]

    def in_pool(self, pool_index: int) -> list[Holder]:
        """Every holder of the pool, by request id (for explanations: it reads every holder)."""
        found = [h for h in self.by_id.values() if h.holding.pool_index == pool_index]
        return sorted(found, key=lambda h: h.request.id.int)


def allocation_order(holder: Holder) -> tuple[bool, datetime, int]:
    """The order in which holders fill their policy's reserved share: tolerance-``none``
    holders first, then by allocation time, then request id."""
    request = holder.request
    return (not holder.holding.pinned, request.allocated_at or request.created_at, request.id.int)


def make_holder(
    catalog: Catalog, request: ResourceRequest, holding: Holding | None = None
) -> Holder | None:
    """``request`` (which holds capacity) as a holder; None if nothing it holds still exists.

    ``holding``: what its allocations hold, when the caller knows it already (the admission
    that made them charged it)."""
    if holding is None:
        holding = _holding(catalog, request)
    if holding is None:
        return None
    reclaimable = request.reclaim_tolerance is not ReclaimTolerance.NONE and not any(
        catalog.slots[slot].protected for slot, _ in holding.amounts
    )
    return Holder(request=request, holding=holding, reclaimable=reclaimable)


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
        holder = make_holder(catalog, request)
        if holder is not None:
            index.add(holder)
    compute_borrowed(index.by_id.values())
    return index


def compute_borrowed(holders: Iterable[Holder]) -> None:
    """Set the ``borrowed`` amounts of ``holders``, which must be every holder of each
    (policy, slot) pair they hold in.

    Per (policy, slot), the policy's holders are walked in :func:`allocation_order`: the part
    of the cumulative usage above the policy's reserved share is borrowed, so the newest
    allocations are the borrowers, as in ZenML's v1 window function. Tolerance-``none``
    holders come first: they fit the reserved share by construction and can never give it
    back, so whatever exceeds the share is borrowed by reclaimable holders."""
    cumulative: dict[tuple[int, int], int] = {}
    for holder in sorted(holders, key=allocation_order):
        policy = holder.policy
        for slot, amount in holder.holding.amounts:
            key = (policy.index, slot)
            before = cumulative.get(key, 0)
            after = before + amount
            cumulative[key] = after
            reserved = policy.reserved.get(slot, 0)
            holder.set_borrowed(slot, max(0, after - reserved) - max(0, before - reserved))
