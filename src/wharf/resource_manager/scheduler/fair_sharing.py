"""Optional weighted fair sharing between the policies of a pool (dominant resource share).

Owns: :func:`borrowed_share`, :func:`share_after`.

As in Kueue's fair sharing, a share counts only what a policy *borrows* (usage above its
reserved share): its largest borrowed fraction of any slot's capacity in the pool, divided by
its ``fair_share_weight``; the request whose policy would have the lowest share *after
admitting it* goes first among equals. Invariants: shares are exact integers (parts per million
of capacity, floor-divided), so ordering by them is deterministic; unlimited slots never count.
"""

from __future__ import annotations

from collections.abc import Sequence

from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Ledger

SCALE = 1_000_000


def borrowed_share(catalog: Catalog, ledger: Ledger, policy: PolicyView) -> int:
    """The policy's largest borrowed fraction of a slot's capacity now (ppm, unweighted)."""
    best = 0
    for class_view in catalog.pools[policy.pool_index].classes:
        for slot in class_view.slots.values():
            capacity = catalog.slots[slot].capacity
            if not capacity:
                continue
            borrowed = ledger.policy_usage(policy, slot) - policy.reserved.get(slot, 0)
            if borrowed > 0:
                best = max(best, borrowed * SCALE // capacity)
    return best


def share_after(
    catalog: Catalog,
    ledger: Ledger,
    policy: PolicyView,
    current: int,
    amounts: Sequence[tuple[int, int]],
) -> int:
    """The policy's weighted dominant share once ``amounts`` are added to its usage;
    ``current`` is its :func:`borrowed_share` on ``ledger``. Adding usage never lowers a slot's
    borrowed fraction, so this is the larger of ``current`` and the new fractions of the slots
    ``amounts`` touch: O(slots of the amounts), never a walk over the pool."""
    best = current
    for slot, amount in amounts:
        capacity = catalog.slots[slot].capacity
        if not capacity:
            continue
        borrowed = ledger.policy_usage(policy, slot) + amount - policy.reserved.get(slot, 0)
        if borrowed > 0:
            best = max(best, borrowed * SCALE // capacity)
    return best // policy.policy.fair_share_weight
