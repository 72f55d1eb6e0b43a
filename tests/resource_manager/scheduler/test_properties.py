"""Property tests: random worlds driven through many cycles must keep every invariant.

Invariants (see ``worlds.check_invariants``): never over-allocate (per slot, per grant limit,
per concurrency limit, never-reclaimable shares); all-or-nothing admission from one pool and
one policy; no victim preempts in the same cycle and each victim is taken once; priority-lane
allocations and tolerance ``none`` are never victims; nothing expires before its deadline;
and the same snapshot and ``now`` give the same decisions whatever the input order. In a
fair-sharing pool, equal priorities are served by the dominant share each policy would have
after admitting its next request.
"""

from __future__ import annotations

import random
import uuid

from hypothesis import given
from hypothesis import strategies as st

from tests.resource_manager.builders import at, gpu, holding, klass, policy, pool, request
from tests.resource_manager.scheduler.worlds import (
    PROFILE,
    check_invariants,
    new_requests,
    snapshot_of,
    with_requests,
    worlds,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import release
from wharf.resource_manager.scheduler import (
    CycleDecisions,
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    schedule,
)


@PROFILE
@given(world=st.one_of(worlds(), worlds(contended=True)), data=st.data())
def test_random_histories_keep_every_invariant(world, data):
    state = snapshot_of(world, [])
    contended = len(world.pools) == 1 and all(p.concurrency_limit is None for p in world.pools)
    now = 0
    prepared: Prepared | None = None
    for cycle in range(data.draw(st.integers(3, 8), label="cycles")):
        now += data.draw(st.sampled_from([1, 4, 15]), label="elapsed")
        arrivals = data.draw(new_requests(f"c{cycle}", now, contended), label="arrivals")
        requests = list(state.requests) + arrivals
        # holders finish at random, preempted ones included (that is how capacity returns)
        finished = data.draw(
            st.sets(st.integers(0, max(0, len(requests) - 1)), max_size=3), label="finished"
        )
        requests = [
            release(r, at(now)) if i in finished and r.holds_capacity else r
            for i, r in enumerate(requests)
        ]
        before = with_requests(state, requests)
        decisions = schedule(before, at(now))
        # An index kept across cycles (as the service keeps one) only saves work: its
        # per-request routes never change a decision, whatever happened to the request.
        if prepared is None:
            prepared = Prepared(before, SchedulerOptions().route_search_budget)
        assert prepared.serves(before, SchedulerOptions().route_search_budget)
        assert schedule(before, at(now), prepared=prepared) == decisions
        state = apply_decisions(before, decisions)
        check_invariants(before, decisions, state)


@PROFILE
@given(world=worlds(), data=st.data())
def test_same_snapshot_and_now_give_the_same_decisions_in_any_input_order(world, data):
    state = snapshot_of(world, [])
    for cycle in range(3):
        requests = list(state.requests) + data.draw(new_requests(f"c{cycle}", cycle))
        state = apply_decisions(
            with_requests(state, requests), schedule(with_requests(state, requests), at(cycle))
        )
    requests = list(state.requests) + data.draw(new_requests("last", 10))
    snapshot = with_requests(state, requests)
    shuffler = random.Random(data.draw(st.integers(0, 2**32), label="seed"))
    shuffled = Snapshot(
        snapshot.descriptors,
        tuple(shuffler.sample(snapshot.pools, len(snapshot.pools))),
        tuple(shuffler.sample(snapshot.policies, len(snapshot.policies))),
        tuple(shuffler.sample(snapshot.requests, len(snapshot.requests))),
    )
    assert schedule(snapshot, at(11)) == schedule(snapshot, at(11))
    assert schedule(shuffled, at(11)) == schedule(snapshot, at(11))


@PROFILE
@given(world=worlds(contended=True), data=st.data())
def test_a_victims_resubmission_never_preempts_its_preemptor(world, data):
    """Right after a preemption, the victim comes back with the same demands: it must not take
    the capacity back from the request that preempted it (no ping-pong)."""
    state = snapshot_of(world, [])
    for cycle in range(4):
        requests = list(state.requests) + data.draw(new_requests(f"c{cycle}", cycle, True))
        before = with_requests(state, requests)
        decisions = schedule(before, at(cycle))
        state = apply_decisions(before, decisions)
        for preemption in decisions.preemptions:
            _check_no_ping_pong(state, preemption.victim_id, preemption.preemptor_id, cycle)


def _check_no_ping_pong(state: Snapshot, victim_id, preemptor_id, cycle: int) -> None:
    victim = next(r for r in state.requests if r.id == victim_id)
    clone = victim.model_copy(
        update={
            "id": uuid.uuid5(victim_id, "resubmitted"),
            "status": S.PENDING,
            "status_reason": None,
            "allocations": (),
            "allocated_at": None,
            "preemption_initiated_by_id": None,
            "created_at": at(cycle + 0.5),
            "lease_expires_at": None,
            "allocation_deadline": None,
        }
    )
    requests = [release(r, at(cycle + 0.5)) if r.id == victim_id else r for r in state.requests]
    follow = with_requests(state, [*requests, clone])
    for extra in range(1, 3):
        decisions = schedule(follow, at(cycle + extra))
        for preemption in decisions.preemptions:
            assert not (
                preemption.preemptor_id == clone.id and preemption.victim_id == preemptor_id
            ), "a victim's resubmission preempted its preemptor"
        follow = apply_decisions(follow, decisions)


_PPM = 1_000_000


@PROFILE
@given(data=st.data())
def test_fair_sharing_serves_the_lowest_share_after_admission_first(data):
    """One fair-sharing pool of one slot, policies of equal priority with no reserved share
    (all usage is borrowed), some already holding: the admissions are, in order, the longest
    prefix that fits of the merge that always takes, among each policy's oldest waiting
    request, the one whose policy's share after admitting it, (usage + amount) / capacity /
    weight in parts per million, is lowest (ties: the earlier request). Once a head does not
    fit it holds what is free (it cannot reclaim: it has no reserved share), so nothing behind
    it is admitted."""
    weights = data.draw(st.lists(st.integers(1, 3), min_size=2, max_size=3), label="weights")
    held = [data.draw(st.integers(0, 4), label=f"held{i}") for i in range(len(weights))]
    asks = data.draw(
        st.lists(st.tuples(st.integers(0, len(weights) - 1), st.integers(1, 5)), max_size=8),
        label="asks",
    )
    capacity = sum(held) + data.draw(st.integers(0, sum(a for _, a in asks) + 1), label="room")
    capacity = max(capacity, 1)
    p = pool("fair", klass("c", GPU=capacity), fair_sharing=True)
    policies = [policy(f"t{i}", p, weight=w) for i, w in enumerate(weights)]
    requests = [
        holding(f"held{i}", p, policies[i], {("c", "GPU"): amount})
        for i, amount in enumerate(held)
        if amount
    ]
    pending = [
        request(f"r{n}", gpu(amount), project=f"t{who}", created=1 + n % 3)
        for n, (who, amount) in enumerate(asks)
    ]
    snap = _one_pool(p, policies, requests + pending)
    decisions = schedule(snap, at(10))
    assert _admitted_names(decisions, snap) == _expected_order(
        weights, held, asks, pending, capacity
    )


def _one_pool(p, policies, requests) -> Snapshot:
    return Snapshot.of(pools=[p], policies=policies, requests=requests)


def _admitted_names(decisions: CycleDecisions, snap: Snapshot) -> list[str]:
    by_id = {r.id: r.metadata["name"] for r in snap.requests}
    return [by_id[a.request_id] for a in decisions.admissions]


def _expected_order(weights, held, asks, pending, capacity) -> list[str]:
    queues: list[list[tuple[tuple[object, int], int, str]]] = [[] for _ in weights]
    for r, (who, amount) in zip(pending, asks, strict=True):
        if amount > capacity:
            continue  # rejected: it could never fit
        queues[who].append(((r.created_at, r.id.int), amount, r.metadata["name"]))
    for queue in queues:
        queue.sort(key=lambda item: item[0])
    usage, free, order = list(held), capacity - sum(held), []
    while any(queues):
        heads = [
            ((usage[i] + queue[0][1]) * _PPM // capacity // weights[i], queue[0][0], i)
            for i, queue in enumerate(queues)
            if queue
        ]
        _, _, who = min(heads)
        _, amount, name = queues[who].pop(0)
        if amount > free:
            break
        free -= amount
        usage[who] += amount
        order.append(name)
    return order
