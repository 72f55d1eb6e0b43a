"""Preemption: who may be a victim, in what order, how few, and when capacity returns."""

from __future__ import annotations

from tests.resource_manager.builders import (
    admitted,
    at,
    gpu,
    grant,
    holding,
    klass,
    policy,
    pool,
    preempted,
    project,
    request,
    res,
    run,
    snapshot,
    step,
    waiting,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import Demand, SubjectSelector, release
from wharf.resource_manager.scheduler import Snapshot

P = pool("p", klass("c", GPU=4))
LOW = policy("low", P, priority=1)
HIGH = policy("high", P, priority=10)


def test_a_higher_priority_request_preempts_the_newest_lower_priority_allocation():
    snap = snapshot(
        [P],
        [LOW, HIGH],
        [
            holding("low-old", P, LOW, {("c", "GPU"): 2}, allocated=0),
            holding("low-new", P, LOW, {("c", "GPU"): 2}, allocated=5),
            request("high", gpu(2), project="high", created=6),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["low-new"]
    [preemption] = decisions.preemptions
    assert preemption.preemptor_id == snap.requests[2].id
    assert "higher priority" in preemption.reason
    assert waiting(decisions, snap)["high"] == "Preempting 1 allocation to make room in pool 'p'."
    assert not decisions.admissions


def test_lowest_priority_goes_first():
    mid = policy("mid", P, priority=5)
    snap = snapshot(
        [P],
        [LOW, mid, HIGH],
        [
            holding("mid", P, mid, {("c", "GPU"): 2}, allocated=9),
            holding("low", P, LOW, {("c", "GPU"): 2}, allocated=0),
            request("high", gpu(2), project="high", created=10),
        ],
    )
    assert preempted(run(snap), snap) == ["low"]


def test_the_victim_set_is_minimal_greedy_then_trim():
    p = pool("p", klass("c", GPU=5))
    low, high = policy("low", p, priority=1), policy("high", p, priority=9)
    snap = snapshot(
        [p],
        [low, high],
        [
            holding("big-oldest", p, low, {("c", "GPU"): 3}, allocated=0),
            holding("small-1", p, low, {("c", "GPU"): 1}, allocated=1),
            holding("small-2", p, low, {("c", "GPU"): 1}, allocated=2),
            request("high", gpu(3), project="high", created=3),
        ],
    )
    # greedy (newest first) takes small-2, small-1 and big-oldest; trimming keeps only big-oldest
    assert preempted(run(snap), snap) == ["big-oldest"]


def test_equal_priority_is_never_preempted_without_a_reserved_share_to_reclaim():
    same = policy("same", P, priority=1)
    snap = snapshot(
        [P],
        [LOW, same],
        [
            holding("low", P, LOW, {("c", "GPU"): 4}),
            request("same", gpu(2), project="same", created=1),
        ],
    )
    decisions = run(snap)
    assert not decisions.preemptions
    assert waiting(decisions, snap)["same"].endswith("No allocation may be preempted for it.")


def test_an_owner_reclaims_its_reserved_share_even_from_higher_priority_borrowers():
    owner = policy("owner", P, grant("c", GPU=res(4)), priority=1)
    guest = policy("guest", P, priority=50)
    snap = snapshot(
        [P],
        [owner, guest],
        [
            holding("guest-a", P, guest, {("c", "GPU"): 2}, allocated=0),
            holding("guest-b", P, guest, {("c", "GPU"): 2}, allocated=1),
            request("owner", gpu(2), project="owner", created=2),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["guest-b"]
    assert "reclaiming its reserved share" in decisions.preemptions[0].reason


def test_reclaim_needs_the_whole_request_inside_the_unused_share():
    owner = policy("owner", P, grant("c", GPU=res(2)), priority=1)
    guest = policy("guest", P, priority=50)
    snap = snapshot(
        [P],
        [owner, guest],
        [
            holding("guest", P, guest, {("c", "GPU"): 4}),
            request("owner", gpu(3), project="owner", created=2),  # 3 > its 2 reserved
        ],
    )
    assert not run(snap).preemptions


def test_allocations_within_their_own_reserved_share_are_not_victims():
    owner = policy("owner", P, grant("c", GPU=res(2)), priority=1)
    snap = snapshot(
        [P],
        [owner, HIGH],
        [
            holding("owner-in-share", P, owner, {("c", "GPU"): 2}, allocated=0),
            holding("owner-borrowing", P, owner, {("c", "GPU"): 2}, allocated=1),
            request("high", gpu(4), project="high", created=2),
        ],
    )
    decisions = run(snap)
    assert not decisions.preemptions  # only 2 GPU are borrowed; 4 would have to go


def test_never_reclaimable_classes_and_tolerance_none_are_never_victims():
    p = pool("p", klass("safe", GPU=2, reclaimable="never", rank=1), klass("c", GPU=2))
    low, high = policy("low", p, priority=1), policy("high", p, priority=9)
    snap = snapshot(
        [p],
        [low, high],
        [
            holding("in-never-class", p, low, {("safe", "GPU"): 2}, tolerance="coordinated"),
            holding("tolerance-none", p, low, {("c", "GPU"): 2}, tolerance="none"),
            request("high", gpu(2), project="high", created=1),
        ],
    )
    decisions = run(snap)
    assert not decisions.preemptions
    assert not decisions.admissions


def test_the_waiters_preemption_group_is_protected():
    siblings = SubjectSelector(subject_type="pipeline_run", subject_id="run-sibling")
    snap = snapshot(
        [P],
        [LOW, HIGH],
        [
            holding("sibling", P, LOW, {("c", "GPU"): 4}),
            request("high", gpu(2), project="high", created=1, group=siblings),
        ],
    )
    assert not run(snap).preemptions
    unrelated = SubjectSelector(subject_type="pipeline_run", subject_id="run-other")
    snap = snapshot(
        [P],
        [LOW, HIGH],
        [
            holding("sibling", P, LOW, {("c", "GPU"): 4}),
            request("high", gpu(2), project="high", created=1, group=unrelated),
        ],
    )
    assert preempted(run(snap), snap) == ["sibling"]


def test_policies_of_one_preemption_group_never_preempt_each_other():
    low = policy("low", P, priority=1, group="research")
    high = policy("high", P, priority=10, group="research")
    snap = snapshot(
        [P],
        [low, high],
        [holding("low", P, low, {("c", "GPU"): 4}), request("high", gpu(2), project="high")],
    )
    assert not run(snap).preemptions


def test_normal_requests_never_preempt_priority_lane_allocations():
    lane = policy("lane", P, lane=True)
    top = policy("top", P, priority=2_000_000_000)
    snap = snapshot(
        [P],
        [lane, top],
        [holding("lane", P, lane, {("c", "GPU"): 4}), request("top", gpu(1), project="top")],
    )
    assert not run(snap).preemptions


def test_priority_lane_preempts_reclaimable_work_but_not_other_lanes():
    lane = policy("lane", P, lane=True)
    owner = policy("owner", P, grant("c", GPU=res(2)), priority=99)
    snap = snapshot(
        [P],
        [lane, owner],
        [
            holding("other-lane", P, lane, {("c", "GPU"): 2}, allocated=0),
            # inside its own reserved share and of high priority: only the lane may take it
            holding("owner", P, owner, {("c", "GPU"): 2}, allocated=1),
            request("lane-waiter", gpu(2), project="lane", created=2),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["owner"]
    assert "priority lane" in decisions.preemptions[0].reason


def test_capacity_returns_only_when_victims_release():
    snap = snapshot(
        [P],
        [LOW, HIGH],
        [holding("low", P, LOW, {("c", "GPU"): 4}), request("high", gpu(4), project="high")],
    )
    snap, first = step(snap, 1)
    assert preempted(first, snap) == ["low"]
    victim = next(r for r in snap.requests if r.metadata["name"] == "low")
    assert victim.status is S.PREEMPTING
    assert victim.preemption_initiated_by_id == snap.requests[1].id
    # The victim has not released yet: the waiter waits and nobody else is preempted.
    snap, second = step(snap, 2)
    assert not second.preemptions and not second.admissions
    assert waiting(second, snap)["high"].startswith("Waiting for preempted allocations")
    # Once it releases, the capacity is the waiter's.
    snap = Snapshot(
        descriptors=snap.descriptors,
        pools=snap.pools,
        policies=snap.policies,
        requests=tuple(release(r, at(3)) if r.id == victim.id else r for r in snap.requests),
    )
    snap, third = step(snap, 3)
    assert admitted(third, snap) == ["high"]
    assert next(r for r in snap.requests if r.id == victim.id).status is S.PREEMPTED


def test_a_lapsed_victim_lease_also_returns_the_capacity():
    snap = snapshot(
        [P],
        [LOW, HIGH],
        [
            holding("low", P, LOW, {("c", "GPU"): 4}, lease=50),
            request("high", gpu(4), project="high"),
        ],
    )
    snap, _ = step(snap, 1)
    snap, later = step(snap, 60)
    assert [e.new_status for e in later.expiries] == [S.EXPIRED]
    assert admitted(later, snap) == ["high"]


def test_one_victim_is_never_taken_twice_and_preemptors_are_never_victims():
    p = pool("p", klass("a", GPU=2, rank=1), klass("b", GPU=2))
    low, high = policy("low", p, priority=1), policy("high", p, priority=9)
    snap = snapshot(
        [p],
        [low, high],
        [
            holding("wide", p, low, {("a", "GPU"): 2, ("b", "GPU"): 2}),
            request("h1", gpu(2, "a"), project="high", created=1),
            request("h2", gpu(2, "b"), project="high", created=2),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["wide"]
    # the second head sees the capacity as returning and waits instead of preempting again
    assert waiting(decisions, snap)["h2"].startswith("Waiting for preempted allocations")
    victims = {p.victim_id for p in decisions.preemptions}
    assert not victims & {p.preemptor_id for p in decisions.preemptions}


def test_no_preemption_when_a_lower_ranked_pool_admits_the_request():
    backup = pool("backup", klass("c", GPU=4), rank=-1)
    snap = snapshot(
        [P, backup],
        [LOW, HIGH, policy("high", backup, priority=10)],
        [holding("low", P, LOW, {("c", "GPU"): 4}), request("high", gpu(2), project="high")],
    )
    decisions = run(snap)
    assert not decisions.preemptions
    assert decisions.admissions[0].pool_id == backup.id


def test_preempting_does_not_mutate_the_snapshot():
    requests = [holding("low", P, LOW, {("c", "GPU"): 4}), request("high", gpu(4), project="high")]
    snap = snapshot([P], [LOW, HIGH], requests)
    run(snap)
    assert snap.requests[0].status is S.ALLOCATED
    assert project("x").subject_id == "x"


def test_a_request_lacking_a_slot_claimed_by_an_earlier_head_waits_without_preempting():
    p = pool("p", klass("c", GPU=4, CPU=4000))
    low, high = policy("low", p, priority=1), policy("high", p, priority=9)
    snap = snapshot(
        [p],
        [low, high],
        [
            holding("low-gpu", p, low, {("c", "GPU"): 4}, allocated=0),
            holding("low-cpu", p, low, {("c", "CPU"): 4000}, allocated=1),
            request("h1", gpu(4), project="high", created=2),
            request("h2", gpu(2), Demand(resource="CPU", quantity=2), project="high", created=3),
        ],
    )
    decisions = run(snap)
    assert preempted(decisions, snap) == ["low-gpu"]
    assert waiting(decisions, snap)["h2"].startswith(
        f"Waiting behind request {snap.requests[2].id}"
    )


def test_reclaim_is_allowed_when_only_the_reserved_resource_is_short():
    p = pool("p", klass("c", GPU=4, CPU=4000))
    owner = policy("owner", p, grant("c", GPU=res(2)), priority=1)  # reserves GPUs only
    guest = policy("guest", p, priority=9)
    cpu_ = Demand(resource="CPU", quantity=1)
    snap = snapshot(
        [p],
        [owner, guest],
        [
            holding("guest", p, guest, {("c", "GPU"): 4, ("c", "CPU"): 2000}),
            request("owner-fits-cpu", gpu(2), cpu_, project="owner", created=1),
        ],
    )
    # it borrows CPU, but CPU is not short: the GPU share is reclaimed from the guest
    assert preempted(run(snap), snap) == ["guest"]


def test_no_reclaim_when_the_waiter_would_borrow_a_resource_that_is_short():
    p = pool("p", klass("c", GPU=4, CPU=4000))
    owner = policy("owner", p, grant("c", GPU=res(2)), priority=1)
    guest = policy("guest", p, priority=9)
    snap = snapshot(
        [p],
        [owner, guest],
        [
            holding("guest", p, guest, {("c", "GPU"): 4, ("c", "CPU"): 2000}),
            request("owner", gpu(2), Demand(resource="CPU", quantity=3), project="owner"),
        ],
    )
    # CPU is short and outside its share: reclaiming would let the guest take it back later
    assert not run(snap).preemptions
