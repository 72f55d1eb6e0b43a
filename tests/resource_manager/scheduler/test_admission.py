"""Fit and assignment: all-or-nothing, one pool and one policy path, ranks, limits, shares."""

from __future__ import annotations

import pytest

from tests.resource_manager.builders import (
    GIB,
    admitted,
    at,
    cpu,
    demand,
    gpu,
    grant,
    holding,
    klass,
    mem,
    policy,
    pool,
    request,
    res,
    run,
    snapshot,
    waiting,
)
from wharf.resource_manager.domain import (
    Allocation,
    AttributeSelector,
    CapacityClass,
    Demand,
    ResourceDescriptor,
    Unit,
)
from wharf.resource_manager.domain.units import STOCK_DESCRIPTORS
from wharf.resource_manager.scheduler import Snapshot, schedule


def _allocations(decisions, name_of_request=None):
    return [
        (a.class_name, a.resource, a.quantity, a.unit, a.base_quantity)
        for admission in decisions.admissions
        for a in admission.allocations
    ]


def test_admission_is_all_or_nothing_across_demands():
    p = pool("p", klass("node", GPU=8, CPU=16_000))
    team = policy("team", p)
    snap = snapshot(
        [p],
        [team],
        [
            holding("busy", p, team, {("node", "CPU"): 10_000}),
            request("big", gpu(4), cpu(8)),  # GPUs fit, CPUs do not: nothing is allocated
            # "big" claims what it can use (4 GPU, the 6 free CPU); 4 GPU are left to backfill
            request("small", gpu(4), created=1),
        ],
    )
    decisions = run(snap)
    assert admitted(decisions, snap) == ["small"]
    assert waiting(decisions, snap)["big"].startswith("Waiting for capacity: needs 8 CPU")
    assert _allocations(decisions) == [("node", "GPU", 4, "GPU", 4)]


def test_allocation_records_quantity_unit_and_exact_base_quantity():
    p = pool("p", klass("node", CPU=64_000, memory=512 * GIB))
    snap = snapshot([p], [policy("team", p)], [request("r", cpu(500, "mCPU"), mem(3, "GiB"))])
    decisions = run(snap)
    assert _allocations(decisions) == [
        ("node", "CPU", 500, "mCPU", 500),
        ("node", "memory", 3, "GiB", 3 * GIB),
    ]
    allocation = decisions.admissions[0].allocations[0]
    assert allocation.resource_kind == "cpu"
    assert allocation.demand_index == 0
    assert allocation.policy_id == policy("team", p).id


def test_class_rank_decides_when_no_class_is_asked():
    p = pool("p", klass("a100", GPU=8, rank=1), klass("h100", GPU=8, rank=5))
    snap = snapshot([p], [policy("team", p)], [request("r", gpu(2))])
    assert _allocations(run(snap))[0][0] == "h100"


def test_lower_ranked_class_is_used_when_the_best_is_full():
    p = pool("p", klass("a100", GPU=8, rank=1), klass("h100", GPU=2, rank=5))
    team = policy("team", p)
    snap = snapshot(
        [p], [team], [holding("busy", p, team, {("h100", "GPU"): 2}), request("r", gpu(2))]
    )
    assert _allocations(run(snap))[0][0] == "a100"


@pytest.mark.parametrize(
    ("demand_kwargs", "expected_class"),
    [
        ({"class_name": "a100"}, "a100"),
        ({"class_selector": AttributeSelector(attributes={"vendor": "amd"})}, "mi300"),
    ],
)
def test_explicit_class_or_class_selector(demand_kwargs, expected_class):
    p = pool(
        "p",
        klass("h100", GPU=8, rank=9, attributes={"vendor": "nvidia"}),
        klass("a100", GPU=8, rank=1, attributes={"vendor": "nvidia"}),
        klass("mi300", GPU=8, rank=0, attributes={"vendor": "amd"}),
    )
    snap = snapshot(
        [p], [policy("team", p)], [request("r", Demand(kind="gpu", quantity=1, **demand_kwargs))]
    )
    assert _allocations(run(snap))[0][0] == expected_class


def test_demands_may_land_in_different_classes_of_one_pool_and_share_a_slot():
    p = pool("p", klass("gpu", GPU=8, CPU=4000, rank=1), klass("cpu", CPU=64_000))
    snap = snapshot(
        [p],
        [policy("team", p)],
        [request("r", gpu(1), cpu(3), cpu(2))],  # 5 CPU do not fit the gpu class
    )
    assert [a[0] for a in _allocations(run(snap))] == ["gpu", "gpu", "cpu"]


def test_pool_rank_decides_across_pools_and_one_pool_is_used():
    low = pool("low", klass("c", GPU=8), rank=1)
    high = pool("high", klass("c", GPU=8), rank=7)
    snap = snapshot(
        [low, high], [policy("team", low), policy("team", high)], [request("r", gpu(2), gpu(1))]
    )
    decisions = run(snap)
    assert decisions.admissions[0].pool_id == high.id
    assert {a.pool_id for a in decisions.admissions[0].allocations} == {high.id}


def test_request_pool_or_pool_selector_restricts_the_pools():
    low = pool("low", klass("c", GPU=8), rank=1, attributes={"site": "eu"})
    high = pool("high", klass("c", GPU=8), rank=7, attributes={"site": "us"})
    policies = [policy("team", low), policy("team", high)]
    by_name = snapshot([low, high], policies, [request("r", gpu(1), pool="low")])
    assert run(by_name).admissions[0].pool_id == low.id
    by_id = snapshot([low, high], policies, [request("r", gpu(1), pool=str(low.id))])
    assert run(by_id).admissions[0].pool_id == low.id
    selected = snapshot(
        [low, high],
        policies,
        [request("r", gpu(1), pool_selector=AttributeSelector(attributes={"site": "eu"}))],
    )
    assert run(selected).admissions[0].pool_id == low.id


def test_the_first_matching_policy_that_fits_admits():
    p = pool("p", klass("c", GPU=8))
    strict = policy("strict", p, grant("c", GPU=res(0, 1)), priority=10, selector=None)
    loose = policy("loose", p, priority=1).model_copy(
        update={"subject_selector": strict.subject_selector}
    )
    snap = snapshot(
        [p],
        [strict, loose],
        [request("a", gpu(1), project="strict"), request("b", gpu(2), project="strict", created=1)],
    )
    decisions = run(snap)
    assert [a.policy_id for a in decisions.admissions] == [strict.id, loose.id]


def test_policy_limit_holds():
    p = pool("p", klass("c", GPU=8))
    team = policy("team", p, grant("c", GPU=res(0, 3)))
    snap = snapshot([p], [team], [request("a", gpu(2)), request("b", gpu(2), created=1)])
    decisions = run(snap)
    assert admitted(decisions, snap) == ["a"]
    assert waiting(decisions, snap)["b"] == (
        "Waiting for policy 'team' limit: 2 GPU of 3 GPU in class 'c' of pool 'p' in use."
    )


def test_a_blocked_request_does_not_block_one_of_its_shape_under_another_policy():
    # A deep queue answers requests like one already blocked in the same walk without trying
    # them again; "like" is the same shape *and* the same policies: "b" asks for what "a2"
    # asks for, through a policy whose limit is not reached, and must be admitted.
    p = pool("p", klass("c", GPU=8))
    limited = policy("a", p, grant("c", GPU=res(0, 1)))
    free = policy("b", p)
    requests = [request(f"a{i}", gpu(1), project="a", created=i) for i in range(1, 6)]
    requests.append(request("b", gpu(1), project="b", created=9))
    snap = snapshot([p], [limited, free], requests)
    decisions = run(snap)
    assert admitted(decisions, snap) == ["a1", "b"]
    assert set(waiting(decisions, snap)) == {"a2", "a3", "a4", "a5"}
    assert len(set(waiting(decisions, snap).values())) == 1


def test_requests_behind_a_claim_wait_behind_it_and_the_rest_still_backfill():
    # Identical requests behind a blocked head all wait behind its claim; one of another shape
    # still backfills capacity the head cannot use (here: a class the head did not ask for).
    p = pool("p", klass("c1", GPU=4), klass("c2", GPU=2))
    team = policy("team", p)
    held = holding("held", p, team, {("c1", "GPU"): 2})
    queue = [request(f"big{i}", gpu(4, "c1"), created=i) for i in range(5)]
    queue.append(request("small", gpu(2), created=9))
    snap = snapshot([p], [team], [held, *queue])
    decisions = run(snap)
    assert admitted(decisions, snap) == ["small"]
    reasons = waiting(decisions, snap)
    assert reasons["big0"].startswith("Waiting for capacity")
    behind = {reasons[f"big{i}"] for i in range(1, 5)}
    assert len(behind) == 1 and behind.pop().startswith("Waiting behind request")


@pytest.mark.parametrize(
    ("pool_limit", "class_limit", "policy_limit", "admitted_count", "reason"),
    [
        (2, None, None, 2, "the concurrency limit 2 of pool 'p' is reached"),
        (None, 1, None, 1, "the concurrency limit 1 of class 'c' is reached"),
        (None, None, 3, 3, "the concurrency limit 3 of policy 'team' is reached"),
        (None, None, None, 4, None),
    ],
)
def test_concurrency_limits(pool_limit, class_limit, policy_limit, admitted_count, reason):
    p = pool("p", klass("c", GPU=None, concurrency_limit=class_limit), concurrency_limit=pool_limit)
    team = policy("team", p, concurrency_limit=policy_limit)
    snap = snapshot([p], [team], [request(f"r{i}", gpu(1), created=i) for i in range(4)])
    decisions = run(snap)
    assert len(decisions.admissions) == admitted_count
    if reason:
        assert all(reason in text for text in waiting(decisions, snap).values())


def test_null_quantity_is_unlimited_but_accounted():
    p = pool("p", klass("c", GPU=None))
    team = policy("team", p, grant("c", GPU=res(0, 5)))
    snap = snapshot([p], [team], [request(f"r{i}", gpu(2), created=i) for i in range(4)])
    # unlimited capacity, but the policy limit of 5 still counts the usage
    assert len(run(snap).admissions) == 2


def test_tolerance_only_lands_in_compatible_classes():
    p = pool(
        "p",
        klass("spot", GPU=8, rank=9, reclaimable="unsafe"),
        klass("coord", GPU=8, rank=5, reclaimable="coordinated"),
        klass("safe", GPU=8, rank=1, reclaimable="never"),
    )
    snap = snapshot(
        [p],
        [policy("team", p)],
        [
            request("any", gpu(1), tolerance="any"),
            request("coordinated", gpu(1), tolerance="coordinated", created=1),
            request("none", gpu(1), tolerance="none", created=2),
        ],
    )
    assert [a[0] for a in _allocations(run(snap))] == ["spot", "coord", "safe"]


def test_tolerance_none_must_fit_a_reserved_share_or_unreserved_capacity():
    p = pool("p", klass("safe", GPU=8, reclaimable="never"))
    owner = policy("owner", p, grant("safe", GPU=res(6)))
    guest = policy("guest", p)
    snap = snapshot(
        [p],
        [owner, guest],
        [
            request("guest-2", gpu(2), project="guest", tolerance="none"),  # unreserved: 2
            request("guest-1", gpu(1), project="guest", tolerance="none", created=1),
            request("owner-6", gpu(6), project="owner", tolerance="none", created=2),
        ],
    )
    decisions = run(snap)
    assert admitted(decisions, snap) == ["owner-6", "guest-2"]  # owner first: fits its share
    assert "reserved share or unreserved capacity" in waiting(decisions, snap)["guest-1"]


def test_never_reclaimable_classes_keep_reserved_shares_for_their_owners():
    p = pool("p", klass("safe", GPU=8, reclaimable="never"))
    owner = policy("owner", p, grant("safe", GPU=res(6)))
    guest = policy("guest", p)
    snap = snapshot([p], [owner, guest], [request("guest", gpu(3), project="guest")])
    # the guest could take the owner's unused share, but never give it back: it must wait
    assert admitted(run(snap), snap) == []


def test_reclaimable_classes_lend_unused_reserved_shares():
    p = pool("p", klass("c", GPU=8))
    owner = policy("owner", p, grant("c", GPU=res(6)))
    guest = policy("guest", p)
    snap = snapshot([p], [owner, guest], [request("guest", gpu(8), project="guest")])
    assert admitted(run(snap), snap) == ["guest"]


def test_grant_missing_action_default_adds_an_allocation():
    p = pool("p", klass("c", GPU=8, CPU=64_000))
    team = policy("team", p, grant("c", CPU=res(0, missing="default", default=2000)))
    snap = snapshot([p], [team], [request("r", gpu(1))])
    decisions = run(snap)
    allocations = decisions.admissions[0].allocations
    assert [(a.demand_index, a.resource, a.base_quantity, a.unit) for a in allocations] == [
        (0, "GPU", 1, "GPU"),
        (None, "CPU", 2000, "mCPU"),
    ]


def test_grant_missing_action_reject_excludes_the_class():
    p = pool("p", klass("licensed", GPU=8, CPU=8000, rank=5), klass("plain", GPU=8))
    team = policy("team", p, grant("licensed", CPU=res(missing="reject")), grant("plain"))
    snap = snapshot([p], [team], [request("r", gpu(1)), request("s", gpu(1), cpu(1), created=1)])
    assert [a[0] for a in _allocations(run(snap))] == ["plain", "licensed", "licensed"]


def test_target_settings_merge_pool_class_policy_grant():
    p = pool(
        "p",
        klass("c", GPU=8, target_settings={"labels": {"class": "c", "layer": "class"}}),
        target_settings={"labels": {"pool": "p", "layer": "pool"}, "image": "base"},
    )
    team = policy(
        "team",
        p,
        grant("c", target_settings={"labels": {"layer": "grant"}}),
        target_settings={"labels": {"layer": "policy"}, "image": "cuda"},
    )
    snap = snapshot([p], [team], [request("r", gpu(1))])
    settings = run(snap).admissions[0].allocations[0].target_settings
    assert settings == {"labels": {"pool": "p", "class": "c", "layer": "grant"}, "image": "cuda"}


def test_custom_descriptor_with_its_own_units():
    license_ = ResourceDescriptor(
        name="license",
        kind="license",
        units=(Unit(name="seat", multiplier=1), Unit(name="pack", multiplier=10)),
    )
    p = pool("p", klass("c", license=25))
    snap = Snapshot.of(
        pools=[p],
        policies=[policy("team", p)],
        requests=[
            request("r", demand("license", 2, unit="pack")),
            request("s", demand("license", 1, unit="pack"), created=1),
        ],
        descriptors=[*STOCK_DESCRIPTORS, license_],
    )
    decisions = schedule(snap, at(1))
    assert len(decisions.admissions) == 1
    assert decisions.admissions[0].allocations[0].base_quantity == 20


def test_admission_reason_names_pool_and_policy():
    p = pool("p", klass("c", GPU=8))
    snap = snapshot([p], [policy("team", p)], [request("r", gpu(1))])
    assert run(snap).admissions[0].reason == "Admitted to pool 'p' by policy 'team'."


def test_allocation_ids_are_stable():
    p = pool("p", klass("c", GPU=8))
    snap = snapshot([p], [policy("team", p)], [request("r", gpu(1), gpu(2))])
    first, second = run(snap), run(snap, seconds=99)
    ids = [a.id for a in first.admissions[0].allocations]
    assert ids == [a.id for a in second.admissions[0].allocations]
    assert len(set(ids)) == 2


def test_capacity_class_fixture_sanity():
    assert isinstance(klass("c", GPU=1), CapacityClass)


def test_admitted_allocations_are_valid_models() -> None:
    gpus = pool("p", klass("c", GPU=4))
    decisions = run(snapshot([gpus], [policy("team", gpus)], [request("r", gpu(2))]))
    (admission,) = decisions.admissions
    for allocation in admission.allocations:
        assert Allocation.model_validate(allocation.model_dump(by_alias=True)) == allocation
