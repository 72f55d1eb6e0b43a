"""The holder state a kept :class:`Prepared` carries between cycles gives exactly what a cycle
built from scratch gives: the same holders, the same usage, the same ``borrowed`` amounts and
so the same decisions, whatever came and went between cycles (requests replaced by equal
copies, holders whose policy was deleted, releases, preemptions)."""

from __future__ import annotations

import dataclasses
import uuid

from hypothesis import given
from hypothesis import strategies as st

from tests.resource_manager.builders import (
    at,
    gpu,
    grant,
    holding,
    klass,
    policy,
    pool,
    request,
    res,
    snapshot,
)
from tests.resource_manager.scheduler.worlds import (
    PROFILE,
    new_requests,
    snapshot_of,
    with_requests,
    worlds,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import ResourceRequest, release
from wharf.resource_manager.scheduler import (
    LiveSplit,
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    phase5_preempt,
)
from wharf.resource_manager.scheduler.cycle import CycleRun, run_cycle
from wharf.resource_manager.scheduler.holder_state import HolderState
from wharf.resource_manager.scheduler.holders import Holder, HolderIndex, build_holders
from wharf.resource_manager.scheduler.phase5_preempt import Waiter

BUDGET = SchedulerOptions().route_search_budget
LIVE = {S.PENDING, S.ALLOCATED, S.PREEMPTING}


def _usage(run: CycleRun) -> tuple[object, ...]:
    ledger = run.ledger
    return (
        ledger.used,
        ledger.returning,
        ledger.claimed,
        ledger.over,
        # a (policy, slot) whose holders all left reads 0 whether its key remains or not
        {key: used for key, used in ledger.policy_used.items() if used},
        {key: used for key, used in ledger.pinned_used.items() if used},
        ledger.pool_count,
        ledger.class_count,
        ledger.policy_count,
    )


def _borrowed(run: CycleRun) -> dict[uuid.UUID, dict[int, int]]:
    return {key: dict(holder.borrowed) for key, holder in run.holders.by_id.items()}


def _orphaned(request: ResourceRequest) -> ResourceRequest:
    """``request`` as if the policy that admitted it had been deleted since."""
    gone = uuid.uuid4()
    allocations = tuple(a.model_copy(update={"policy_id": gone}) for a in request.allocations)
    return request.model_copy(update={"allocations": allocations})


def _change(
    request: ResourceRequest, now: float, *, ended: bool, orphaned: bool, copied: bool
) -> ResourceRequest:
    if ended:
        return release(request, at(now))
    if orphaned:
        return _orphaned(request)
    return request.model_copy() if copied else request


@PROFILE
@given(world=st.one_of(worlds(), worlds(contended=True)), data=st.data())
def test_a_kept_holder_state_matches_holders_built_from_scratch(world, data):
    state = snapshot_of(world, [])
    prepared: Prepared | None = None
    now = 0
    for cycle in range(data.draw(st.integers(3, 8), label="cycles")):
        now += data.draw(st.sampled_from([1, 4, 15]), label="elapsed")
        requests = list(state.requests) + data.draw(
            new_requests(f"c{cycle}", now, len(world.pools) == 1), label="arrivals"
        )
        holding = [i for i, r in enumerate(requests) if r.holds_capacity]
        # Holders end (preempting ones too), are replaced by equal copies (a new object is
        # a changed request to the state), or lose their policy.
        ended = data.draw(
            st.sets(st.sampled_from(holding), max_size=3) if holding else st.just(set())
        )
        copied = data.draw(
            st.sets(st.sampled_from(holding), max_size=3) if holding else st.just(set())
        )
        orphan = data.draw(st.sampled_from([None, *holding]) if holding else st.none())
        changed = [
            _change(request, now, ended=i in ended, orphaned=i == orphan, copied=i in copied)
            for i, request in enumerate(requests)
        ]
        before = with_requests(state, changed)
        if prepared is None:
            prepared = Prepared(before, BUDGET)
        kept = run_cycle(before, at(now), prepared=prepared)
        fresh = run_cycle(before, at(now))
        assert kept.decisions == fresh.decisions
        assert kept.holders.by_id.keys() == fresh.holders.by_id.keys()
        assert _usage(kept) == _usage(fresh)
        assert _borrowed(kept) == _borrowed(fresh)
        # Holdings taken over from the admissions of the cycle before equal derived ones.
        assert {k: h.holding for k, h in kept.holders.by_id.items()} == {
            k: h.holding for k, h in fresh.holders.by_id.items()
        }
        state = apply_decisions(before, kept.decisions)


P = pool("p", klass("c", GPU=8))
TEAM = policy("team", P)


def _holders() -> tuple[Snapshot, list[ResourceRequest]]:
    holders = [holding(f"h{i}", P, TEAM, {("c", "GPU"): 1}, allocated=i) for i in range(4)]
    return snapshot([P], [TEAM], holders), holders


def test_a_holder_whose_policy_is_gone_makes_the_state_start_over():
    snap, holders = _holders()
    prepared = Prepared(snap, BUDGET)
    state = prepared.holder_state
    assert state.update(holders) is not None
    assert state.update([*holders, _orphaned(holders[0])]) is None
    # Emptied: the next update builds everything again, equal to a fresh index.
    index = state.update(holders)
    assert index is not None
    assert index.by_id.keys() == build_holders(prepared.catalog, holders).by_id.keys()


def test_a_request_admitted_last_cycle_holds_what_its_admission_charged():
    """The next cycle takes the holding over from the admission (its very allocations), and it
    equals the one derived from the allocations; equal copies of them are derived again."""
    waiting = [request(f"r{i}", gpu(1 + i % 2), created=i) for i in range(3)]
    snap = snapshot([P], [TEAM], waiting)
    prepared = Prepared(snap, BUDGET)
    first = run_cycle(snap, at(1), prepared=prepared)
    assert len(first.decisions.admissions) == 3
    after = apply_decisions(snap, first.decisions)
    copied = after.requests[0].model_copy(
        update={"allocations": tuple(a.model_copy() for a in after.requests[0].allocations)}
    )
    after = with_requests(after, [copied, *after.requests[1:]])
    second = run_cycle(after, at(2), prepared=prepared)
    fresh = build_holders(prepared.catalog, after.requests)
    for admission in first.decisions.admissions:
        holder = second.holders.by_id[admission.request_id]
        assert holder.holding == fresh.by_id[admission.request_id].holding
        charged = first.admitter.held[admission.request_id.int][1]
        assert (holder.holding is charged) is (admission.request_id != copied.id)


def test_the_state_drops_what_left_and_keeps_the_same_objects():
    snap, holders = _holders()
    state = HolderState(Prepared(snap, BUDGET).catalog)
    first = state.update(holders)
    assert first is not None
    kept = dict(first.by_id)
    second = state.update(holders[1:])
    assert second is not None
    assert holders[0].id not in second.by_id
    assert all(second.by_id[r.id] is kept[r.id] for r in holders[1:])
    assert sum(state.ledger.pool_count) == len(holders) - 1


def test_borrowed_amounts_follow_holders_that_leave_or_come():
    """The first two holders fill the reserved share; the later ones borrow. When an early
    holder leaves, the next in allocation order moves into the share (with no other change
    in its group): the state recomputes the group, as a fresh index does."""
    shared = policy("shared", P, grant("c", GPU=res(2)))
    holders = [holding(f"b{i}", P, shared, {("c", "GPU"): 1}, allocated=i) for i in range(4)]
    prepared = Prepared(snapshot([P], [shared], holders), BUDGET)
    state = prepared.holder_state
    for now in (
        holders,
        holders[1:],
        [*holders[1:], holding("b9", P, shared, {("c", "GPU"): 1}, allocated=9)],
    ):
        index = state.update(now)
        assert index is not None
        fresh = build_holders(prepared.catalog, now)
        assert {k: dict(h.borrowed) for k, h in index.by_id.items()} == {
            k: dict(h.borrowed) for k, h in fresh.by_id.items()
        }
    assert [bool(index.by_id[r.id].borrowed) for r in now] == [False, False, True, True]


def _lease_free(request: ResourceRequest) -> ResourceRequest:
    return request.model_copy(update={"lease_expires_at": None, "allocation_deadline": None})


@PROFILE
@given(world=st.one_of(worlds(), worlds(contended=True)), data=st.data())
def test_a_snapshot_split_by_its_caller_gives_the_same_decisions(world, data):
    """The service hands over its live, lease-free requests already split into pending and
    holding: the cycle must decide exactly as it does when it splits them itself."""
    state = snapshot_of(world, [])
    prepared: Prepared | None = None
    for cycle in range(data.draw(st.integers(2, 6), label="cycles")):
        arrivals = data.draw(new_requests(f"c{cycle}", cycle, len(world.pools) == 1))
        requests = [_lease_free(r) for r in (*state.requests, *arrivals) if r.status in LIVE]
        pending = tuple(r for r in requests if r.status is S.PENDING)
        holding = tuple(r for r in requests if r.holds_capacity)
        plain = with_requests(state, [*holding, *pending])
        split = dataclasses.replace(plain, split=LiveSplit(pending, holding))
        if prepared is None:
            prepared = Prepared(plain, BUDGET)
        decisions = run_cycle(plain, at(cycle)).decisions
        assert run_cycle(split, at(cycle), prepared=prepared).decisions == decisions
        state = apply_decisions(plain, decisions)


def _every_candidate(holders: HolderIndex, waiter: Waiter, taken: set[uuid.UUID]) -> list[Holder]:
    """Victim candidates the plain way: every allocated holder of a deficit slot not taken."""
    found: dict[uuid.UUID, Holder] = {}
    for slot in sorted(waiter.deficit_slots):
        for holder in holders.in_slot(slot):
            if not holder.preempting and holder.request.id not in taken:
                found.setdefault(holder.request.id, holder)
    return list(found.values())


@PROFILE
@given(world=worlds(contended=True), data=st.data())
def test_preemption_walks_only_groups_that_may_yield_and_decides_the_same(world, data):
    """Victims are looked for only in (policy, slot) groups that borrow, among policies the
    waiter may preempt: the decisions are those of a walk over every holder."""
    state = snapshot_of(world, [])
    for cycle in range(data.draw(st.integers(3, 8), label="cycles")):
        requests = list(state.requests) + data.draw(new_requests(f"c{cycle}", cycle, True))
        finished = data.draw(st.sets(st.integers(0, max(0, len(requests) - 1)), max_size=2))
        requests = [
            release(r, at(cycle)) if i in finished and r.holds_capacity else r
            for i, r in enumerate(requests)
        ]
        before = with_requests(state, requests)
        decisions = run_cycle(before, at(cycle)).decisions
        indexed = phase5_preempt._candidates
        phase5_preempt._candidates = _every_candidate
        try:
            assert run_cycle(before, at(cycle)).decisions == decisions
        finally:
            phase5_preempt._candidates = indexed
        state = apply_decisions(before, decisions)
