"""The cycle's edges: inputs, applying decisions, configuration that changed under allocations."""

from __future__ import annotations

import dataclasses
from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.resource_manager.builders import (
    admitted,
    at,
    demand,
    gpu,
    holding,
    klass,
    policy,
    pool,
    request,
    run,
    snapshot,
    uid,
)
from tests.resource_manager.scheduler.worlds import (
    PROFILE,
    new_requests,
    snapshot_of,
    with_requests,
    worlds,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalTransitionError, InputError
from wharf.resource_manager.scheduler import (
    Admission,
    CycleDecisions,
    Prepared,
    SchedulerOptions,
    Snapshot,
    apply_decisions,
    run_cycle,
    schedule,
)

P = pool("p", klass("c", GPU=4))
TEAM = policy("team", P)


def test_now_must_be_timezone_aware():
    with pytest.raises(InputError, match="timezone-aware"):
        schedule(snapshot([P], [TEAM], []), datetime(2026, 1, 1))


@pytest.mark.parametrize(
    ("pools", "policies", "requests", "message"),
    [
        ([P, P], [], [], "Duplicate pool id"),
        ([P], [TEAM, TEAM], [], "Duplicate policy id"),
        ([P], [TEAM], [request("r"), request("r")], "Duplicate request id"),
    ],
)
def test_snapshot_rejects_duplicates(pools, policies, requests, message):
    with pytest.raises(InputError, match=message):
        Snapshot.of(pools=pools, policies=policies, requests=requests)


def test_apply_decisions_moves_statuses_and_records_allocations_and_reasons():
    snap = snapshot(
        [P],
        [TEAM],
        [request("fits", gpu(4)), request("waits", gpu(1), created=1), request("x", project="?")],
    )
    after = apply_decisions(snap, run(snap, 3))
    by_name = {r.metadata["name"]: r for r in after.requests}
    assert by_name["fits"].status is S.ALLOCATED
    assert by_name["fits"].allocated_at == at(3)
    assert [a.base_quantity for a in by_name["fits"].allocations] == [4]
    assert by_name["waits"].status is S.PENDING
    assert by_name["waits"].status_reason.startswith("Waiting")
    assert by_name["x"].status is S.REJECTED
    assert snap.requests[0].status is S.PENDING  # the input snapshot is untouched


def test_apply_refuses_inconsistent_decisions():
    done = holding("held", P, TEAM, {("c", "GPU"): 1}).model_copy(update={"status": S.RELEASED})
    snap = snapshot([P], [TEAM], [done])
    bogus = CycleDecisions(
        now=at(1),
        admissions=(Admission(uid("request:held"), P.id, TEAM.id, (), "no"),),
    )
    with pytest.raises(IllegalTransitionError):
        apply_decisions(snap, bogus)


def test_allocations_of_a_deleted_policy_still_count():
    gone = policy("gone", P, priority=3)
    snap = snapshot(
        [P], [TEAM], [holding("orphan", P, gone, {("c", "GPU"): 4}), request("r", gpu(1))]
    )
    decisions = run(snap)
    assert not decisions.admissions
    # the stand-in policy keeps the admitted priority (3 > 0): it cannot be preempted by team
    assert not decisions.preemptions


def test_allocations_in_a_deleted_class_are_ignored():
    renamed = pool("p", klass("renamed", GPU=4))
    snap = snapshot(
        [renamed],
        [policy("team", renamed)],
        [holding("old", P, TEAM, {("c", "GPU"): 4}), request("r", gpu(4))],
    )
    assert admitted(run(snap), snap) == ["r"]


def test_cycle_stats_and_internals():
    snap = snapshot([P], [TEAM], [request("a", gpu(1)), request("b", gpu(1), created=1)])
    cycle = run_cycle(snap, at(1))
    assert cycle.decisions.stats["pending"] == 2
    assert cycle.decisions.decision_count == 2
    assert cycle.ledger.used == [2]


def test_a_kept_index_forgets_the_routes_of_requests_that_left_the_queue() -> None:
    # The service keeps one Prepared between cycles; the routes it remembers per request must
    # not outlive the request's time in the queue (they kept every request's subjects and
    # demands alive, which full garbage collections then walked inside the transaction).
    budget = SchedulerOptions().route_search_budget
    big = request("big", gpu(4), created=1)
    small = request("small", gpu(1), created=2)
    first = snapshot([P], [TEAM], [big, small])
    prepared = Prepared(first, budget)
    decisions = schedule(first, at(10), prepared=prepared)
    assert decisions == schedule(first, at(10))
    assert prepared.nominator.request_count == 2
    # "big" was admitted: only "small" is pending from now on.
    later = Snapshot(
        descriptors=first.descriptors,
        pools=first.pools,
        policies=first.policies,
        requests=apply_decisions(first, decisions).requests,
    )
    for seconds in (11, 12):
        assert schedule(later, at(seconds), prepared=prepared) == schedule(later, at(seconds))
    assert prepared.nominator.request_count == 2  # "small" in each of the last two cycles
    assert big.id.int not in prepared.nominator._by_request
    assert big.id.int not in prepared.nominator._previous


def test_a_kept_index_routes_a_request_again_when_its_demands_differ() -> None:
    # Routes are remembered per request id; one that comes back with other demands (a
    # snapshot built by hand, or a bug upstream) must be routed from scratch, not reused.
    budget = SchedulerOptions().route_search_budget
    held = holding("held", P, TEAM, {("c", "GPU"): 4})
    first = snapshot([P], [TEAM], [held, request("r", gpu(2))])
    prepared = Prepared(first, budget)
    assert schedule(first, at(10), prepared=prepared).waits  # remembered while it waits
    changed = Snapshot(
        descriptors=first.descriptors,
        pools=first.pools,
        policies=first.policies,
        requests=(held, request("r", demand("licence", 1))),
    )
    assert prepared.serves(changed, budget)
    decisions = schedule(changed, at(11), prepared=prepared)
    assert decisions == schedule(changed, at(11))
    assert [r.request_id for r in decisions.rejections] == [uid("request:r")]


def test_a_kept_index_hands_an_unchanged_request_a_fresh_candidate_each_cycle() -> None:
    # A request that is the same object cycle after cycle gets its candidate back, with the
    # per-cycle fields reset: here whether it was already checked against a lower-ranked pool
    # this cycle. Pool "a" (walked first) is full, with a holder "team" may preempt; pool "b"
    # is free when "a" is walked, but a "vip" request takes it first in b's own walk, in both
    # cycles. So "r" defers to "b" (no preemption in "a") each time.
    first_pool = pool("a", klass("a", GPU=1), rank=1)
    second_pool = pool("b", klass("b", GPU=1), rank=0)
    team_a = policy("team", first_pool, priority=5)
    low_a = policy("low", first_pool)
    team_b = policy("team", second_pool)
    vip_b = policy("vip", second_pool, priority=9)
    policies = [team_a, low_a, team_b, vip_b]
    held = holding("held", first_pool, low_a, {("a", "GPU"): 1})
    r = request("r", gpu(1), created=1)
    budget = SchedulerOptions().route_search_budget
    first = snapshot(
        [first_pool, second_pool], policies, [held, r, request("q1", project="vip", created=2)]
    )
    prepared = Prepared(first, budget)
    decisions = schedule(first, at(10), prepared=prepared)
    assert admitted(decisions, first) == ["q1"] and not decisions.preemptions
    # q1 ended, q2 arrived; r is the very same object as before
    second = Snapshot(
        descriptors=first.descriptors,
        pools=first.pools,
        policies=first.policies,
        requests=(held, r, request("q2", project="vip", created=11)),
    )
    decisions = schedule(second, at(12), prepared=prepared)
    assert decisions == schedule(second, at(12))
    assert admitted(decisions, second) == ["q2"] and not decisions.preemptions


@PROFILE
@given(world=st.one_of(worlds(), worlds(contended=True)), data=st.data())
def test_leaving_out_unchanged_waits_changes_nothing_else(world, data):
    # The service asks only for waits with a new reason; applying those leaves every request
    # as applying all of them does.
    quiet = SchedulerOptions(unchanged_waits=False)
    state = snapshot_of(world, data.draw(new_requests("a", 0.0)))
    for round_ in range(1, 4):
        state = with_requests(
            state, [*state.requests, *data.draw(new_requests(f"r{round_}", float(round_)))]
        )
        full = schedule(state, at(round_ + 0.5))
        lean = schedule(state, at(round_ + 0.5), quiet)
        reasons = {r.id: r.status_reason for r in state.requests}
        assert lean.waits == tuple(w for w in full.waits if reasons[w.request_id] != w.reason)
        assert dataclasses.replace(lean, waits=full.waits) == full
        assert apply_decisions(state, lean) == apply_decisions(state, full)
        state = apply_decisions(state, full)
