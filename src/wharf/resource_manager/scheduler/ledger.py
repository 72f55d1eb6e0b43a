"""Phase 0b: usage counters for one cycle, built from the allocations that hold capacity.

Owns: :class:`Ledger` (and :class:`Holding`, one request's usage as the ledger sees it).

Invariants: counters only change through :meth:`Ledger.add` / :meth:`Ledger.remove`, so
``over`` is always consistent with per-policy usage; :meth:`Ledger.copy` gives an independent
ledger for trying a preemption without touching the real one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView


@dataclass(frozen=True, slots=True)
class Holding:
    """The usage one request adds to the ledger: per slot amounts and the scopes it counts in."""

    policy: PolicyView
    pool_index: int
    amounts: tuple[tuple[int, int], ...]
    """(slot index, base quantity) pairs; a slot appears at most once."""
    class_indices: tuple[int, ...]
    pinned: bool = False
    """Held by a request with reclaim tolerance ``none``: never reclaimable, never borrowing."""


def merge_amounts(pairs: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sum amounts per slot, keeping first-seen order (demands may share a slot)."""
    totals: dict[int, int] = {}
    for slot, amount in pairs:
        totals[slot] = totals.get(slot, 0) + amount
    return tuple(totals.items())


class Ledger:
    """Counters per slot (pool, class, resource): ``used`` (allocated + preempting),
    ``returning`` (the part held by preempting requests: it comes back when they release or
    lapse), ``claimed`` (capacity set aside this cycle for blocked queue heads) and ``over``
    (Σ over policies of their usage above their reserved share: for never-reclaimable slots it
    must stay ≤ the unreserved capacity, which keeps every reserved share honourable). Per
    (policy, slot): ``policy_used`` and ``pinned_used`` (the part held by tolerance-``none``
    requests, which can never be taken back, so in reclaimable slots it stays within the
    policy's reserved share). Per pool, class and policy: the number of holding requests (for
    concurrency limits)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        size = len(catalog.slots)
        self.used = [0] * size
        self.returning = [0] * size
        self.claimed = [0] * size
        self.over = [0] * size
        self.policy_used: dict[tuple[int, int], int] = {}
        self.pinned_used: dict[tuple[int, int], int] = {}
        self.pool_count = [0] * len(catalog.pools)
        self.class_count = [0] * len(catalog.classes)
        self.policy_count = [0] * len(catalog.policies)

    def copy(self) -> Ledger:
        clone = Ledger.__new__(Ledger)
        clone.catalog = self.catalog
        clone.used = list(self.used)
        clone.returning = list(self.returning)
        clone.claimed = list(self.claimed)
        clone.over = list(self.over)
        clone.policy_used = dict(self.policy_used)
        clone.pinned_used = dict(self.pinned_used)
        clone.pool_count = list(self.pool_count)
        clone.class_count = list(self.class_count)
        clone.policy_count = list(self.policy_count)
        return clone

    def _change(self, holding: Holding, sign: int, returning: bool) -> None:
        policy = holding.policy
        for slot, amount in holding.amounts:
            key = (policy.index, slot)
            before = self.policy_used.get(key, 0)
            after = before + sign * amount
            self.policy_used[key] = after
            reserved = policy.reserved.get(slot, 0)
            self.over[slot] += max(0, after - reserved) - max(0, before - reserved)
            self.used[slot] += sign * amount
            if returning:
                self.returning[slot] += sign * amount
            if holding.pinned:
                self.pinned_used[key] = self.pinned_used.get(key, 0) + sign * amount
        self.pool_count[holding.pool_index] += sign
        self.policy_count[policy.index] += sign
        for class_index in holding.class_indices:
            self.class_count[class_index] += sign

    def add(self, holding: Holding, *, returning: bool = False) -> None:
        self._change(holding, 1, returning)

    def remove(self, holding: Holding, *, returning: bool = False) -> None:
        self._change(holding, -1, returning)

    def mark_returning(self, holding: Holding) -> None:
        """A holder was asked to give its capacity back; it still holds it until it releases."""
        for slot, amount in holding.amounts:
            self.returning[slot] += amount

    def free(self, slot: int) -> int | None:
        """Capacity neither used nor claimed; None when unlimited."""
        capacity = self.catalog.slots[slot].capacity
        if capacity is None:
            return None
        return max(0, capacity - self.used[slot] - self.claimed[slot])

    def policy_usage(self, policy: PolicyView, slot: int) -> int:
        return self.policy_used.get((policy.index, slot), 0)

    def pinned_usage(self, policy: PolicyView, slot: int) -> int:
        return self.pinned_used.get((policy.index, slot), 0)

    def unused_reserved(self, policy: PolicyView, slot: int) -> int:
        return max(0, policy.reserved.get(slot, 0) - self.policy_usage(policy, slot))

    def claim(self, amounts: Sequence[tuple[int, int]]) -> None:
        """Set aside what is free (up to each amount) for a blocked head."""
        for slot, amount in amounts:
            free = self.free(slot)
            if free is not None:
                self.claimed[slot] += min(amount, free)
