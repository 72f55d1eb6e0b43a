"""Blocked heads keep their claim (no starvation); lease phases of the cycle."""

from __future__ import annotations

from tests.resource_manager.builders import (
    admitted,
    at,
    cpu,
    gpu,
    grant,
    holding,
    klass,
    policy,
    pool,
    request,
    res,
    run,
    snapshot,
    step,
    waiting,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.resource_manager.domain import (
    LEASE_EXPIRED,
    LEASE_EXPIRED_WHILE_PENDING,
    ResourceRequest,
    release,
)
from wharf.resource_manager.scheduler import Snapshot

P = pool("p", klass("c", GPU=8, CPU=64_000))
TEAM = policy("team", P)


def _replace(snap: Snapshot, requests: list[ResourceRequest]) -> Snapshot:
    return Snapshot(snap.descriptors, snap.pools, snap.policies, tuple(requests))


def test_smaller_requests_backfill_only_what_the_blocked_head_cannot_use():
    snap = snapshot(
        [P],
        [TEAM],
        [
            holding("running", P, TEAM, {("c", "GPU"): 6}),
            request("head", gpu(4), cpu(8), created=1),  # 2 GPU free: blocked, claims 2 GPU + 8 CPU
            request("gpu-small", gpu(1), created=2),  # would fit in the 2 free GPU: not allowed
            request("cpu-only", cpu(16), created=3),  # CPU the head cannot use: backfills
        ],
    )
    decisions = run(snap)
    assert admitted(decisions, snap) == ["cpu-only"]
    reasons = waiting(decisions, snap)
    assert reasons["head"].startswith("Waiting for capacity: needs 4 GPU in class 'c'")
    assert reasons["gpu-small"].startswith(f"Waiting behind request {snap.requests[1].id}")


def test_a_blocked_head_is_never_starved_by_a_stream_of_small_requests():
    snap = snapshot(
        [P], [TEAM], [holding("running", P, TEAM, {("c", "GPU"): 7}), request("head", gpu(8))]
    )
    running = snap.requests[0].id
    for second in range(1, 10):
        # one GPU is free all along, and a new one-GPU request arrives every second
        snap = _replace(snap, [*snap.requests, request(f"small-{second}", gpu(1), created=second)])
        snap, decisions = step(snap, second)
        assert not decisions.admissions
    snap = _replace(snap, [release(r, at(10)) if r.id == running else r for r in snap.requests])
    snap, decisions = step(snap, 10)
    assert admitted(decisions, snap) == ["head"]


def test_a_head_blocked_by_its_own_limit_claims_nothing():
    limited = policy("limited", P, grant("c", GPU=res(0, 2)), priority=9)
    snap = snapshot(
        [P],
        [limited, TEAM],
        [
            holding("mine", P, limited, {("c", "GPU"): 2}),
            request("limited", gpu(2), project="limited", created=1),
            request("other", gpu(4), created=2),
        ],
    )
    assert admitted(run(snap), snap) == ["other"]


def test_lapsed_leases_free_capacity_in_the_same_cycle():
    snap = snapshot(
        [P],
        [TEAM],
        [
            holding("stale", P, TEAM, {("c", "GPU"): 8}, lease=30),
            request("waiting", gpu(8), created=1, lease=100),
            request("gone", gpu(1), created=2, lease=20),
        ],
    )
    early = run(snap, 19)
    assert not early.expiries and not early.admissions
    decisions = run(snap, 30)
    expiries = {
        e.request_id: (e.previous_status, e.new_status, e.reason) for e in decisions.expiries
    }
    assert expiries == {
        snap.requests[0].id: (S.ALLOCATED, S.EXPIRED, LEASE_EXPIRED),
        snap.requests[2].id: (S.PENDING, S.CANCELLED, LEASE_EXPIRED_WHILE_PENDING),
    }
    assert admitted(decisions, snap) == ["waiting"]


def test_allocation_wait_timeout_expires_a_pending_request():
    snap = snapshot(
        [P], [TEAM], [holding("busy", P, TEAM, {("c", "GPU"): 8}), request("r", wait_timeout=60)]
    )
    assert not run(snap, 59).expiries
    [expiry] = run(snap, 60).expiries
    assert (expiry.previous_status, expiry.new_status) == (S.PENDING, S.EXPIRED)


def test_terminal_requests_in_the_snapshot_are_ignored():
    done = holding("done", P, TEAM, {("c", "GPU"): 8}).model_copy(update={"status": S.RELEASED})
    snap = snapshot([P], [TEAM], [done, request("r", gpu(8))])
    assert admitted(run(snap), snap) == ["r"]
