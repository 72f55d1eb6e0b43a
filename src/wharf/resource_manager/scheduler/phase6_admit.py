"""Phase 6: walk each pool's queue and admit, claim, preempt or wait.

Owns: :class:`Admitter`.

Invariants: a request is admitted at most once and claims in at most one pool per cycle; a
request that claimed or was admitted is never a victim in the same cycle (victims come only
from allocations that existed at the start of the cycle); each victim is taken at most once;
a blocked head is never starved (it claims the free part of its route); the walk's shortcut
(:meth:`Admitter._settle`) changes no decision.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from wharf.resource_manager.domain.requests import Allocation
from wharf.resource_manager.scheduler import reasons
from wharf.resource_manager.scheduler.catalog import Catalog
from wharf.resource_manager.scheduler.decisions import Admission, Preemption, Wait
from wharf.resource_manager.scheduler.holders import HolderIndex
from wharf.resource_manager.scheduler.ledger import Holding
from wharf.resource_manager.scheduler.phase2_nominate import Candidate
from wharf.resource_manager.scheduler.phase3_order import PoolQueue, QueueKey
from wharf.resource_manager.scheduler.phase4_fit import Blocker, BlockKind, Fitter
from wharf.resource_manager.scheduler.phase5_preempt import (
    PreemptionPlan,
    make_waiter,
    plan_preemption,
    returning_covers,
)
from wharf.resource_manager.scheduler.routes import Route
from wharf.resource_manager.scheduler.soft_claims import SoftClaims

_HEAD = ((1 << 48) - 1) << 80
_VERSION_8 = 0x8 << 76
_VARIANT = 0x2 << 62
_HASHED = ((1 << 76) - 1) & ~(0x3 << 62)


def allocation_id(request_id: UUID, key: str) -> UUID:
    """The id of a request's allocation for pick ``key``: pure and stable across retries.

    An RFC 9562 version 8 (custom) UUID: the first 48 bits are the request id's (its timestamp,
    for the time-ordered ids the service gives new requests), 74 more come from a SHA-1 of the
    request id and ``key``; two picks of one request, or of requests of one millisecond, differ
    in 74 hashed bits.
    """
    return _derived_id(request_id.bytes, (request_id.int & _HEAD) | _VERSION_8 | _VARIANT, key)


def _derived_id(request_bytes: bytes, prefix: int, key: str) -> UUID:
    """:func:`allocation_id` from the request id's bytes and head bits (computed once per
    request)."""
    digest = hashlib.sha1(request_bytes + key.encode(), usedforsecurity=False).digest()
    return UUID(int=prefix | (int.from_bytes(digest[:10], "big") & _HASHED))


@dataclass(slots=True)
class Admitter:
    """One cycle's walk: pools in rank order, each pool's queue in queue order (phase 3). For
    every candidate not yet admitted elsewhere this cycle:

    - if a route fits (phase 4), admit it: one allocation per demand (plus grant defaults),
      with target settings merged pool < class < policy < grant, and charge the ledger;
    - if it is blocked by capacity and none of the slots it lacks is claimed yet, it is the
      *head* of those slots: unless it fits right now in a lower-ranked pool, it may preempt
      (phase 5) and it *claims* the free part of every slot of its route, so requests behind
      it can only backfill capacity it cannot use. When its path to fitting is preemption, the
      slots it lacks are claimed softly (:mod:`.soft_claims`): requests it could preempt later
      may use them meanwhile, nobody else may;
    - otherwise it waits, with the reason of the most useful blocker.
    """

    catalog: Catalog
    fitter: Fitter
    holders: HolderIndex
    admissions: list[Admission] = field(default_factory=list)
    preemptions: list[Preemption] = field(default_factory=list)
    taken: set[UUID] = field(default_factory=set)
    claims: dict[int, UUID] = field(default_factory=dict)
    """Slot -> the head that claimed it this cycle (hard or soft)."""
    soft: SoftClaims = field(default_factory=SoftClaims)
    trace: UUID | None = None
    """A request whose notes in every pool are kept in :attr:`traced` (for explain)."""
    traced: dict[int, tuple[int, str]] = field(default_factory=dict)
    queue_lengths: dict[int, int] = field(default_factory=dict)
    tails: dict[int, QueueKey | None] = field(default_factory=dict)
    """Pool index -> the queue key of the last candidate of its walk (None: a fair-sharing
    pool, whose order is not one key); pools without a walk are absent."""
    held: dict[int, tuple[tuple[Allocation, ...], Holding]] = field(default_factory=dict)
    """``request.id.int`` -> (allocations, holding) of every admission: a request that holds
    exactly these allocations holds this (see :meth:`.holder_state.HolderState.update`)."""
    _behind: dict[tuple[int, UUID], str] = field(default_factory=dict)
    _admitted_reasons: dict[int, str] = field(default_factory=dict)
    """Policy index -> the reason of an admission by it."""
    _version: int = 0
    """Counts changes to the ledger's usage and claims in this cycle (admissions, claims,
    preemptions): an outcome remembered at one version holds while it is current."""
    _settled: dict[int, dict[tuple[Hashable, int], str]] = field(default_factory=dict)
    """Per pool walked: (shape, id of its plans) -> the reason every later candidate with them
    waits for (see :meth:`_settle`); kept after the walk for :meth:`visit_tail`."""

    def run(self, candidates: Sequence[Candidate]) -> None:
        by_pool: dict[int, list[Candidate]] = {}
        for candidate in candidates:
            for pool_index in candidate.plans:
                by_pool.setdefault(pool_index, []).append(candidate)
        ledger = self.fitter.ledger
        for pool_view in self.catalog.pools:
            waiting = [c for c in by_pool.get(pool_view.index, ()) if not c.decided]
            if not waiting:
                continue
            pool_index = pool_view.index
            queue = PoolQueue(self.catalog, ledger, pool_index, waiting)
            self.queue_lengths[pool_index] = len(queue)
            self.tails[pool_index] = queue.last_key
            settled = self._settled[pool_index] = {}
            for position, candidate in enumerate(queue, start=1):
                self._visit(candidate, pool_index, position, settled, queue)

    def visit_tail(self, candidate: Candidate, pool_index: int, key: QueueKey) -> None:
        """Walk on for ``candidate``, which sorts behind every candidate of the pool's walk
        (``key`` is its queue key there, above :attr:`tails`): as if the walk had included it.
        Sound only while usage, claims and holders are as the walk left them."""
        position = self.queue_lengths.get(pool_index, 0) + 1
        self.queue_lengths[pool_index] = position
        self.tails[pool_index] = key
        settled = self._settled.setdefault(pool_index, {})
        self._visit(candidate, pool_index, position, settled, None)

    def _visit(
        self,
        candidate: Candidate,
        pool_index: int,
        position: int,
        settled: dict[tuple[Hashable, int], str],
        queue: PoolQueue | None,
    ) -> None:
        reason = settled.get((candidate.shape, id(candidate.plans[pool_index])))
        if reason is not None and not candidate.claimed:
            # Same shape and plans as one already blocked for good in this walk.
            self._note(candidate, pool_index, position, reason)
            return
        soft = self.soft
        key: Hashable = None
        if soft.by_slot:
            # Not settled: whether a head may take it back depends on its subjects too.
            key = soft.key(candidate, pool_index)
            known = soft.waits.get(key)
            if known is not None and known[0] == self._version:
                self._note(candidate, pool_index, position, known[1])
                return
        result = self.fitter.try_pool(candidate, pool_index)
        if isinstance(result, Route) and soft.by_slot:
            refused = soft.refused(self.fitter.ledger, candidate, result)
            if refused is not None:
                hard = self._fit_hard(candidate, pool_index)
                if hard is None:
                    reason = self._behind_reason(refused)
                    soft.waits[key] = (self._version, reason)
                    self._note(candidate, pool_index, position, reason)
                    return
                result = hard
        if isinstance(result, Route):
            self._admit(candidate, result)
            if queue is not None:
                queue.admitted(result.policy)
        else:
            self._blocked(candidate, pool_index, position, result)

    def _fit_hard(self, candidate: Candidate, pool_index: int) -> Route | None:
        """The first route of ``candidate`` that fits with soft claims counted as claims."""
        soft, fitter = self.soft, self.fitter
        plans = [
            plan
            for plan in candidate.plans[pool_index]
            if (plan.policy.index, candidate.shape) not in soft.hard_blocked
        ]
        if not plans:
            return None
        with soft.hard_view(fitter.ledger):
            for plan in plans:
                route = fitter.fit(plan, fitter.ledger)
                if route is not None:
                    return route
                soft.hard_blocked.add((plan.policy.index, candidate.shape))
        return None

    def _behind_reason(self, slot: int) -> str:
        """Why a request lacking ``slot``, which an earlier head claimed, waits."""
        head = self.claims[slot]
        key = (slot, head)
        reason = self._behind.get(key)
        if reason is None:  # deep queues repeat this for every entry: format it once
            reason = reasons.waiting_behind(self.catalog, self.catalog.slots[slot], str(head))
            self._behind[key] = reason
        return reason

    def _admit(self, candidate: Candidate, route: Route) -> None:
        request = candidate.request
        policy = route.policy
        catalog = self.catalog
        pool = catalog.pools[policy.pool_index].pool
        request_id = request.id
        id_bytes, id_prefix = request_id.bytes, (request_id.int & _HEAD) | _VERSION_8 | _VARIANT
        allocations: list[Allocation] = []
        for pick in route.picks:
            descriptor = pick.descriptor
            class_name = catalog.classes[pick.class_index].spec.name
            if pick.demand_index is not None:
                demand = request.demands[pick.demand_index]
                quantity = demand.quantity
                unit = demand.unit or descriptor.default_unit or descriptor.base_unit.name
                key = str(pick.demand_index)
            else:
                quantity, unit = pick.base, descriptor.base_unit.name
                key = f"default:{class_name}:{descriptor.name}"
            settings = catalog.target_settings(policy, pick.class_index)
            # Validated, although every value comes from the validated request and
            # configuration: for these few plain fields that costs less than model_construct.
            allocations.append(
                Allocation(
                    id=_derived_id(id_bytes, id_prefix, key),
                    request_id=request_id,
                    demand_index=pick.demand_index,
                    pool_id=pool.id,
                    class_name=class_name,
                    resource=descriptor.name,
                    resource_kind=descriptor.kind,
                    quantity=quantity,
                    unit=unit,
                    base_quantity=pick.base,
                    policy_id=policy.policy.id,
                    priority=policy.priority,
                    priority_lane=policy.lane,
                    target_settings=copy.deepcopy(settings) if settings else {},
                )
            )
        self._version += 1
        holding = Holding(
            policy=policy,
            pool_index=policy.pool_index,
            amounts=route.amounts,
            class_indices=route.class_indices,
            pinned=route.pinned,
        )
        self.fitter.ledger.add(holding)
        candidate.decided = True
        admitted = tuple(allocations)
        self.held[request_id.int] = (admitted, holding)
        reason = self._admitted_reasons.get(policy.index)
        if reason is None:
            reason = self._admitted_reasons[policy.index] = reasons.admitted(catalog, policy)
        self.admissions.append(
            Admission(
                request_id=request_id,
                pool_id=pool.id,
                policy_id=policy.policy.id,
                allocations=admitted,
                reason=reason,
            )
        )

    def _blocked(
        self, candidate: Candidate, pool_index: int, position: int, blockers: list[Blocker]
    ) -> None:
        capacity = None
        for blocker in blockers:
            if blocker.kind is BlockKind.CAPACITY:
                capacity = blocker
                break
        if capacity is None or candidate.claimed:
            if not candidate.claimed:
                self._settle(candidate, pool_index, blockers[0].reason)
            self._note(candidate, pool_index, position, blockers[0].reason)
            return
        claims = self.claims
        claimed = [slot for slot in capacity.lacking if slot in claims]
        if claimed:
            # An earlier head owns this gap; preempting for it again would only waste work.
            reason = self._behind_reason(claimed[0])
            self._settle(candidate, pool_index, reason)
            self._note(candidate, pool_index, position, reason)
            return
        if not candidate.deferred:
            # Prefer admission in a lower-ranked pool over claiming or preempting here. Checked
            # once per candidate and cycle: the check is a full fit, and a deep queue of
            # identical requests would otherwise repeat it for every entry.
            candidate.deferred = True
            for later in sorted(candidate.plans):
                if later > pool_index and self.fitter.fits_somewhere(candidate, later):
                    note = reasons.deferred_to(self.catalog, later)
                    self._note(candidate, pool_index, position, note)
                    return
        plan = next(p for p in candidate.plans[pool_index] if p.policy is capacity.policy)
        outcome = plan_preemption(
            self.fitter, self.holders, candidate, plan, capacity, taken=self.taken
        )
        if isinstance(outcome, PreemptionPlan):
            self._preempt(candidate, outcome)
            reason = reasons.preempting(self.catalog, pool_index, len(outcome.victims))
        else:
            reason = outcome
        self._claim(candidate, capacity)
        candidate.note = None  # the claim's pool is the one to report
        self._note(candidate, pool_index, position, reason)

    def _claim(self, candidate: Candidate, capacity: Blocker) -> None:
        """Claim the free part of the blocked route: softly in the slots it lacks when
        preempting is its path to fitting (victims planned now, or capacity being returned
        covers what it lacks) and they are reclaimable, else hard."""
        self._version += 1
        ledger, catalog = self.fitter.ledger, self.catalog
        lacking = frozenset(capacity.lacking)
        soft: frozenset[int] = frozenset()
        if not any(catalog.slots[s].protected for s in lacking) and returning_covers(
            catalog, ledger, capacity
        ):
            soft = lacking
            waiter = make_waiter(catalog, ledger, candidate, capacity, lacking, soft)
            self.soft.add(waiter, soft)
        ledger.claim([(s, a) for s, a in capacity.route.amounts if s not in soft])
        for slot, _ in capacity.route.amounts:
            self.claims.setdefault(slot, candidate.request.id)
        candidate.claimed = True

    def _settle(self, candidate: Candidate, pool_index: int, reason: str) -> None:
        """Every later candidate of this pool's walk with the same shape and plans waits for
        the same ``reason`` without being tried again (a deep queue is mostly a few groups of
        identical requests, a ``map`` over one step; a group is one shape *and* one plan list,
        so requests that queue under other policies are always tried). This changes no
        decision: its policies are blocked by the memo (blocked stays blocked within a cycle,
        see :mod:`.phase4_fit`), and the outcome was a plain wait, a non-capacity block or a
        gap claimed by an earlier head (claims only grow), which depend on nothing else."""
        key = (candidate.shape, id(candidate.plans[pool_index]))
        self._settled[pool_index][key] = reason

    def _preempt(self, candidate: Candidate, plan: PreemptionPlan) -> None:
        self._version += 1
        for index, victim in enumerate(plan.victims):
            self.taken.add(victim.request.id)
            self.fitter.ledger.mark_returning(victim.holding)
            why = plan.why.get(index, "")
            self.preemptions.append(
                Preemption(
                    victim_id=victim.request.id,
                    preemptor_id=candidate.request.id,
                    reason=reasons.PREEMPTED_FOR.format(preemptor=candidate.request.id, why=why),
                )
            )

    def _note(self, candidate: Candidate, pool_index: int, position: int, reason: str) -> None:
        # Only one note is kept per candidate (allocations are what makes big cycles slow);
        # explain() traces one request to see all of them.
        if candidate.note is None:
            candidate.note = (pool_index, position, reason)
        if self.trace is not None and candidate.request.id == self.trace:
            self.traced[pool_index] = (position, reason)

    def waits(self, candidates: Sequence[Candidate], unchanged: bool = True) -> list[Wait]:
        """One wait per candidate not admitted, about the pool of its note; without
        ``unchanged``, only those whose reason is not the request's ``status_reason``."""
        waits: list[Wait] = []
        pool_ids = [view.pool.id for view in self.catalog.pools]
        for candidate in candidates:
            if candidate.decided:
                continue
            note = candidate.note
            if note is None:  # queued nowhere this cycle (cannot happen; kept total)
                pool_index, position, reason = min(candidate.plans), None, "Waiting."
            else:
                pool_index, position, reason = note
            if not unchanged and reason == candidate.request.status_reason:
                continue
            waits.append(Wait(candidate.request.id, reason, pool_ids[pool_index], position))
        return waits
