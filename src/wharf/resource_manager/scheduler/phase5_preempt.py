"""Phase 5: preemption — the minimal set of allocations a blocked head may reclaim.

Owns: :func:`plan_preemption`, :func:`victim_rule`, :func:`returning_covers`,
:class:`PreemptionPlan`.

Invariants: preemption is cycle-free (a victim's re-submission can never take back from its
preemptor, see :func:`victim_rule`); never preempt twice for one gap (capacity already being
returned counts first); a plan is returned only if a trial fit on a copy of the ledger admits
the head.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from wharf.core.enums import ReclaimTolerance
from wharf.resource_manager.scheduler import reasons
from wharf.resource_manager.scheduler.catalog import Catalog, PolicyView
from wharf.resource_manager.scheduler.holders import Holder, HolderIndex
from wharf.resource_manager.scheduler.ledger import Ledger
from wharf.resource_manager.scheduler.phase2_nominate import Candidate, RoutePlan
from wharf.resource_manager.scheduler.phase4_fit import Blocker, Fitter


@dataclass(frozen=True, slots=True)
class PreemptionPlan:
    victims: tuple[Holder, ...]
    why: dict[int, str]
    """Index into ``victims`` -> why that one was chosen (for its status reason)."""


@dataclass(frozen=True, slots=True)
class Waiter:
    candidate: Candidate
    policy: PolicyView
    within_share: bool
    unused_share_slots: frozenset[int]
    deficit_slots: frozenset[int]


def make_waiter(
    catalog: Catalog,
    ledger: Ledger,
    candidate: Candidate,
    blocker: Blocker,
    lacking: frozenset[int],
    deficit_slots: frozenset[int],
) -> Waiter:
    """What the victim rule needs to know about the blocked head.

    Reclaim is allowed when, in every slot it lacks, the head's demand fits its unused reserved
    share: there it will not borrow, so a victim's re-submission can never reclaim from it. In
    slots it does not lack it may borrow freely: they had room for it, so they will have room
    for the victim again once the victim releases.
    """
    policy = blocker.policy
    amounts = dict(blocker.route.amounts)
    within_share = bool(policy.reserved) and all(
        amounts[slot] <= ledger.unused_reserved(policy, slot) for slot in lacking
    )
    return Waiter(
        candidate=candidate,
        policy=policy,
        within_share=within_share,
        unused_share_slots=frozenset(
            s for s in deficit_slots if ledger.unused_reserved(policy, s) > 0
        ),
        deficit_slots=deficit_slots,
    )


def victim_rule(waiter: Waiter, holder: Holder) -> str | None:
    """Why ``holder`` may be preempted for ``waiter``, or None if it may not.

    - never: priority-lane allocations; tolerance ``none`` or never-reclaimable classes; members
      of the waiter's preemption group (its subject selector, or the same policy preemption
      group);
    - a priority-lane waiter may take any other reclaimable allocation;
    - otherwise the victim must *borrow* in a deficit slot (use beyond its policy's reserved
      share), and either have strictly lower priority, or borrow the waiter's unused reserved
      share while the waiter fits inside that share in every slot it lacks (reclaim).

    A victim's re-submission therefore cannot take back from its preemptor: after a priority
    preemption it has lower priority; after a reclaim, the preemptor borrows nothing in the
    slots that were short, and the other slots had room for it, so they have room for the
    victim again.
    """
    request = waiter.candidate.request
    if holder.request.id == request.id or holder.policy.lane or not holder.reclaimable:
        return None
    if holder.request.reclaim_tolerance is ReclaimTolerance.NONE:
        return None
    group = waiter.policy.policy.preemption_group
    if group is not None and group == holder.policy.policy.preemption_group:
        return None
    if request.preemption_group is not None and request.preemption_group.matches(holder.subjects):
        return None
    if waiter.policy.lane:
        return "priority lane"
    borrowed = holder.borrowed
    if not any(borrowed.get(slot, 0) > 0 for slot in waiter.deficit_slots):
        return None
    if holder.policy.priority < waiter.policy.priority:
        return "higher priority"
    if waiter.within_share and any(borrowed.get(slot, 0) > 0 for slot in waiter.unused_share_slots):
        return "reclaiming its reserved share"
    return None


def _candidates(holders: HolderIndex, waiter: Waiter, taken: set[UUID]) -> list[Holder]:
    """Allocated holders not taken yet that :func:`victim_rule` could allow, found without
    looking at the others. Outside the priority lane it only allows holders that borrow in a
    deficit slot, so only the (policy, slot) groups that borrow there are walked, and of those
    only policies the waiter could preempt at all (the lane never; the same policy preemption
    group never; a priority not below its own only to reclaim its share). A full pool of
    allocations none of which may be preempted is then no walk over all of them."""
    policy = waiter.policy
    group = policy.policy.preemption_group
    found: dict[UUID, Holder] = {}
    for slot in sorted(waiter.deficit_slots):
        groups = holders.groups(slot) if policy.lane else holders.borrowing_groups(slot)
        for other, members in groups:
            if other.lane or (group is not None and group == other.policy.preemption_group):
                continue
            if not policy.lane and other.priority >= policy.priority and not waiter.within_share:
                continue
            for key, holder in members.items():
                if not holder.preempting and key not in taken:
                    found.setdefault(key, holder)
    return list(found.values())


def deficits(catalog: Catalog, ledger: Ledger, blocker: Blocker) -> dict[int, int]:
    """Missing base units per slot of the blocked route, before counting returning capacity."""
    missing: dict[int, int] = {}
    for slot, amount in blocker.route.amounts:
        capacity = catalog.slots[slot].capacity
        if capacity is None:
            continue
        short = ledger.used[slot] + ledger.claimed[slot] + amount - capacity
        if short > 0:
            missing[slot] = short
    return missing


def _outstanding(ledger: Ledger, missing: dict[int, int]) -> dict[int, int]:
    """What ``missing`` lacks beyond the capacity already being returned, per slot."""
    outstanding = {s: v - ledger.returning[s] for s, v in missing.items()}
    return {s: v for s, v in outstanding.items() if v > 0}


def returning_covers(catalog: Catalog, ledger: Ledger, blocker: Blocker) -> bool:
    """Capacity that preempted holders are returning covers everything the blocked route
    lacks (after a plan's victims are marked returning, this holds for its head)."""
    missing = deficits(catalog, ledger, blocker)
    return bool(missing) and not _outstanding(ledger, missing)


def victim_order(waiter: Waiter, holders: list[Holder]) -> list[Holder]:
    """Lowest priority first; then borrowers of the waiter's unused reserved share; then the
    newest allocation; then request id."""

    def key(holder: Holder) -> tuple[int, int, object, object]:
        reclaims = any(holder.borrowed.get(s, 0) > 0 for s in waiter.unused_share_slots)
        return (holder.policy.priority, 0 if reclaims else 1, holder.age_key, holder.request.id.int)

    return sorted(holders, key=key)


def cover(missing: dict[int, int], ordered: list[Holder]) -> list[Holder] | None:
    """Greedy in order until every deficit is covered, then trim from the back."""
    remaining = dict(missing)
    chosen: list[Holder] = []
    for holder in ordered:
        if all(value <= 0 for value in remaining.values()):
            break
        helps = [(s, a) for s, a in holder.holding.amounts if remaining.get(s, 0) > 0]
        if not helps:
            continue
        chosen.append(holder)
        for slot, amount in holder.holding.amounts:
            if slot in remaining:
                remaining[slot] -= amount
    if any(value > 0 for value in remaining.values()):
        return None
    for holder in reversed(list(chosen)):
        amounts = dict(holder.holding.amounts)
        if all(remaining[s] + amounts.get(s, 0) <= 0 for s in remaining):
            chosen.remove(holder)
            for slot in remaining:
                remaining[slot] += amounts.get(slot, 0)
    return chosen


def plan_preemption(
    fitter: Fitter,
    holders: HolderIndex,
    candidate: Candidate,
    plan: RoutePlan,
    blocker: Blocker,
    *,
    taken: set[UUID],
) -> PreemptionPlan | str:
    """A plan to preempt, or the reason to keep waiting without preempting.

    1. Deficits per slot, after counting capacity that preempting requests will return; if
       returning capacity covers everything, wait.
    2. Candidates: allocated, not already preempting holders of a deficit slot that
       :func:`victim_rule` allows, looked for only where it could allow one (:func:`_candidates`).
    3. Order them (:func:`victim_order`), take them greedily until every deficit is covered,
       then drop each chosen one the others already cover (:func:`cover`).
    4. Trial: on a copy of the ledger, remove the victims and everything already returning and
       run the real fit check; only a plan whose trial admits the head is returned.
    """
    catalog, ledger = fitter.catalog, fitter.ledger
    missing = deficits(catalog, ledger, blocker)
    outstanding = _outstanding(ledger, missing)
    if missing and not outstanding:
        return reasons.waiting_returning(f"{len(missing)} resource(s) still held")
    if not outstanding:
        return blocker.reason
    if any(catalog.slots[slot].protected for slot in outstanding):
        return f"{blocker.reason} Its class is never reclaimable, so nothing is preempted."
    policy = plan.policy
    waiter = make_waiter(
        catalog, ledger, candidate, blocker, frozenset(missing), frozenset(outstanding)
    )
    pool_index = policy.pool_index
    eligible = [
        h for h in _candidates(holders, waiter, taken) if victim_rule(waiter, h) is not None
    ]
    chosen = cover(outstanding, victim_order(waiter, eligible))
    if chosen is None:
        return f"{blocker.reason} No allocation may be preempted for it."
    # Everything that will give its capacity back: the chosen, those already taken in this
    # cycle and those preempting since earlier cycles (each once; the order of removal does
    # not matter, the ledger's counters are sums).
    giving_back = {h.request.id: h for h in chosen}
    for key in taken:
        holder = holders.by_id.get(key)
        if holder is not None and holder.holding.pool_index == pool_index:
            giving_back[key] = holder
    for key, holder in holders.preempting.items():
        if holder.holding.pool_index == pool_index:
            giving_back[key] = holder
    trial = ledger.copy()
    for holder in giving_back.values():
        trial.remove(holder.holding)
    if fitter.fit(plan, trial) is None:
        return f"{blocker.reason} Preempting the allowed allocations would not make room."
    why = {i: victim_rule(waiter, holder) or "" for i, holder in enumerate(chosen)}
    return PreemptionPlan(victims=tuple(chosen), why=why)
