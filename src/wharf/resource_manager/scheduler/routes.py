"""Class assignment: which slot each demand of a request would use under one policy.

Owns: :class:`SlotChoice`, :class:`Route`, :func:`search_route` and :func:`slot_fits`.

A *route* is one complete, all-or-nothing assignment for a request under one policy of one
pool: a slot per demand, plus grant-default allocations. Invariant: a returned route keeps
every fit rule (:func:`search_route`) against the ledger given; with ``ledger=None`` that is
the *static* check against an empty pool (can this ever fit?), with a ledger the live one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wharf.resource_manager.domain.policies import MissingAction
from wharf.resource_manager.domain.units import ResourceDescriptor
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.ledger import Ledger, merge_amounts


@dataclass(frozen=True, slots=True)
class SlotChoice:
    slot: int
    class_index: int
    descriptor: ResourceDescriptor
    base: int
    demand_index: int | None
    """None for a grant-default allocation."""


@dataclass(frozen=True, slots=True)
class Route:
    policy: PolicyView
    picks: tuple[SlotChoice, ...]
    """One per demand, in demand order, then grant defaults."""
    amounts: tuple[tuple[int, int], ...]
    class_indices: tuple[int, ...]
    pinned: bool = False
    """For a request with reclaim tolerance ``none`` (see :func:`slot_fits`)."""


class SearchBudgetError(Exception):
    """The route search tried more partial assignments than allowed."""


def slot_fits(
    catalog: Catalog,
    policy: PolicyView,
    ledger: Ledger | None,
    slot: int,
    total: int,
    pinned: bool = False,
) -> bool:
    """Whether adding ``total`` (this request's whole amount in ``slot``) keeps every rule:

    - capacity: used + claimed + amount ≤ capacity (None = unlimited);
    - the policy's explicit limit in the slot;
    - a never-reclaimable slot: Σ over policies of usage above reserved ≤ unreserved capacity;
    - a *pinned* route (reclaim tolerance ``none``) in a reclaimable slot of limited capacity:
      the policy's pinned usage plus the amount ≤ its reserved share. It never borrows, so
      Σ pinned ≤ Σ reserved ≤ capacity and every reserved share stays recoverable by
      preempting reclaimable holders only (an unlimited slot has no share to protect).
    """
    info = catalog.slots[slot]
    capacity = info.capacity
    if ledger is None:
        used = usage = over = 0
    else:
        used = ledger.used[slot] + ledger.claimed[slot]
        usage = ledger.policy_used.get((policy.index, slot), 0)
        over = ledger.over[slot]
    if capacity is not None and used + total > capacity:
        return False
    limit = policy.limit.get(slot)
    if limit is not None and usage + total > limit:
        return False
    if info.protected:
        if capacity is not None:
            reserved = policy.reserved.get(slot, 0)
            new_over = over - max(0, usage - reserved) + max(0, usage + total - reserved)
            if new_over > capacity - info.reserved_total:
                return False
    elif pinned and capacity is not None:
        held = 0 if ledger is None else ledger.pinned_used.get((policy.index, slot), 0)
        if held + total > policy.reserved.get(slot, 0):
            return False
    return True


def concurrency_fits(
    catalog: Catalog, policy: PolicyView, ledger: Ledger | None, class_indices: Sequence[int]
) -> bool:
    pool = catalog.pools[policy.pool_index].pool
    limits = (
        (policy.policy.concurrency_limit, ledger.policy_count[policy.index] if ledger else 0),
        (pool.concurrency_limit, ledger.pool_count[policy.pool_index] if ledger else 0),
    )
    for limit, count in limits:
        if limit is not None and count + 1 > limit:
            return False
    for class_index in class_indices:
        limit = catalog.classes[class_index].spec.concurrency_limit
        count = ledger.class_count[class_index] if ledger else 0
        if limit is not None and count + 1 > limit:
            return False
    return True


def zero_concurrency_limit(
    catalog: Catalog, policy: PolicyView, choices: Sequence[Sequence[SlotChoice]]
) -> str | None:
    """Which concurrency limit of 0 keeps every route of ``choices`` out, if one does: the
    policy's, the pool's, or that of every class a demand could use (to name it in a rejection
    instead of the list of everything that can)."""
    pool = catalog.pools[policy.pool_index].pool
    if policy.policy.concurrency_limit == 0:
        return f"the concurrency limit of policy '{policy.policy.name}' is 0"
    if pool.concurrency_limit == 0:
        return f"the concurrency limit of pool '{pool.name}' is 0"
    for options in choices:
        specs = [catalog.classes[index].spec for index in {c.class_index for c in options}]
        if specs and all(spec.concurrency_limit == 0 for spec in specs):
            names = ", ".join(sorted(f"'{spec.name}'" for spec in specs))
            plural = "es" if len(specs) > 1 else ""
            return f"the concurrency limit of class{plural} {names} is 0"
    return None


def _grant_defaults(
    catalog: Catalog,
    policy: PolicyView,
    ledger: Ledger | None,
    picks: Sequence[SlotChoice],
    adds: dict[int, int],
    pinned: bool,
) -> list[SlotChoice] | None:
    """Grant-default allocations for the classes used; None if a grant rejects the route."""
    if not policy.grants:
        return []
    defaults: list[SlotChoice] = []
    used_classes = sorted({pick.class_index for pick in picks})
    for class_index in used_classes:
        grant = policy.grants.get(class_index)
        if grant is None:
            continue
        demanded = {p.descriptor.name for p in picks if p.class_index == class_index}
        class_view = catalog.classes[class_index]
        for resource in sorted(grant.resources):
            entry = grant.resources[resource]
            if resource in demanded or entry.missing_action is MissingAction.OMIT:
                continue
            if entry.missing_action is MissingAction.REJECT:
                return None
            slot = class_view.slots.get(resource)
            if slot is None or entry.default_value is None:
                continue
            total = adds.get(slot, 0) + entry.default_value
            if not slot_fits(catalog, policy, ledger, slot, total, pinned):
                return None
            adds[slot] = total
            defaults.append(
                SlotChoice(
                    slot=slot,
                    class_index=class_index,
                    descriptor=catalog.slots[slot].descriptor,
                    base=entry.default_value,
                    demand_index=None,
                )
            )
    return defaults


def search_route(
    catalog: Catalog,
    policy: PolicyView,
    choices: Sequence[Sequence[SlotChoice]],
    ledger: Ledger | None,
    budget: int,
    pinned: bool = False,
) -> Route | None:
    """The first route in preference order that fits, or None. Raises on budget exhaustion.

    Walks the demands in order and, for each, the candidate slots in preference order (class
    rank, then name, then descriptor name), backtracking when a later demand cannot be placed:
    the first route found is the best by class rank ("class rank decides when no class was
    asked"). A route keeps :func:`slot_fits` in every slot, the concurrency limits of the pool,
    of each class used and of the policy (one per request), and the grants' ``missing_action``
    (``reject`` excludes the class, ``default`` adds an allocation).

    ``pinned``: the request has reclaim tolerance ``none`` (it never borrows in reclaimable
    slots)."""
    return _RouteSearch(catalog, policy, choices, ledger, budget, pinned).place(0)


class _RouteSearch:
    """Depth-first search state. A class rather than nested closures: a recursive closure is a
    reference cycle, and the cycle must create no garbage that only the cyclic GC can free."""

    def __init__(
        self,
        catalog: Catalog,
        policy: PolicyView,
        choices: Sequence[Sequence[SlotChoice]],
        ledger: Ledger | None,
        budget: int,
        pinned: bool,
    ) -> None:
        self.catalog, self.policy, self.choices = catalog, policy, choices
        self.ledger, self.budget, self.pinned = ledger, budget, pinned
        self.adds: dict[int, int] = {}
        self.picks: list[SlotChoice] = []
        self.tried = 0

    def place(self, position: int) -> Route | None:
        if position == len(self.choices):
            return self.finish()
        adds = self.adds
        for choice in self.choices[position]:
            self.tried += 1
            if self.tried > self.budget:
                raise SearchBudgetError
            total = adds.get(choice.slot, 0) + choice.base
            if not slot_fits(
                self.catalog, self.policy, self.ledger, choice.slot, total, self.pinned
            ):
                continue
            previous = adds.get(choice.slot)
            adds[choice.slot] = total
            self.picks.append(choice)
            route = self.place(position + 1)
            if route is not None:
                return route
            self.picks.pop()
            if previous is None:
                del adds[choice.slot]
            else:
                adds[choice.slot] = previous
        return None

    def finish(self) -> Route | None:
        catalog, policy, ledger = self.catalog, self.policy, self.ledger
        saved = dict(self.adds)
        defaults = _grant_defaults(catalog, policy, ledger, self.picks, self.adds, self.pinned)
        if defaults is not None:
            picks = (*self.picks, *defaults)
            classes = tuple(sorted({pick.class_index for pick in picks}))
            if concurrency_fits(catalog, policy, ledger, classes):
                return Route(
                    policy=policy,
                    picks=picks,
                    amounts=merge_amounts([(pick.slot, pick.base) for pick in picks]),
                    class_indices=classes,
                    pinned=self.pinned,
                )
        self.adds.clear()
        self.adds.update(saved)
        return None
