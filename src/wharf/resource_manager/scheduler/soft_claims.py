"""Soft claims: free capacity a blocked head holds only against requests it could not take back.

Owns: :class:`SoftClaims`.

Invariants: a slot is softly claimed only if its class is reclaimable and the head lacks
capacity there, so any later use of it eats into the claim; within a cycle soft claims only
grow, so the *hard view* (soft claims counted as claimed) only tightens and a block in it stays
a block; a refusal depends only on the request's shape and plans, the ledger and which heads'
preemption groups match its subjects (:meth:`SoftClaims.key`), so it is reused for the same
inputs while the ledger is unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from wharf.core.enums import ReclaimTolerance
from wharf.resource_manager.domain.selectors import SubjectSet
from wharf.resource_manager.scheduler.holders import Holder
from wharf.resource_manager.scheduler.ledger import Holding, Ledger
from wharf.resource_manager.scheduler.phase2_nominate import Candidate
from wharf.resource_manager.scheduler.phase5_preempt import Waiter, victim_rule
from wharf.resource_manager.scheduler.routes import Route


@dataclass(slots=True)
class SoftClaims:
    """The soft claims of one cycle's blocked heads.

    A head blocked by capacity claims the free part of its route, so requests behind it only
    use what it cannot (phase 6). When its path to fitting is preemption (it planned victims
    this cycle, or capacity being returned covers what it lacks), holding the free part of the
    slots it lacks idle would gain it nothing against requests it may preempt: it takes their
    capacity back when it needs it. There the claim is soft: a later request may use the slot
    if its allocation is one the head could preempt (:func:`~.phase5_preempt.victim_rule`);
    for any other request the slot has no free capacity, as under a hard claim, so a head is
    never starved by requests it could not take back from.
    """

    by_slot: dict[int, Waiter] = field(default_factory=dict)
    """Slot -> the head that claimed it softly (the first one; claims only grow)."""
    grouped: dict[int, list[Callable[[SubjectSet], bool]]] = field(default_factory=dict)
    """Pool index -> the request preemption groups (compiled) of its soft-claiming heads."""
    hard_blocked: set[tuple[int, Hashable]] = field(default_factory=set)
    """(policy index, request shape) blocked in the hard view this cycle."""
    waits: dict[Hashable, tuple[int, str]] = field(default_factory=dict)
    """:meth:`key` -> (ledger version, reason) of a request refused and blocked in the hard
    view at that version: the same inputs get the same reason without trying again."""

    def add(self, waiter: Waiter, slots: frozenset[int]) -> None:
        for slot in sorted(slots):
            self.by_slot.setdefault(slot, waiter)
        group = waiter.candidate.request.preemption_group
        if slots and group is not None:
            self.grouped.setdefault(waiter.policy.pool_index, []).append(group.compile())

    def key(self, candidate: Candidate, pool_index: int) -> Hashable:
        """What a refusal of ``candidate`` in this pool depends on besides the ledger."""
        groups = self.grouped.get(pool_index)
        shared = (candidate.shape, id(candidate.plans[pool_index]))
        if not groups:
            return shared
        subjects = _subject_set(candidate)
        return (*shared, tuple(matches(subjects) for matches in groups))

    def refused(self, ledger: Ledger, candidate: Candidate, route: Route) -> int | None:
        """The first softly claimed slot ``route`` uses whose head could not preempt the
        allocation it would make; None when every such head could."""
        touched = [s for s, a in route.amounts if a > 0 and s in self.by_slot]
        if not touched:
            return None
        holder = _as_holder(ledger, candidate, route)
        for slot in touched:
            waiter = self.by_slot[slot]
            if waiter.candidate is candidate or victim_rule(waiter, holder) is None:
                return slot
        return None

    @contextmanager
    def hard_view(self, ledger: Ledger) -> Iterator[None]:
        """``ledger`` with every softly claimed slot's free capacity claimed, restored after."""
        extra: list[tuple[int, int]] = []
        for slot in self.by_slot:
            free = ledger.free(slot) or 0
            if free:
                ledger.claimed[slot] += free
                extra.append((slot, free))
        try:
            yield
        finally:
            for slot, free in extra:
                ledger.claimed[slot] -= free


def _subject_set(candidate: Candidate) -> SubjectSet:
    subjects = candidate.subject_set
    if subjects is None:
        subjects = candidate.subject_set = SubjectSet.of(candidate.request.subjects)
    return subjects


def _as_holder(ledger: Ledger, candidate: Candidate, route: Route) -> Holder:
    """The holder ``candidate`` would be once admitted by ``route``, as the next cycle's
    preemptor would see it: the newest allocation of its policy, so it borrows whatever of
    its amounts lies above the policy's reserved share."""
    request = candidate.request
    policy = route.policy
    catalog = ledger.catalog
    holder = Holder(
        request=request,
        holding=Holding(
            policy=policy,
            pool_index=policy.pool_index,
            amounts=route.amounts,
            class_indices=route.class_indices,
            pinned=route.pinned,
        ),
        reclaimable=request.reclaim_tolerance is not ReclaimTolerance.NONE
        and not any(catalog.slots[slot].protected for slot, _ in route.amounts),
        _subjects=_subject_set(candidate),
    )
    for slot, amount in route.amounts:
        before = ledger.policy_usage(policy, slot)
        reserved = policy.reserved.get(slot, 0)
        holder.set_borrowed(slot, max(0, before + amount - reserved) - max(0, before - reserved))
    return holder
