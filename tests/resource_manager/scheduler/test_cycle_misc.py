"""The cycle's edges: inputs, applying decisions, configuration that changed under allocations."""

from __future__ import annotations

from datetime import datetime

import pytest

from tests.resource_manager.builders import (
    admitted,
    at,
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
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import IllegalTransitionError, InputError
from wharf.resource_manager.scheduler import (
    Admission,
    CycleDecisions,
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
