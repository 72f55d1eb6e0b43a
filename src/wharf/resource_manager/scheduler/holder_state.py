"""The holders and their usage, kept between cycles of one configuration and changed only where
requests changed.

Owns: :class:`HolderState` (it lives in a configuration's :class:`~.prepared.Prepared` index).

Invariants: a holder is kept only while its request is the *very object* it was made from
(requests are immutable), so a kept holder is what :func:`.holders.make_holder` would make from
it now; after :meth:`HolderState.update` the index and ledger equal what
:func:`.holders.build_holders` and ``Ledger.add`` would give from the holding requests.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from wharf.resource_manager.domain.requests import Allocation, ResourceRequest
from wharf.resource_manager.scheduler.catalog import Catalog
from wharf.resource_manager.scheduler.holders import (
    Group,
    Holder,
    HolderIndex,
    allocation_order,
    make_holder,
)
from wharf.resource_manager.scheduler.ledger import Holding, Ledger


class HolderState:
    """The holder index and the ledger of every holding, brought up to date each cycle."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog
        self.admitted: dict[int, tuple[tuple[Allocation, ...], Holding]] = {}
        """The latest cycle's admissions (``Admitter.held``): ``request.id.int`` ->
        (allocations, holding). A request holding the very allocations tuple of one gets that
        admission's holding instead of one derived again from its allocations: the route it was
        admitted on is exactly what they hold."""
        self._reset()

    def _reset(self) -> None:
        self.index = HolderIndex()
        self.ledger = Ledger(self._catalog)
        """Usage of every holder (preempting ones' also counted as returning)."""
        self._by_object: dict[int, Holder] = {}
        """``id(request)`` -> its holder. Safe as a key: the holder keeps the request alive."""
        self._ignored: dict[int, ResourceRequest] = {}
        """Holding requests whose pool no longer exists (kept so they are not looked at again)."""
        self._dirty: set[Group] = set()
        """Groups whose members changed since their ``borrowed`` was last computed."""

    def update(self, holding: Sequence[ResourceRequest]) -> HolderIndex | None:
        """Make the state hold exactly ``holding`` (requests that hold capacity); the index,
        or None if one of them needs a stand-in policy (its policy was deleted: then the state
        is emptied and the cycle builds its holders from scratch). Every counter is a sum, so
        order does not matter; ``borrowed`` is recomputed per changed (policy, slot) group."""
        current = dict(zip(map(id, holding), holding, strict=True))
        known, ignored = self._by_object, self._ignored
        # Set operations on the keys: most holders are unchanged, and touching each one in
        # Python would again cost in proportion to every live allocation.
        for key in known.keys() - current.keys():
            self._drop(known.pop(key))
        for key in ignored.keys() - current.keys():
            del ignored[key]
        policies, admitted = self._catalog.policy_by_id, self.admitted
        for key in current.keys() - known.keys() - ignored.keys():
            request = current[key]
            allocations = request.allocations
            if allocations and allocations[0].policy_id not in policies:
                self._reset()
                return None
            made = admitted.get(request.id.int)
            charged = made[1] if made is not None and made[0] is allocations else None
            holder = make_holder(self._catalog, request, charged)
            if holder is None:
                ignored[key] = request
            else:
                self._keep(holder)
                known[key] = holder
        return self.index

    def settle_borrowed(self, holder: Holder) -> None:
        """Recompute ``borrowed`` in those of ``holder``'s groups whose members changed since
        they were last computed (a holder reads it through here)."""
        dirty = self._dirty
        if not dirty:
            return
        for group in _groups_of(holder):
            if group in dirty:
                dirty.discard(group)
                members = self.index.by_group.get(group)
                if members:
                    _settle_group(group, members.values())

    def _keep(self, holder: Holder) -> None:
        holder.kept_by(self)
        self.index.add(holder)
        self.ledger.add(holder.holding, returning=holder.preempting)
        self._dirty.update(_groups_of(holder))

    def _drop(self, holder: Holder) -> None:
        self.index.remove(holder)
        self.ledger.remove(holder.holding, returning=holder.preempting)
        self._dirty.update(_groups_of(holder))


def _groups_of(holder: Holder) -> list[Group]:
    policy_index = holder.holding.policy.index
    return [(policy_index, slot) for slot, _ in holder.holding.amounts]


def _settle_group(group: Group, members: Iterable[Holder]) -> None:
    """``borrowed`` of one (policy, slot) group: the part of the cumulative usage, in
    allocation order, above the policy's reserved share (as :func:`.holders.compute_borrowed`)."""
    _, slot = group
    cumulative = 0
    for holder in sorted(members, key=allocation_order):
        reserved = holder.holding.policy.reserved.get(slot, 0)
        amount = dict(holder.holding.amounts)[slot]
        before, cumulative = cumulative, cumulative + amount
        holder.set_borrowed(slot, max(0, cumulative - reserved) - max(0, before - reserved))
