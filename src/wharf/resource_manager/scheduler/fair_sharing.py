"""Optional weighted fair sharing between the policies of a pool (dominant resource share).

Owns: :func:`dominant_share`.

As in Kueue's fair sharing, a tenant's share counts only what it *borrows*: usage above its
reserved share. Its dominant resource share is the largest borrowed fraction of any slot's
capacity in the pool, divided by the policy's ``fair_share_weight``. Among requests of equal
priority, the one whose policy has the lowest share goes first, so a tenant that already
borrowed a lot yields to one that has not.

Invariant: the share is an exact integer (parts per million of capacity, floor-divided), so
ordering by it is deterministic across platforms; unlimited slots never contribute.
"""

from __future__ import annotations

from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Ledger

SCALE = 1_000_000


def dominant_share(catalog: Catalog, ledger: Ledger, policy: PolicyView) -> int:
    best = 0
    for class_view in catalog.pools[policy.pool_index].classes:
        for slot in class_view.slots.values():
            capacity = catalog.slots[slot].capacity
            if not capacity:
                continue
            borrowed = ledger.policy_usage(policy, slot) - policy.reserved.get(slot, 0)
            if borrowed > 0:
                best = max(best, borrowed * SCALE // capacity)
    return best // policy.policy.fair_share_weight
