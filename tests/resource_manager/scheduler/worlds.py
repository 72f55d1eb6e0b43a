"""Hypothesis strategies for random Resource Manager worlds, and the invariant checker.

A world is a small configuration (1-2 pools, a few classes and policies, reserved shares that
respect Σ reserved ≤ capacity) plus a script of events (new requests, releases, time jumps).
:func:`check_invariants` asserts everything that must hold after any cycle.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from tests.resource_manager.builders import grant, klass, policy, pool, request, res
from wharf.core.enums import ReclaimTolerance
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import InputError
from wharf.resource_manager.domain import (
    Demand,
    Policy,
    Pool,
    Reclaimable,
    ResourceRequest,
    SubjectSelector,
    validate_reserved_totals,
)
from wharf.resource_manager.scheduler import CycleDecisions, Snapshot

# WHARF_RM_EXAMPLES=2000 pytest ... runs a long bug hunt; the default keeps the suite fast.
PROFILE = settings(
    max_examples=int(os.environ.get("WHARF_RM_EXAMPLES", "100")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

PROJECTS = ("p0", "p1", "p2")
RESOURCES = ("GPU", "GPU", "CPU")
# Weighted towards reclaimable classes and tolerant requests, so preemption happens often.
_RECLAIMABLE = ["coordinated", "coordinated", "unsafe", "never"]
_TOLERANCES = ["any", "any", "coordinated", "none"]


@dataclass(frozen=True)
class World:
    pools: tuple[Pool, ...]
    policies: tuple[Policy, ...]


@st.composite
def worlds(draw: st.DrawFn, contended: bool = False) -> World:
    """Random worlds; ``contended`` ones have one pool of reclaimable classes, no concurrency
    limits and a policy per project, so requests compete and preemption is frequent."""
    pools: list[Pool] = []
    policies: list[Policy] = []
    no_limit = st.just(None)
    for p in range(1 if contended else draw(st.integers(1, 2))):
        classes = []
        for c in range(draw(st.integers(1, 2 if contended else 3))):
            gpus = [4, 6, 8] if contended else [2, 4, 6, 8, 8, 0, None]
            capacity = {
                "GPU": draw(st.sampled_from(gpus)),
                "CPU": draw(st.sampled_from([4000, 8000, None])),
            }
            classes.append(
                klass(
                    f"c{c}",
                    rank=draw(st.integers(0, 2)),
                    reclaimable=draw(
                        st.sampled_from(_RECLAIMABLE[:3] if contended else _RECLAIMABLE)
                    ),
                    concurrency_limit=draw(
                        no_limit if contended else st.sampled_from([None, None, None, 1, 3])
                    ),
                    **capacity,
                )
            )
        made = pool(
            f"pool{p}",
            *classes,
            rank=draw(st.integers(0, 2)),
            concurrency_limit=draw(
                no_limit if contended else st.sampled_from([None, None, None, 2, 5])
            ),
            fair_sharing=draw(st.booleans()),
        )
        pools.append(made)
        projects = st.lists(st.sampled_from(PROJECTS), min_size=2, max_size=3, unique=True)
        for project in PROJECTS if contended else draw(projects):
            grants = []
            if contended or draw(st.booleans()):
                for capacity_class in classes:
                    if not (contended or draw(st.booleans())):
                        continue
                    gpu_cap = capacity_class.capacity["GPU"]
                    top = 3 if gpu_cap is None else gpu_cap
                    reserved = draw(st.integers(0, min(top, 2 if contended else 3)))
                    limit = draw(st.one_of(st.none(), st.integers(reserved, max(reserved, top))))
                    grants.append(grant(capacity_class.name, GPU=res(reserved, limit)))
            candidate = policy(
                project,
                made,
                *grants,
                priority=draw(st.integers(0, 5)),
                lane=draw(st.integers(0, 9)) == 0,
                group=draw(st.sampled_from([None, None, "g"])),
                concurrency_limit=draw(
                    no_limit if contended else st.sampled_from([None, None, None, 2])
                ),
            )
            try:
                validate_reserved_totals(
                    made, [*[x for x in policies if x.pool_id == made.id], candidate]
                )
            except InputError:
                candidate = candidate.model_copy(update={"grants": ()})
            policies.append(candidate)
    return World(tuple(pools), tuple(policies))


@st.composite
def new_requests(
    draw: st.DrawFn, prefix: str, created: float, contended: bool = False
) -> list[ResourceRequest]:
    made = []
    for i in range(draw(st.integers(0, 5))):
        demands = []
        for _ in range(draw(st.integers(1, 2))):
            resource = draw(st.sampled_from(RESOURCES))
            quantity = draw(st.integers(1, 4)) if resource == "GPU" else draw(st.integers(1, 3))
            class_name = draw(st.sampled_from([None, None, None, "c0"]))
            demands.append(Demand(resource=resource, quantity=quantity, class_name=class_name))
        group = None
        if draw(st.booleans()):
            group = SubjectSelector(
                subject_type="project", subject_id=draw(st.sampled_from(PROJECTS))
            )
        made.append(
            request(
                f"{prefix}-{i}",
                *demands,
                project=draw(st.sampled_from(PROJECTS)),
                created=created,
                tolerance=draw(st.sampled_from(_TOLERANCES[:3] if contended else _TOLERANCES)),
                lease=draw(st.sampled_from([None, 5, 20, 60])),
                wait_timeout=draw(st.sampled_from([None, None, 30])),
                group=group,
            )
        )
    return made


def snapshot_of(world: World, requests: list[ResourceRequest]) -> Snapshot:
    return Snapshot.of(pools=world.pools, policies=world.policies, requests=requests)


def with_requests(snapshot: Snapshot, requests: list[ResourceRequest]) -> Snapshot:
    """``snapshot``'s very configuration tuples (a kept index serves it) with ``requests``."""
    return Snapshot(snapshot.descriptors, snapshot.pools, snapshot.policies, tuple(requests))


def check_invariants(before: Snapshot, decisions: CycleDecisions, after: Snapshot) -> None:
    """Everything that must hold for any cycle, given the state before and after it."""
    _check_capacity(after)
    _check_decisions(before, decisions)


def _check_capacity(state: Snapshot) -> None:
    pools = {p.id: p for p in state.pools}
    policies = {p.id: p for p in state.policies}
    used: dict[tuple[object, str, str], int] = defaultdict(int)
    by_policy: dict[tuple[object, str, str], int] = defaultdict(int)
    pinned: dict[tuple[object, str, str], int] = defaultdict(int)
    pool_count: dict[object, int] = defaultdict(int)
    class_count: dict[tuple[object, str], int] = defaultdict(int)
    policy_count: dict[object, int] = defaultdict(int)
    for r in state.requests:
        if r.status not in (S.ALLOCATED, S.PREEMPTING):
            continue
        assert r.allocations, "a holding request has allocations"
        pool_count[r.allocations[0].pool_id] += 1
        policy_count[r.allocations[0].policy_id] += 1
        for class_name in {a.class_name for a in r.allocations}:
            class_count[(r.allocations[0].pool_id, class_name)] += 1
        for a in r.allocations:
            used[(a.pool_id, a.class_name, a.resource)] += a.base_quantity
            by_policy[(a.policy_id, a.class_name, a.resource)] += a.base_quantity
            if r.reclaim_tolerance is ReclaimTolerance.NONE:
                pinned[(a.policy_id, a.class_name, a.resource)] += a.base_quantity
    for pool_id, made in pools.items():
        if made.concurrency_limit is not None:
            assert pool_count[pool_id] <= made.concurrency_limit
        for capacity_class in made.classes:
            if capacity_class.concurrency_limit is not None:
                assert (
                    class_count[(pool_id, capacity_class.name)] <= capacity_class.concurrency_limit
                )
            for resource, capacity in capacity_class.capacity.items():
                if capacity is None:
                    continue
                key = (pool_id, capacity_class.name, resource)
                assert used[key] <= capacity, f"over-allocated {key}: {used[key]} > {capacity}"
                if capacity_class.reclaimable is Reclaimable.NEVER:
                    _check_protected(
                        state, pool_id, capacity_class.name, resource, capacity, by_policy
                    )
                else:
                    _check_pinned(state, pool_id, capacity_class.name, resource, pinned)
    for policy_id, made in policies.items():
        if made.concurrency_limit is not None:
            assert policy_count[policy_id] <= made.concurrency_limit
        for g in made.grants:
            for resource, entry in g.resources.items():
                if entry.limit is not None:
                    assert by_policy[(policy_id, g.class_name, resource)] <= entry.limit


def _check_protected(state, pool_id, class_name, resource, capacity, by_policy) -> None:
    reserved_total = 0
    over = 0
    for made in state.policies:
        if made.pool_id != pool_id:
            continue
        entry = next(
            (g.resources.get(resource) for g in made.grants if g.class_name == class_name), None
        )
        reserved = entry.reserved if entry else 0
        reserved_total += reserved
        over += max(0, by_policy[(made.id, class_name, resource)] - reserved)
    assert over <= capacity - reserved_total, "a never-reclaimable class lent a reserved share"


def _check_pinned(state, pool_id, class_name, resource, pinned) -> None:
    """Tolerance ``none`` never borrows in a reclaimable class: each policy's pinned usage fits
    its reserved share, so Σ pinned ≤ Σ reserved ≤ capacity and every share stays recoverable."""
    for made in state.policies:
        if made.pool_id != pool_id:
            continue
        entry = next(
            (g.resources.get(resource) for g in made.grants if g.class_name == class_name), None
        )
        reserved = entry.reserved if entry else 0
        held = pinned[(made.id, class_name, resource)]
        assert held <= reserved, f"tolerance 'none' borrowed {held - reserved} of {resource}"


def _check_decisions(before: Snapshot, decisions: CycleDecisions) -> None:
    requests = {r.id: r for r in before.requests}
    pools = {p.id: p for p in before.pools}
    policies = {p.id: p for p in before.policies}
    now = decisions.now
    seen: set[object] = set()
    for admission in decisions.admissions:
        request_ = requests[admission.request_id]
        assert request_.status is S.PENDING
        indices = sorted(
            a.demand_index for a in admission.allocations if a.demand_index is not None
        )
        assert indices == list(range(len(request_.demands))), "all-or-nothing"
        assert {a.pool_id for a in admission.allocations} == {admission.pool_id}
        assert {a.policy_id for a in admission.allocations} == {admission.policy_id}
        for a in admission.allocations:
            assert pools[a.pool_id].capacity_class(a.class_name) is not None
        seen.add(admission.request_id)
    preemptors = {p.preemptor_id for p in decisions.preemptions}
    victims = [p.victim_id for p in decisions.preemptions]
    assert len(victims) == len(set(victims)), "a victim is taken once"
    assert not preemptors & set(victims), "no victim preempts in the same cycle"
    for preemption in decisions.preemptions:
        victim, waiter = requests[preemption.victim_id], requests[preemption.preemptor_id]
        assert victim.status is S.ALLOCATED and waiter.status is S.PENDING
        assert victim.reclaim_tolerance is not ReclaimTolerance.NONE
        victim_policy = policies.get(victim.allocations[0].policy_id)
        assert not victim.allocations[0].priority_lane, "lane allocations are never victims"
        for a in victim.allocations:
            assert (
                pools[a.pool_id].capacity_class(a.class_name).reclaimable is not Reclaimable.NEVER
            )
        if waiter.preemption_group is not None:
            from wharf.resource_manager.domain import SubjectSet

            assert not waiter.preemption_group.matches(SubjectSet.of(victim.subjects))
        assert victim_policy is not None
    for expiry in decisions.expiries:
        request_ = requests[expiry.request_id]
        lease, deadline = request_.lease_expires_at, request_.allocation_deadline
        assert (lease is not None and lease <= now) or (
            request_.status is S.PENDING and deadline is not None and deadline <= now
        ), "nothing expires before its deadline"
        seen.add(expiry.request_id)
    for rejection in decisions.rejections:
        assert requests[rejection.request_id].status is S.PENDING
        assert rejection.request_id not in seen
        seen.add(rejection.request_id)
    for wait in decisions.waits:
        assert wait.request_id not in seen and wait.reason
