"""``explain(snapshot, request_id, now)``: why a request is where it is.

Owns: :func:`explain`, :class:`Explanation`, :class:`QueuePosition`.

Invariants: pure; it runs the same cycle as :func:`~.cycle.schedule`, so the answer can never
disagree with what the scheduler would do; what blocks the request is computed from the state
*after* the cycle's admissions, without other heads' claims.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from wharf.core.enums import ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.scheduler.cycle import CycleRun, run_cycle
from wharf.resource_manager.scheduler.holders import Holder
from wharf.resource_manager.scheduler.ledger import Ledger
from wharf.resource_manager.scheduler.phase2_nominate import Candidate
from wharf.resource_manager.scheduler.phase4_fit import Blocker, BlockKind, diagnose
from wharf.resource_manager.scheduler.phase5_preempt import (
    cover,
    deficits,
    make_waiter,
    victim_order,
    victim_rule,
)
from wharf.resource_manager.scheduler.snapshot import SchedulerOptions, Snapshot


@dataclass(frozen=True, slots=True)
class QueuePosition:
    pool_id: UUID
    pool_name: str
    position: int
    queue_length: int
    reason: str


@dataclass(frozen=True, slots=True)
class Explanation:
    request_id: UUID
    status: ResourceRequestStatus
    outcome: str
    """admitted | waiting | rejected | expired | not_pending"""
    reason: str
    positions: tuple[QueuePosition, ...] = ()
    blocker: str | None = None
    """The kind of rule that blocks it (``capacity``, ``limit``, ``queue`` ...)."""
    blocking_policy_id: UUID | None = None
    blocking_pool_id: UUID | None = None
    blocking_class: str | None = None
    blocking_resource: str | None = None
    would_have_to_end: tuple[UUID, ...] = ()
    preemptible: tuple[UUID, ...] = ()
    """The part of ``would_have_to_end`` the scheduler may preempt for this request."""


def explain(
    snapshot: Snapshot, request_id: UUID, now: datetime, options: SchedulerOptions | None = None
) -> Explanation:
    """Run the cycle, then look closer at one request: its position in each pool's queue, the
    rule that blocks it (a limit, a concurrency limit, a reserved share, capacity, or a queue
    head ahead of it), and which allocations would have to end for it to fit, with the subset
    the scheduler may preempt for it. EntityNotFoundError if it is not in ``snapshot``."""
    request = next((r for r in snapshot.requests if r.id == request_id), None)
    if request is None:
        raise EntityNotFoundError(f"Resource request {request_id} not found.")
    run = run_cycle(snapshot, now, options, trace=request_id)
    decisions = run.decisions
    for expiry in decisions.expiries:
        if expiry.request_id == request_id:
            return Explanation(request_id, request.status, "expired", expiry.reason)
    if request.status is not ResourceRequestStatus.PENDING:
        reason = request.status_reason or f"The request is {request.status.value}."
        return Explanation(request_id, request.status, "not_pending", reason)
    for rejection in decisions.rejections:
        if rejection.request_id == request_id:
            return Explanation(request_id, request.status, "rejected", rejection.reason)
    for admission in decisions.admissions:
        if admission.request_id == request_id:
            return Explanation(request_id, request.status, "admitted", admission.reason)
    candidate = next(c for c in run.candidates if c.request.id == request_id)
    wait = next(w for w in decisions.waits if w.request_id == request_id)
    positions = tuple(
        QueuePosition(
            pool_id=run.catalog.pools[pool_index].pool.id,
            pool_name=run.catalog.pools[pool_index].pool.name,
            position=position,
            queue_length=run.admitter.queue_lengths.get(pool_index, 0),
            reason=reason,
        )
        for pool_index, (position, reason) in sorted(run.admitter.traced.items())
    )
    pool_index = next(
        (i for i, view in enumerate(run.catalog.pools) if view.pool.id == wait.pool_id),
        min(candidate.plans),
    )
    return _blocked(run, candidate, pool_index, wait.reason, positions)


def _blocked(
    run: CycleRun,
    candidate: Candidate,
    pool_index: int,
    reason: str,
    positions: tuple[QueuePosition, ...],
) -> Explanation:
    ledger = run.ledger.copy()
    ledger.claimed = [0] * len(ledger.claimed)  # other heads' claims are not this one's blocker
    request = candidate.request
    blockers: list[Blocker] = []
    for plan in candidate.plans[pool_index]:
        if run.admitter.fitter.fit(plan, ledger) is not None:
            # It would fit but for the heads ahead of it: it waits its turn in the queue.
            return Explanation(
                request.id,
                request.status,
                "waiting",
                reason,
                positions,
                blocker="queue",
                blocking_pool_id=run.catalog.pools[pool_index].pool.id,
            )
        blockers.append(diagnose(run.catalog, ledger, plan.primary))
    blocker = next((b for b in blockers if b.kind is BlockKind.CAPACITY), blockers[0])
    ending, preemptible = _would_have_to_end(run, ledger, candidate, blocker)
    slot = run.catalog.slots[blocker.slot] if blocker.slot is not None else None
    return Explanation(
        request.id,
        request.status,
        "waiting",
        reason,
        positions,
        blocker=blocker.kind.value,
        blocking_policy_id=blocker.policy.policy.id,
        blocking_pool_id=run.catalog.pools[pool_index].pool.id,
        blocking_class=slot.class_name if slot else None,
        blocking_resource=slot.resource if slot else None,
        would_have_to_end=tuple(h.request.id for h in ending),
        preemptible=tuple(h.request.id for h in preemptible),
    )


def _would_have_to_end(
    run: CycleRun, ledger: Ledger, candidate: Candidate, blocker: Blocker
) -> tuple[list[Holder], list[Holder]]:
    catalog, holders = run.catalog, run.holders
    policy = blocker.policy
    pool_index = policy.pool_index
    amounts = dict(blocker.route.amounts)
    in_pool = holders.in_pool(pool_index)
    if blocker.kind is BlockKind.CAPACITY:
        missing = deficits(catalog, ledger, blocker)
        scope = [h for h in in_pool if any(s in missing for s, _ in h.holding.amounts)]
    elif blocker.kind in (BlockKind.LIMIT, BlockKind.SHARE) and blocker.slot is not None:
        slot = blocker.slot
        usage = ledger.policy_usage(policy, slot)
        if blocker.kind is BlockKind.LIMIT:
            excess = usage + amounts[slot] - policy.limit[slot]
        else:
            reserved = policy.reserved.get(slot, 0)
            over = ledger.over[slot] - max(0, usage - reserved)
            excess = over + max(0, usage + amounts[slot] - reserved)
            excess -= catalog.slots[slot].unreserved_or_zero
        missing = {slot: excess}
        scope = list(holders.by_group.get((policy.index, slot), {}).values())
    else:
        # One more request must end; concurrency limits never trigger preemption (phase 5).
        scope = _concurrency_scope(in_pool, blocker)
        return sorted(scope, key=lambda h: (h.age_key, h.request.id.int))[:1], []
    slots = frozenset(missing)
    waiter = make_waiter(run.catalog, ledger, candidate, blocker, slots, slots)
    # Allocations already being preempted end first; then the order preemption would use.
    ordered = [h for h in scope if h.preempting] + victim_order(
        waiter, [h for h in scope if not h.preempting]
    )
    ending = cover(missing, ordered) or []
    return ending, [h for h in ending if victim_rule(waiter, h) is not None]


def _concurrency_scope(in_pool: list[Holder], blocker: Blocker) -> list[Holder]:
    policy = blocker.policy
    if blocker.kind is BlockKind.POLICY_CONCURRENCY:
        return [h for h in in_pool if h.policy is policy]
    if blocker.kind is BlockKind.CLASS_CONCURRENCY:
        classes = set(blocker.route.class_indices)
        return [h for h in in_pool if classes & set(h.holding.class_indices)]
    return list(in_pool)
