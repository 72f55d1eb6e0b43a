"""Phase 3: the queue order of one pool.

Owns: :class:`PoolQueue` and :func:`policy_order`.

Order (first wins): priority lane; then requests whose whole primary route fits in their
policy's *unused reserved share*; then higher policy priority; then, in fair-sharing pools, the
lower dominant resource share the policy would have after admitting the request; then FIFO on
enqueue time; then request id. Invariants: the order is total and deterministic, computed from
the ledger at the start of the pool's turn; a request is queued under its best matching policy
in the pool (the first in policy order that could ever admit it).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from datetime import datetime
from operator import itemgetter

from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.fair_sharing import borrowed_share, share_after
from wharf.resource_manager.scheduler.ledger import Ledger
from wharf.resource_manager.scheduler.phase2_nominate import Candidate, RoutePlan

QueueKey = tuple[int, int, int, tuple[datetime, int]]
"""A candidate's place in a pool's queue that is not fair-sharing: lane, fits its unused
reserved share, priority (negated), FIFO."""
_first = itemgetter(0)


def policy_order(plans: Sequence[RoutePlan], ledger: Ledger) -> tuple[int, int, int]:
    """The part of the order that comes from the queueing policy (the first of ``plans``):
    lane, fits its unused reserved share, priority."""
    plan = plans[0]
    policy = plan.policy
    fits_reserved = bool(policy.reserved) and all(
        amount <= ledger.unused_reserved(policy, slot) for slot, amount in plan.primary.amounts
    )
    return (0 if policy.lane else 1, 0 if fits_reserved else 1, -policy.priority)


class PoolQueue:
    """Iterate a pool's candidates in queue order; tell it about admissions (fair sharing).

    In a fair-sharing pool the queue is a k-way merge of per-policy queues (each in the order
    without shares), keyed by the share after admitting each queue's head: a policy's current
    share is recomputed only after an admission it makes (its usage is the only one that
    changed), and a head's share after admission adds its amounts to it in O(its slots), so the
    merge always picks by shares after admission on the live ledger.
    """

    def __init__(
        self,
        catalog: Catalog,
        ledger: Ledger,
        pool_index: int,
        candidates: Sequence[Candidate],
    ) -> None:
        self._catalog = catalog
        self._ledger = ledger
        self._pool_index = pool_index
        self._fair = catalog.pools[pool_index].pool.fair_sharing
        # Candidates of one shape and policies share their plans (and so this part of the
        # key): computed once per plan list, as a deep queue is mostly a few such groups.
        prefixes: dict[int, tuple[int, int, int]] = {}
        keyed: list[tuple[QueueKey, Candidate]] = []
        for candidate in candidates:
            plans = candidate.plans[pool_index]
            prefix = prefixes.get(id(plans))
            if prefix is None:
                prefix = prefixes[id(plans)] = policy_order(plans, ledger)
            keyed.append(((*prefix, candidate.fifo), candidate))
        keyed.sort(key=_first)
        self._sorted = keyed
        self._groups: dict[int, list[tuple[QueueKey, Candidate]]] = {}
        self._versions: dict[int, int] = {}
        self._shares: dict[int, tuple[int, int]] = {}
        """Policy index -> (version, unweighted borrowed share at that version)."""
        if self._fair:
            for key, candidate in keyed:
                policy = candidate.plans[pool_index][0].policy
                self._groups.setdefault(policy.index, []).append((key, candidate))
            for group in self._groups.values():
                group.reverse()  # pop() from the end yields the group in order

    def __len__(self) -> int:
        return len(self._sorted)

    @property
    def last_key(self) -> QueueKey | None:
        """The key of the queue's last candidate; None in a fair-sharing pool (its order
        follows shares that change during the walk) or an empty queue."""
        if self._fair or not self._sorted:
            return None
        return self._sorted[-1][0]

    def __iter__(self) -> Iterator[Candidate]:
        if not self._fair:
            for _, candidate in self._sorted:
                yield candidate
            return
        heap: list[tuple[tuple[int, int, int, int, tuple[datetime, int]], int, int]] = []
        for policy_index in sorted(self._groups):
            self._push(heap, policy_index)
        while heap:
            _, policy_index, version = heapq.heappop(heap)
            if version != self._versions.get(policy_index, 0):
                self._push(heap, policy_index)  # its share changed since it was pushed
                continue
            group = self._groups[policy_index]
            _, candidate = group.pop()
            yield candidate
            if group:
                self._push(heap, policy_index)

    def _push(
        self,
        heap: list[tuple[tuple[int, int, int, int, tuple[datetime, int]], int, int]],
        policy_index: int,
    ) -> None:
        group = self._groups[policy_index]
        if not group:
            return
        (lane, fits, priority, fifo), head = group[-1]
        version = self._versions.get(policy_index, 0)
        cached = self._shares.get(policy_index)
        policy = self._catalog.policies[policy_index]
        if cached is None or cached[0] != version:  # only admissions change a share
            cached = (version, borrowed_share(self._catalog, self._ledger, policy))
            self._shares[policy_index] = cached
        amounts = head.plans[self._pool_index][0].primary.amounts
        share = share_after(self._catalog, self._ledger, policy, cached[1], amounts)
        heapq.heappush(heap, ((lane, fits, priority, share, fifo), policy_index, version))

    def admitted(self, policy: PolicyView) -> None:
        """A request was admitted through ``policy``: its share may have changed."""
        if self._fair:
            self._versions[policy.index] = self._versions.get(policy.index, 0) + 1
