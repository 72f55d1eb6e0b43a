"""Rejection reasons, and the queue order of a pool."""

from __future__ import annotations

import pytest

from tests.resource_manager.builders import (
    admitted,
    demand,
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
    waiting,
)
from wharf.resource_manager.domain import AttributeSelector, Demand
from wharf.resource_manager.scheduler import (
    NO_POLICY_ADMITTED,
    NO_POLICY_MATCHES,
    NO_POOL_MATCHES_SELECTOR,
    NO_RESERVED_SHARE_FOR_NONE,
)

P = pool("p", klass("h100", GPU=8, rank=2), klass("safe", GPU=4, reclaimable="never"))
TEAM = policy("team", P, grant("h100", GPU=res(0, 6)), grant("safe", GPU=res(2)))
OTHER = policy("other", P, grant("safe", GPU=res(2)))  # leaves no unreserved capacity in safe


@pytest.mark.parametrize(
    ("req", "reason"),
    [
        (request("r", gpu(1), project="stranger"), NO_POLICY_MATCHES),
        (request("r", demand("TPU", 1)), "Unknown resource 'TPU' in demand #0; known resources:"),
        (request("r", Demand(kind="tpu", quantity=1)), "No resource descriptor matches demand #0."),
        (
            request("r", gpu(1), Demand(resource="GPU", quantity=1, unit="GB")),
            "Unknown unit 'GB' for resource 'GPU'; known units: GPU (demand #1).",
        ),
        (
            request("r", Demand(quantity=1, resource_selector=AttributeSelector(kind="tpu"))),
            "No resource descriptor matches demand #0.",
        ),
        (request("r", gpu(1), pool="nowhere"), "Resource pool 'nowhere' does not exist."),
        (
            request("r", gpu(1), pool_selector=AttributeSelector(attributes={"site": "mars"})),
            NO_POOL_MATCHES_SELECTOR,
        ),
        (
            request("r", gpu(7), tolerance="any"),
            f"{NO_POLICY_ADMITTED} Policy 'team' in pool 'p': demand #0 (7 GPU) exceeds its "
            "limit in class 'h100' (6 GPU).",
        ),
        (
            request("r", gpu(1, "a100")),
            f"{NO_POLICY_ADMITTED} Policy 'team' in pool 'p': no class named 'a100' offers the "
            "resource of demand #0.",
        ),
        (
            request("r", gpu(3), tolerance="none"),
            f"{NO_RESERVED_SHARE_FOR_NONE} Policy 'team' in pool 'p': demand #0 (3 GPU) exceeds "
            "its reserved share (0 GPU) of reclaimable class 'h100', and reclaim_tolerance "
            "'none' never borrows.",
        ),
        (
            request("r", gpu(3, "safe"), tolerance="none"),
            f"{NO_RESERVED_SHARE_FOR_NONE} Policy 'team' in pool 'p': demand #0 (3 GPU) fits "
            "neither its reserved share (2 GPU) nor the unreserved capacity (0 GPU) of "
            "never-reclaimable class 'safe'.",
        ),
        (
            request("r", gpu(1), tolerance="none", pool="p").model_copy(
                update={"demands": (gpu(1, "h100"),)}
            ),
            f"{NO_RESERVED_SHARE_FOR_NONE} Policy 'team' in pool 'p': demand #0 (1 GPU) exceeds "
            "its reserved share (0 GPU) of reclaimable class 'h100', and reclaim_tolerance "
            "'none' never borrows.",
        ),
    ],
)
def test_every_rejection_has_a_clear_reason(req, reason):
    snap = snapshot([P], [TEAM, OTHER], [req])
    decisions = run(snap)
    assert not decisions.admissions
    [rejection] = decisions.rejections
    assert rejection.reason.startswith(reason), rejection.reason


def test_rejection_is_about_configuration_not_current_usage():
    busy = holding("busy", P, TEAM, {("h100", "GPU"): 6})
    snap = snapshot([P], [TEAM], [busy, request("r", gpu(6))])
    decisions = run(snap)
    assert not decisions.rejections
    assert "limit" in waiting(decisions, snap)["r"]


# -- queue order ---------------------------------------------------------------------------


def _order_pool():
    p = pool("p", klass("c", GPU=1))
    return p


def test_priority_lane_goes_first():
    p = _order_pool()
    lane = policy("lane", p, lane=True)
    high = policy("high", p, priority=100)
    snap = snapshot(
        [p],
        [lane, high],
        [request("high", project="high"), request("lane", project="lane", created=5)],
    )
    assert admitted(run(snap), snap) == ["lane"]


def test_requests_fitting_their_unused_reserved_share_go_before_priority():
    p = _order_pool()
    owner = policy("owner", p, grant("c", GPU=res(1)), priority=1)
    high = policy("high", p, priority=100)
    snap = snapshot(
        [p],
        [owner, high],
        [request("high", project="high"), request("owner", project="owner", created=5)],
    )
    assert admitted(run(snap), snap) == ["owner"]


def test_higher_policy_priority_then_fifo():
    p = pool("p", klass("c", GPU=2))
    low, high = policy("low", p, priority=1), policy("high", p, priority=9)
    snap = snapshot(
        [p],
        [low, high],
        [
            request("low-early", project="low", created=0),
            request("high-late", project="high", created=9),
            request("high-early", project="high", created=3),
        ],
    )
    decisions = run(snap)
    assert admitted(decisions, snap) == ["high-early", "high-late"]
    assert waiting(decisions, snap)["low-early"].startswith("Waiting for capacity")
    wait = next(w for w in decisions.waits)
    assert wait.position == 3 and wait.pool_id == p.id


def test_fifo_ties_break_on_request_id_deterministically():
    p = pool("p", klass("c", GPU=1))
    team = policy("team", p)
    snap = snapshot([p], [team], [request("a"), request("b")])
    reversed_snap = snapshot([p], [team], [request("b"), request("a")])
    assert admitted(run(snap), snap) == admitted(run(reversed_snap), reversed_snap)


def test_fair_sharing_prefers_the_policy_with_the_lower_dominant_share():
    p = pool("p", klass("c", GPU=10), fair_sharing=True)
    a, b = policy("a", p), policy("b", p)
    requests = [holding("a-running", p, a, {("c", "GPU"): 4})]
    requests += [request(f"a{i}", gpu(1), project="a", created=i) for i in range(4)]
    requests += [request(f"b{i}", gpu(1), project="b", created=10 + i) for i in range(6)]
    snap = snapshot([p], [a, b], requests)
    decisions = run(snap)
    # b borrows nothing yet, so it goes first until its share catches up with a's 4/10
    assert admitted(decisions, snap) == ["b0", "b1", "b2", "b3", "a0", "b4"]


def test_fair_sharing_compares_shares_after_admission():
    # b borrows 1 of 6 and asks for 1 more (2/6 after); c borrows nothing but asks for 5 (5/6
    # after). By current shares c would go first and end above where b would have.
    p = pool("p", klass("c", GPU=6), fair_sharing=True)
    b, c = policy("b", p), policy("c", p)
    requests = [
        holding("b-running", p, b, {("c", "GPU"): 1}),
        request("c-big", gpu(5), project="c", created=1),
        request("b-small", gpu(1), project="b", created=2),
    ]
    snap = snapshot([p], [b, c], requests)
    decisions = run(snap)
    assert admitted(decisions, snap) == ["b-small"]
    assert "c-big" in waiting(decisions, snap)


def test_fair_sharing_equal_shares_after_admission_go_by_arrival():
    p = pool("p", klass("c", GPU=3), fair_sharing=True)
    b, c = policy("b", p), policy("c", p)
    requests = [
        holding("b-running", p, b, {("c", "GPU"): 1}),
        request("c-two", gpu(2), project="c", created=1),
        request("b-one", gpu(1), project="b", created=2),
    ]
    snap = snapshot([p], [b, c], requests)
    # both would borrow 2/3 after admission: the earlier request goes first and takes the room
    assert admitted(run(snap), snap) == ["c-two"]


def test_fair_sharing_weights():
    p = pool("p", klass("c", GPU=9), fair_sharing=True)
    heavy, light = policy("heavy", p, weight=2), policy("light", p, weight=1)
    requests = [request(f"h{i}", gpu(1), project="heavy", created=i) for i in range(9)]
    requests += [request(f"l{i}", gpu(1), project="light", created=i) for i in range(9)]
    snap = snapshot([p], [heavy, light], requests)
    names = admitted(run(snap), snap)
    assert sum(n.startswith("h") for n in names) == 6
    assert sum(n.startswith("l") for n in names) == 3


def test_without_fair_sharing_fifo_wins():
    p = pool("p", klass("c", GPU=4))
    a, b = policy("a", p), policy("b", p)
    requests = [request(f"a{i}", gpu(1), project="a", created=i) for i in range(4)]
    requests += [request("b0", gpu(1), project="b", created=10)]
    snap = snapshot([p], [a, b], requests)
    assert admitted(run(snap), snap) == ["a0", "a1", "a2", "a3"]


def test_no_policy_says_who_can_fix_it_and_how():
    decisions = run(snapshot([P], [TEAM], [request("r", gpu(1), project="stranger")]))
    [rejection] = decisions.rejections
    assert rejection.reason == (
        f"{NO_POLICY_MATCHES} No policy lets account 'user-stranger' use pool 'p'; a Resource "
        "Manager administrator can add one: wharf policy create NAME --pool p --subject-type "
        "account --subject-id user-stranger (without --subject-id: every account)."
    )


def test_a_pool_that_offers_the_demand_but_no_policy_opens_is_named_with_the_fix():
    """A pool ``gpus`` made without a policy: the rejection named only the policy the request
    matched, in a pool without GPUs (the QA pass: "Policy 'local-default' in pool 'local': no
    class offers ...")."""
    cpus = pool("cpus", klass("c", CPU=8000))
    gpus = pool("gpus", klass("h100", GPU=8))
    snap = snapshot([cpus, gpus], [policy("team", cpus)], [request("r", gpu(1))])
    [rejection] = run(snap).rejections
    assert rejection.reason == (
        f"{NO_POLICY_ADMITTED} Policy 'team' in pool 'cpus': no class offers the resource of "
        "demand #0. Pool 'gpus' offers it, but no policy there lets account 'user-team' use "
        "it; a Resource Manager administrator can add one: wharf policy create NAME --pool gpus "
        "--subject-type account --subject-id user-team (without --subject-id: every account)."
    )
    # where a pool of a matching policy offers it, the reason stays about that policy
    both = snapshot([cpus, gpus], [policy("team", gpus)], [request("r", gpu(9))])
    [rejection] = run(both).rejections
    assert "no policy there" not in rejection.reason
