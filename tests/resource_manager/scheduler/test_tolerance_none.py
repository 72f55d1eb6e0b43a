"""Reclaim tolerance ``none`` (issue 4 §2): it must fit a reserved share, even in a reclaimable
class, and never borrows there; in a never-reclaimable class its reserved share or the
unreserved capacity. Such a request is never a victim, so every other policy's reserved share
must stay recoverable from reclaimable holders alone."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.resource_manager.builders import (
    admitted,
    demand,
    gpu,
    grant,
    holding,
    klass,
    policy,
    pool,
    preempted,
    rejected,
    request,
    res,
    run,
    snapshot,
    step,
    waiting,
)
from tests.resource_manager.scheduler.worlds import check_invariants
from wharf.core.enums import ReclaimTolerance
from wharf.resource_manager.scheduler import NO_RESERVED_SHARE_FOR_NONE, Snapshot

P = pool("p", klass("h100", GPU=6, reclaimable="coordinated"))
TEAM = policy("team", P, grant("h100", GPU=res(2)))
OTHER = policy("other", P, grant("h100", GPU=res(4)))


def test_admitted_against_its_reserved_share_of_a_reclaimable_class():
    snap = snapshot([P], [TEAM, OTHER], [request("pinned", gpu(2), tolerance="none")])
    decisions = run(snap)
    assert admitted(decisions, snap) == ["pinned"]
    [admission] = decisions.admissions
    assert {a.class_name for a in admission.allocations} == {"h100"}


def test_never_borrows_in_a_reclaimable_class_even_with_free_capacity():
    snap = snapshot(
        [P],
        [TEAM, OTHER],
        [
            holding("held", P, TEAM, {("h100", "GPU"): 2}, tolerance="none"),
            request("more", gpu(1), tolerance="none", created=1),
            request("tolerant", gpu(1), tolerance="any", created=2),
        ],
    )
    decisions = run(snap)
    assert admitted(decisions, snap) == ["tolerant"]  # 4 GPU are free: only 'none' may not
    assert waiting(decisions, snap)["more"].startswith(
        "Waiting for policy 'team' reserved share of GPU in class 'h100' of pool 'p': "
        "reclaim_tolerance 'none' never borrows"
    )


def test_a_grantless_policy_admits_none_only_where_nothing_can_be_reclaimed():
    safe = pool("s", klass("h100", GPU=4), klass("safe", GPU=2, reclaimable="never"))
    guest = policy("guest", safe)
    snap = snapshot([safe], [guest], [request("g", gpu(2), project="guest", tolerance="none")])
    decisions = run(snap)
    assert admitted(decisions, snap) == ["g"]
    [admission] = decisions.admissions
    assert {a.class_name for a in admission.allocations} == {"safe"}  # grantless capacity
    too_big = snapshot([safe], [guest], [request("g", gpu(3), project="guest", tolerance="none")])
    [reason] = rejected(run(too_big), too_big).values()
    assert reason.startswith(NO_RESERVED_SHARE_FOR_NONE)


def test_an_unlimited_reclaimable_class_has_no_share_to_protect():
    unlimited = pool("u", klass("cpu", CPU=None))
    anyone = policy("anyone", unlimited)
    wants = request("n", demand("CPU", 4000), project="anyone", tolerance="none")
    snap = snapshot([unlimited], [anyone], [wants])
    assert admitted(run(snap), snap) == ["n"]


def test_may_reclaim_its_share_from_borrowers_and_is_never_a_victim():
    snap = snapshot(
        [P],
        [TEAM, OTHER],
        [
            holding("borrower", P, OTHER, {("h100", "GPU"): 6}, tolerance="any"),
            request("pinned", gpu(2), tolerance="none", created=1),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["borrower"]
    after = snapshot(
        [P],
        [TEAM, OTHER],
        [
            holding("pinned", P, TEAM, {("h100", "GPU"): 2}, tolerance="none"),
            request("owner", gpu(4), project="other", created=1),
        ],
    )
    assert admitted(run(after), after) == ["owner"]


def test_reclaimable_holders_of_its_policy_borrow_first():
    """The tolerance-'none' holder fills the share; the policy's older reclaimable holder is the
    borrower, so the other policy can take its reserved share back."""
    snap = snapshot(
        [P],
        [TEAM, OTHER],
        [
            holding("tolerant", P, TEAM, {("h100", "GPU"): 4}, allocated=0),
            holding("pinned", P, TEAM, {("h100", "GPU"): 2}, tolerance="none", allocated=1),
            request("owner", gpu(4), project="other", created=2),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["tolerant"]


# -- property: reserved shares stay recoverable ------------------------------------------------

_SHARES = st.lists(st.integers(0, 3), min_size=3, max_size=3).filter(lambda s: sum(s) <= 8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shares=_SHARES, data=st.data())
def test_every_reserved_share_stays_recoverable(shares, data):
    """Random tolerance mixes in one reclaimable class: invariants hold every cycle, and at the
    end each policy can still get its whole reserved share (its request for it is admitted
    once everything reclaimable has been preempted and released)."""
    made = pool("p", klass("h100", GPU=8, reclaimable="coordinated"))
    names = ("p0", "p1", "p2")
    policies = [
        policy(name, made, grant("h100", GPU=res(share)), priority=data.draw(st.integers(0, 2)))
        for name, share in zip(names, shares, strict=True)
    ]
    state = snapshot([made], policies, [])
    for cycle in range(data.draw(st.integers(2, 5))):
        arrivals = [
            request(
                f"c{cycle}-{i}",
                gpu(data.draw(st.integers(1, 3))),
                project=data.draw(st.sampled_from(names)),
                tolerance=data.draw(st.sampled_from(["none", "none", "any", "coordinated"])),
                created=cycle,
            )
            for i in range(data.draw(st.integers(0, 4)))
        ]
        requests = (*state.requests, *arrivals)
        before = Snapshot(state.descriptors, state.pools, state.policies, requests)
        state, decisions = step(before, cycle)
        check_invariants(before, decisions, state)
    live = [r for r in state.requests if r.holds_capacity]
    pinned_holders = [r for r in live if r.reclaim_tolerance is ReclaimTolerance.NONE]
    for made_policy, share in zip(policies, shares, strict=True):
        held = sum(
            a.base_quantity
            for r in pinned_holders
            for a in r.allocations
            if a.policy_id == made_policy.id
        )
        assert held <= share, "tolerance 'none' never borrows"
        if share - held <= 0:
            continue
        probe = request("probe", gpu(share - held), project=made_policy.name, created=100)
        # Once every reclaimable holder is gone (preempted and released), the share fits.
        trial = Snapshot(state.descriptors, state.pools, state.policies, (*pinned_holders, probe))
        assert admitted(run(trial, 101), trial) == ["probe"], (shares, made_policy.name)
        # With them still there the probe may preempt or wait, but it is never rejected.
        crowded = Snapshot(state.descriptors, state.pools, state.policies, (*live, probe))
        assert "probe" not in rejected(run(crowded, 101), crowded)
