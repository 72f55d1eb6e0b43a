"""Optional weighted fair sharing between the policies of a pool (dominant resource share).

Owns: :func:`borrowed_share`, :func:`share_after`.

As in Kueue's fair sharing, a tenant's share counts only what it *borrows*: usage above its
reserved share. Its dominant resource share is the largest borrowed fraction of any slot's
capacity in the pool, divided by the policy's ``fair_share_weight``. Among requests of equal
priority, the one whose policy would have the lowest share *after admitting it* goes first, so
a tenant that already borrowed a lot, or asks for a lot, yields to one that would stay lower.

Invariants: shares are exact integers (parts per million of capacity, floor-divided), so
ordering by them is deterministic across platforms; unlimited slots never contribute. Adding
usage never lowers a slot's borrowed fraction, so the share after adding amounts is the larger
of the current unweighted share and the new fractions of the slots they touch: computed in
O(slots of the amounts), never by walking the pool again.
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
    ``current`` is its :func:`borrowed_share` on ``ledger``."""
    best = current
    for slot, amount in amounts:
        capacity = catalog.slots[slot].capacity
        if not capacity:
            continue
        borrowed = ledger.policy_usage(policy, slot) + amount - policy.reserved.get(slot, 0)
        if borrowed > 0:
            best = max(best, borrowed * SCALE // capacity)
    return best // policy.policy.fair_share_weight
