"""Pools, classes, policies, grants and the checks run when they are saved."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.resource_manager.builders import grant, klass, policy, pool, res, uid
from wharf.core.enums import ReclaimTolerance
from wharf.core.errors import InputError
from wharf.resource_manager.domain import (
    PRIORITY_LANE_PRIORITY,
    STOCK_DESCRIPTORS,
    GrantResource,
    Policy,
    Pool,
    Reclaimable,
    class_accepts,
    descriptors_by_name,
    load,
    validate_policy,
    validate_pool,
    validate_reserved_totals,
)

DESCRIPTORS = descriptors_by_name(list(STOCK_DESCRIPTORS))


@pytest.mark.parametrize(
    ("reclaimable", "tolerance", "accepted"),
    [
        ("never", "none", True),
        ("coordinated", "none", True),
        ("unsafe", "none", True),
        ("never", "coordinated", True),
        ("coordinated", "coordinated", True),
        ("unsafe", "coordinated", False),
        ("never", "any", True),
        ("coordinated", "any", True),
        ("unsafe", "any", True),
    ],
)
def test_tolerance_class_compatibility(reclaimable, tolerance, accepted):
    assert class_accepts(Reclaimable(reclaimable), ReclaimTolerance(tolerance)) is accepted


def test_pool_validation():
    with pytest.raises(ValidationError, match="Duplicate capacity class names: a"):
        pool("p", klass("a", GPU=1), klass("a", GPU=2))
    with pytest.raises(ValidationError):
        pool("p", klass("a", GPU=-1))
    with pytest.raises(ValidationError):
        klass("empty")  # a class offers at least one resource
    with pytest.raises(InputError, match="offers unknown resource 'TPU'"):
        validate_pool(pool("p", klass("a", TPU=4)), DESCRIPTORS)
    validate_pool(pool("p", klass("a", GPU=None, CPU=1000)), DESCRIPTORS)


def test_pool_defaults_and_lookup():
    p = pool("p", klass("a", GPU=1, rank=2), klass("b", GPU=1))
    assert p.capacity_class("a") is p.classes[0]
    assert p.capacity_class("zz") is None
    assert klass("x", GPU=1, reclaimable="never").reclaimable is Reclaimable.NEVER


def test_load_turns_validation_errors_into_one_line_input_errors():
    with pytest.raises(InputError) as caught:
        load(Pool, {"id": str(uid("p")), "name": "bad name!", "classes": []})
    message = str(caught.value)
    assert message.startswith("Invalid pool: ")
    assert "'name' must start with a letter or digit" in message
    assert "'classes' must not be empty" in message and "\n" not in message


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reserved": 5, "limit": 4}, r"reserved \(5\) is above limit \(4\)"),
        ({"missing_action": "default"}, "default_value is required"),
        ({"default_value": 2}, "default_value is required"),
        ({"reserved": -1}, "reserved"),
    ],
)
def test_grant_resource_validation(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        GrantResource(**kwargs)


def test_policy_priority_and_lane():
    p = pool("p")
    assert policy("a", p, priority=5).effective_priority == 5
    assert policy("a", p, lane=True, priority=5).effective_priority == PRIORITY_LANE_PRIORITY
    with pytest.raises(ValidationError):
        policy("a", p, priority=PRIORITY_LANE_PRIORITY)
    with pytest.raises(ValidationError, match="More than one grant for class: a"):
        policy("x", p, grant("a"), grant("a"))


@pytest.mark.parametrize(
    ("grants", "message"),
    [
        ((grant("zz"),), "grants class 'zz', which pool 'p' does not have"),
        ((grant("h100", TPU=res(1)),), "grants resource 'TPU' in class 'h100', which does not"),
        ((grant("h100", GPU=res(9)),), "reserved 9 GPU in class 'h100' is above its capacity"),
        ((grant("h100", GPU=res(0, 9)),), "limit 9 GPU in class 'h100' is above its capacity"),
    ],
)
def test_policy_validation_against_its_pool(grants, message):
    p = pool("p", klass("h100", GPU=8, CPU=None))
    with pytest.raises(InputError, match=message):
        validate_policy(policy("team", p, *grants), p, DESCRIPTORS)


def test_policy_validation_names_amounts_in_human_units():
    p = pool("p", klass("default", memory=24683664 * 1024))
    too_much = policy("team", p, grant("default", memory=res(100 * 1024**3)))
    with pytest.raises(InputError, match=r"reserved 100 GiB .* above its capacity of 23\.5 GiB"):
        validate_policy(too_much, p, DESCRIPTORS)


def test_policy_of_another_pool_is_rejected():
    p, q = pool("p"), pool("q")
    with pytest.raises(InputError, match="belongs to another pool"):
        validate_policy(policy("a", q), p)


def test_reserved_totals_must_fit_capacity_per_class_and_resource():
    p = pool("p", klass("h100", GPU=8, CPU=None), klass("a100", GPU=4))
    a = policy("a", p, grant("h100", GPU=res(5), CPU=res(10**9)), grant("a100", GPU=res(4)))
    b = policy("b", p, grant("h100", GPU=res(3)))
    validate_reserved_totals(p, [a, b], DESCRIPTORS)  # 8 of 8, unlimited CPU, 4 of 4
    c = policy("c", p, grant("h100", GPU=res(1)))
    with pytest.raises(
        InputError,
        match="Reserved GPU in class 'h100' of pool 'p' would total 9 GPU, above its capacity "
        "of 8 GPU",
    ):
        validate_reserved_totals(p, [a, b, c], DESCRIPTORS)


def test_reserved_totals_ignore_policies_of_other_pools():
    p, q = pool("p", klass("h100", GPU=8)), pool("q", klass("h100", GPU=8))
    validate_reserved_totals(
        p, [policy("a", p, grant("h100", GPU=res(8))), policy("b", q, grant("h100", GPU=res(8)))]
    )


def test_policy_grant_lookup():
    p = pool("p", klass("h100", GPU=8))
    a: Policy = policy("a", p, grant("h100", GPU=res(2)))
    assert a.grant_for("h100") is a.grants[0]
    assert a.grant_for("a100") is None
