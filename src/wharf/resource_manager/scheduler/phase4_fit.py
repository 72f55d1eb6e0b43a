"""Phase 4: fit — can a candidate be admitted in a pool right now, and if not, why not.

Owns: :class:`Fitter`, :class:`Blocker`, :class:`BlockKind`.

Invariants: only a capacity block lets a request claim capacity or preempt; within one cycle
usage, claims and concurrency counts only grow (capacity is returned only by releases and
lapses, which the service applies between cycles), so a (policy, request shape) blocked in a
cycle stays blocked and identical requests further down the queue are answered from the memo.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from enum import StrEnum

from wharf.resource_manager.scheduler import reasons
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Ledger
from wharf.resource_manager.scheduler.phase2_nominate import Candidate, RoutePlan
from wharf.resource_manager.scheduler.routes import Route, SearchBudgetError, search_route


class BlockKind(StrEnum):
    POLICY_CONCURRENCY = "policy_concurrency"
    LIMIT = "limit"
    SHARE = "share"
    POOL_CONCURRENCY = "pool_concurrency"
    CLASS_CONCURRENCY = "class_concurrency"
    CAPACITY = "capacity"
    SEARCH = "search"


@dataclass(frozen=True, slots=True)
class Blocker:
    kind: BlockKind
    route: Route
    reason: str
    slot: int | None = None
    lacking: tuple[int, ...] = ()
    """Slots of the route that lack capacity (CAPACITY only)."""

    @property
    def policy(self) -> PolicyView:
        return self.route.policy


def diagnose(catalog: Catalog, ledger: Ledger, route: Route) -> Blocker:
    """The first rule ``route`` breaks on ``ledger`` (own-policy rules first)."""
    policy = route.policy
    pool = catalog.pools[policy.pool_index].pool
    limit = policy.policy.concurrency_limit
    if limit is not None and ledger.policy_count[policy.index] + 1 > limit:
        scope = f"policy '{policy.policy.name}'"
        return Blocker(
            BlockKind.POLICY_CONCURRENCY, route, reasons.waiting_concurrency(scope, limit)
        )
    for slot, amount in route.amounts:
        info = catalog.slots[slot]
        usage = ledger.policy_usage(policy, slot)
        if slot in policy.limit and usage + amount > policy.limit[slot]:
            reason = reasons.waiting_limit(catalog, policy, info, usage)
            return Blocker(BlockKind.LIMIT, route, reason, slot)
        if info.capacity is None:
            continue
        reserved = policy.reserved.get(slot, 0)
        if info.protected:
            over = ledger.over[slot] - max(0, usage - reserved) + max(0, usage + amount - reserved)
            if over > info.unreserved_or_zero:
                reason = reasons.waiting_share(catalog, policy, info)
                return Blocker(BlockKind.SHARE, route, reason, slot)
        elif route.pinned and ledger.pinned_usage(policy, slot) + amount > reserved:
            reason = reasons.waiting_pinned_share(catalog, policy, info)
            return Blocker(BlockKind.SHARE, route, reason, slot)
    limit = pool.concurrency_limit
    if limit is not None and ledger.pool_count[policy.pool_index] + 1 > limit:
        reason = reasons.waiting_concurrency(f"pool '{pool.name}'", limit)
        return Blocker(BlockKind.POOL_CONCURRENCY, route, reason)
    for class_index in route.class_indices:
        spec = catalog.classes[class_index].spec
        limit = spec.concurrency_limit
        if limit is not None and ledger.class_count[class_index] + 1 > limit:
            reason = reasons.waiting_concurrency(f"class '{spec.name}'", limit)
            return Blocker(BlockKind.CLASS_CONCURRENCY, route, reason)
    lacking = tuple(
        slot
        for slot, amount in route.amounts
        if (free := ledger.free(slot)) is not None and amount > free
    )
    if lacking:
        info = catalog.slots[lacking[0]]
        needed = dict(route.amounts)[lacking[0]]
        reason = reasons.waiting_capacity(catalog, info, needed, ledger.free(lacking[0]) or 0)
        return Blocker(BlockKind.CAPACITY, route, reason, lacking[0], lacking)
    return Blocker(BlockKind.SEARCH, route, reasons.search_exhausted(policy))


class Fitter:
    def __init__(self, catalog: Catalog, ledger: Ledger, budget: int) -> None:
        self.catalog = catalog
        self.ledger = ledger
        self.budget = budget
        self._blocked: dict[tuple[int, Hashable], Blocker] = {}
        self.routes_tried = 0
        self.memo_hits = 0

    def try_pool(self, candidate: Candidate, pool_index: int) -> Route | list[Blocker]:
        """A route that fits now, or one blocker per policy (policy order).

        Tries the policies in policy order and returns the first route that fits the live
        ledger (all-or-nothing, one policy path). When none fits, each policy's *primary* route
        is diagnosed (:func:`diagnose`): the first rule it breaks, checking the policy's own
        rules (its concurrency limit, limits, never-reclaimable shares, the reserved share a
        tolerance ``none`` request must fit) before the shared ones (pool and class
        concurrency, capacity). A blocked (policy, request shape) is remembered for the cycle.
        """
        blockers: list[Blocker] = []
        memo = self._blocked
        for plan in candidate.plans[pool_index]:
            key = (plan.policy.index, candidate.shape)
            known = memo.get(key)
            if known is not None:
                self.memo_hits += 1
                blockers.append(known)
                continue
            route = self.fit(plan, self.ledger)
            if route is not None:
                return route
            blocker = diagnose(self.catalog, self.ledger, plan.primary)
            self._blocked[key] = blocker
            blockers.append(blocker)
        return blockers

    def fit(self, plan: RoutePlan, ledger: Ledger) -> Route | None:
        """The best route of ``plan`` that fits ``ledger`` (the live one or a trial copy)."""
        self.routes_tried += 1
        try:
            return search_route(
                self.catalog, plan.policy, plan.choices, ledger, self.budget, plan.pinned
            )
        except SearchBudgetError:
            return None

    def fits_somewhere(self, candidate: Candidate, pool_index: int) -> bool:
        """Read-only check used before a blocked head claims: would it fit in this pool?"""
        return any(
            (plan.policy.index, candidate.shape) not in self._blocked
            and self.fit(plan, self.ledger) is not None
            for plan in candidate.plans[pool_index]
        )
