"""A blocked head whose path to fitting is reclaiming from borrowers leaves free capacity to
requests it could take back later; everyone else still waits behind it."""

from __future__ import annotations

import pytest

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
    snapshot,
    step,
    waiting,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import release
from wharf.resource_manager.scheduler import Snapshot

P = pool("p", klass("c", GPU=4))
OWNER = policy("owner", P, grant("c", GPU=res(4)))  # the whole class is its reserved share
GUEST = policy("guest", P)


def _released(snap: Snapshot, names: set[str], seconds: float) -> Snapshot:
    requests = tuple(
        release(r, at(seconds)) if r.metadata["name"] in names else r for r in snap.requests
    )
    return Snapshot(snap.descriptors, snap.pools, snap.policies, requests)


def _status(snap: Snapshot, name: str) -> S:
    return next(r.status for r in snap.requests if r.metadata["name"] == name)


def test_the_idle_capacity_is_used_and_the_head_still_gets_its_share():
    snap = snapshot(
        [P],
        [OWNER, GUEST],
        [
            holding("guest-old", P, GUEST, {("c", "GPU"): 3}),  # borrows the owner's share
            request("owner-big", gpu(4), project="owner", created=1),
            request("guest-small", gpu(1), project="guest", created=2),
        ],
    )
    snap, first = step(snap, 2)
    # The owner reclaims 3 GPUs; the free one is not held idle against a borrower it can
    # take back: the guest's small request runs meanwhile.
    assert preempted(first, snap) == ["guest-old"]
    assert admitted(first, snap) == ["guest-small"]
    # Next cycle the owner still lacks one GPU: it reclaims it from the small request.
    snap, second = step(snap, 3)
    assert preempted(second, snap) == ["guest-small"]
    assert not second.admissions
    assert waiting(second, snap)["owner-big"].startswith("Preempting 1 allocation")
    snap = _released(snap, {"guest-old", "guest-small"}, 4)
    snap, third = step(snap, 4)
    assert admitted(third, snap) == ["owner-big"]
    assert _status(snap, "owner-big") is S.ALLOCATED


def test_the_idle_capacity_is_used_while_the_head_waits_for_returning_capacity():
    preempting = holding("guest-old", P, GUEST, {("c", "GPU"): 3}, preempting=True)
    snap = snapshot(
        [P],
        [OWNER, GUEST],
        [
            preempting,
            request("owner-big", gpu(4), project="owner", created=1),
            request("guest-small", gpu(1), project="guest", created=2),
        ],
    )
    snap, decisions = step(snap, 2)
    assert admitted(decisions, snap) == ["guest-small"]
    assert not decisions.preemptions


def test_a_lower_priority_borrower_uses_what_a_higher_priority_head_will_preempt_anyway():
    low, high = policy("low", P, priority=1), policy("high", P, priority=9)
    snap = snapshot(
        [P],
        [low, high],
        [
            holding("low-old", P, low, {("c", "GPU"): 3}),
            request("high-big", gpu(4), project="high", created=1),
            request("low-small", gpu(1), project="low", created=2),
        ],
    )
    snap, first = step(snap, 2)
    assert preempted(first, snap) == ["low-old"]
    assert admitted(first, snap) == ["low-small"]
    snap, second = step(snap, 3)
    assert preempted(second, snap) == ["low-small"]


@pytest.mark.parametrize("protection", ["policy group", "own preemption group"])
def test_requests_the_head_could_not_take_back_still_wait_behind_it(protection):
    grouped = protection == "policy group"
    owner = policy("owner", P, grant("c", GPU=res(4)), group="g" if grouped else None)
    friend = policy("friend", P, group="g" if grouped else None)
    head_group = None if grouped else project("friend")
    head = request("owner-big", gpu(4), project="owner", created=1, group=head_group)
    snap = snapshot(
        [P],
        [owner, friend, GUEST],
        [
            holding("guest-old", P, GUEST, {("c", "GPU"): 3}),
            head,
            request("friend-small", gpu(1), project="friend", created=2),
        ],
    )
    snap, decisions = step(snap, 2)
    assert preempted(decisions, snap) == ["guest-old"]
    assert not decisions.admissions
    assert waiting(decisions, snap)["friend-small"].startswith(f"Waiting behind request {head.id}")


def test_a_head_that_cannot_reclaim_keeps_its_claim():
    owner = policy("owner", P, grant("c", GPU=res(2)))  # asks for more than its share
    snap = snapshot(
        [P],
        [owner, GUEST],
        [
            holding("guest-old", P, GUEST, {("c", "GPU"): 3}),
            request("owner-big", gpu(3), project="owner", created=1),
            request("guest-small", gpu(1), project="guest", created=2),
        ],
    )
    decisions = step(snap, 2)[1]
    assert not decisions.preemptions and not decisions.admissions
    assert waiting(decisions, snap)["guest-small"].startswith("Waiting behind request")


def test_in_a_deep_queue_each_request_is_judged_by_its_own_subjects():
    p = pool("p8", klass("c", GPU=8))
    owner = policy("owner", p, grant("c", GPU=res(8)))
    friend, guest = policy("friend", p), policy("guest", p)
    head = request("owner-big", gpu(8), project="owner", created=1, group=project("friend"))
    queue = [
        request(name, gpu(1), project=name.split("-")[0], created=2 + i)
        for i, name in enumerate(["friend-1", "friend-2", "guest-1", "friend-3", "guest-2"])
    ]
    snap = snapshot(
        [p], [owner, friend, guest], [holding("guest-old", p, guest, {("c", "GPU"): 5}), head]
    )
    snap = Snapshot(snap.descriptors, snap.pools, snap.policies, (*snap.requests, *queue))
    snap, decisions = step(snap, 10)
    assert preempted(decisions, snap) == ["guest-old"]
    assert admitted(decisions, snap) == ["guest-1", "guest-2"]
    reasons = waiting(decisions, snap)
    for name in ("friend-1", "friend-2", "friend-3"):
        assert reasons[name].startswith(f"Waiting behind request {head.id}")
