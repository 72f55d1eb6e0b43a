"""explain(): position, blocking rule, and which allocations would have to end."""

from __future__ import annotations

import pytest

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
    uid,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.scheduler import NO_POLICY_MATCHES, explain

P = pool("p", klass("c", GPU=4))
LOW = policy("low", P, priority=1)
TEAM = policy("team", P, priority=5)


def test_capacity_blocker_lists_the_allocations_that_would_have_to_end():
    snap = snapshot(
        [P],
        [LOW, TEAM],
        [
            holding("team-old", P, TEAM, {("c", "GPU"): 2}, allocated=0),
            holding("team-new", P, TEAM, {("c", "GPU"): 1}, allocated=1),
            holding("low", P, LOW, {("c", "GPU"): 1}, allocated=2),
            request("r", gpu(3), project="team", created=3),
        ],
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.outcome == "waiting"
    assert explanation.blocker == "capacity"
    assert explanation.blocking_pool_id == P.id
    assert (explanation.blocking_class, explanation.blocking_resource) == ("c", "GPU")
    assert explanation.blocking_policy_id == TEAM.id
    # lowest priority first, then newest: low, team-new, team-old cover 3; trimming drops team-new
    assert explanation.would_have_to_end == (uid("request:low"), uid("request:team-old"))
    assert explanation.preemptible == (uid("request:low"),)
    [position] = explanation.positions
    assert (position.pool_name, position.position, position.queue_length) == ("p", 1, 1)


def test_would_have_to_end_is_minimal():
    snap = snapshot(
        [P],
        [LOW, TEAM],
        [
            holding("a", P, LOW, {("c", "GPU"): 1}, allocated=2),
            holding("b", P, LOW, {("c", "GPU"): 3}, allocated=1),
            request("r", gpu(3), project="team", created=3),
        ],
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.would_have_to_end == (uid("request:b"),)
    assert explanation.preemptible == (uid("request:b"),)


def test_limit_blocker_points_at_the_policy_and_its_own_allocations():
    limited = policy("limited", P, grant("c", GPU=res(0, 2)))
    snap = snapshot(
        [P],
        [limited],
        [
            holding("mine", P, limited, {("c", "GPU"): 2}),
            request("r", gpu(1), project="limited", created=1),
        ],
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.blocker == "limit"
    assert explanation.blocking_policy_id == limited.id
    assert explanation.would_have_to_end == (uid("request:mine"),)
    assert explanation.preemptible == ()
    assert "limit" in explanation.reason


def test_concurrency_blocker():
    p = pool("p", klass("c", GPU=None), concurrency_limit=1)
    team = policy("team", p)
    snap = snapshot(
        [p], [team], [holding("one", p, team, {("c", "GPU"): 1}), request("r", project="team")]
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.blocker == "pool_concurrency"
    assert explanation.would_have_to_end == (uid("request:one"),)


def test_queue_blocker_when_it_only_waits_for_its_turn():
    snap = snapshot(
        [P],
        [TEAM],
        [
            holding("running", P, TEAM, {("c", "GPU"): 2}),
            request("head", gpu(4), project="team", created=1),
            request("r", gpu(1), project="team", created=2),
        ],
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.blocker == "queue"
    assert explanation.reason.startswith("Waiting behind request")
    assert explanation.positions[0].position == 2


@pytest.mark.parametrize(
    ("requests", "outcome", "reason"),
    [
        ([request("r", gpu(1), project="team")], "admitted", "Admitted to pool 'p'"),
        ([request("r", gpu(1), project="nobody")], "rejected", NO_POLICY_MATCHES),
        ([request("r", gpu(1), project="team", lease=1)], "expired", "Lease expired"),
        (
            [holding("r", P, TEAM, {("c", "GPU"): 1})],
            "not_pending",
            "The request is allocated.",
        ),
    ],
)
def test_other_outcomes(requests, outcome, reason):
    snap = snapshot([P], [TEAM], requests)
    explanation = explain(snap, uid("request:r"), at(5))
    assert explanation.outcome == outcome
    assert explanation.reason.startswith(reason)
    assert explanation.status in (S.PENDING, S.ALLOCATED)


def test_unknown_request():
    with pytest.raises(EntityNotFoundError):
        explain(snapshot([P], [TEAM], []), uid("nope"), at(0))


def test_positions_in_every_pool():
    other = pool("other", klass("c", GPU=1), rank=-1)
    policies = [TEAM, policy("team", other)]
    snap = snapshot(
        [P, other],
        policies,
        [
            holding("full", P, TEAM, {("c", "GPU"): 4}),
            holding("full-too", other, policies[1], {("c", "GPU"): 1}),
            request("r", gpu(1), project="team", created=1),
        ],
    )
    explanation = explain(snap, uid("request:r"), at(5))
    assert [(p.pool_name, p.position) for p in explanation.positions] == [("p", 1), ("other", 1)]
