"""Bad input: clear InputErrors (or the right WharfError) and nothing half-applied."""

from __future__ import annotations

from typing import Any

import pytest

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    gpus,
    klass,
    policy_spec,
    pool_spec,
    request_count,
    request_spec,
    setup_pool,
)
from wharf.core.errors import InputError
from wharf.resource_manager.contract.models import ResourceRequestCreate
from wharf.resource_manager.service import ResourceManagerService


@pytest.mark.parametrize(
    ("demand", "message"),
    [
        (
            {"resource": "GPU", "quantity": 1, "unit": "GiB"},
            "Unknown unit 'GiB' for resource 'GPU'",
        ),
        ({"resource": "memory", "quantity": 1, "unit": "gb"}, "Unknown unit 'gb'"),
        ({"kind": "cpu", "quantity": 1, "unit": "cores"}, "Unknown unit 'cores'"),
        ({"resource": "TPU", "quantity": 1}, "unknown resource 'TPU'"),
        ({"kind": "fpga", "quantity": 1}, "no resource descriptor has kind 'fpga'"),
    ],
)
def test_unknown_resources_and_units(
    rm: ResourceManagerService, demand: dict[str, Any], message: str
) -> None:
    setup_pool(rm)
    with pytest.raises(InputError, match=message):
        rm.requests.create(ALICE, request_spec(demand))
    assert request_count(rm) == 0


@pytest.mark.parametrize("quantity", [-1, 0, 1.5, 2.0, "2", True])
def test_quantities_must_be_positive_integers(quantity: object) -> None:
    with pytest.raises(InputError, match="quantity"):
        from wharf.resource_manager.domain import load

        load(
            ResourceRequestCreate,
            {
                "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "a"}]}],
                "demands": [{"resource": "GPU", "quantity": quantity}],
            },
        )


def test_the_service_validates_raw_input(rm: ResourceManagerService) -> None:
    raw = {
        "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "a"}]}],
        "demands": [{"resource": "GPU", "quantity": 1.5}],
    }
    with pytest.raises(InputError, match=r"'demands\[0\]\.quantity' must be a whole number"):
        rm.requests.create(ALICE, raw)
    with pytest.raises(InputError, match="lease_seconds"):
        rm.requests.create(
            ALICE, {**raw, "demands": [{"resource": "GPU", "quantity": 1}], "lease_seconds": -5}
        )


@pytest.mark.parametrize(
    "capacity",
    [
        {"GPU": -1},
        {"GPU": 1.5},
        {"CPU": "1.0005CPU"},
        {"memory": "-1GiB"},
        {"memory": "12 parsecs"},
    ],
)
def test_capacities_must_be_exact_non_negative(
    rm: ResourceManagerService, capacity: dict[str, Any]
) -> None:
    with pytest.raises(InputError, match=r"capacity|Quantity|parse"):
        rm.pools.create(ADMIN, {"name": "p", "classes": [{"name": "c", "capacity": capacity}]})
    assert rm.pools.list() == []


def test_unknown_capacity_resource(rm: ResourceManagerService) -> None:
    with pytest.raises(InputError, match="Pool 'p' class 'c' names unknown resource 'TPU'"):
        rm.pools.create(ADMIN, pool_spec("p", klass("c", TPU=4)))


@pytest.mark.parametrize(
    "selector",
    [
        {},
        {"all": []},
        {"subject_type": "galaxy"},
        {"not": {}},
        {"unknown_field": 1},
    ],
)
def test_malformed_selectors(rm: ResourceManagerService, selector: dict[str, Any]) -> None:
    rm.pools.create(ADMIN, pool_spec())
    from wharf.resource_manager.contract.models import PolicyCreate
    from wharf.resource_manager.domain import load

    with pytest.raises(InputError):
        rm.policies.create(
            ADMIN,
            load(PolicyCreate, {"name": "t", "pool": "gpus", "subject_selector": selector}),
        )
    with pytest.raises(InputError):
        rm.requests.create(ALICE, {**request_spec(gpus(1)).model_dump(), "pool_selector": selector})
    assert rm.policies.list() == []


def test_reserved_above_a_class_capacity(rm: ResourceManagerService) -> None:
    rm.pools.create(ADMIN, pool_spec())
    from tests.resource_manager.service.helpers import policy_spec

    grants = [{"class": "h100", "resources": {"GPU": {"reserved": 5}}}]
    with pytest.raises(
        InputError, match="reserved 5 GPU in class 'h100' is above its capacity of 4 GPU"
    ):
        rm.policies.create(ADMIN, policy_spec(grants=grants))
    assert rm.policies.list() == []


def test_bad_renewals(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    for seconds in (0, -1, 1.5, True):
        with pytest.raises(InputError, match="lease_seconds"):
            rm.requests.renew(ALICE, held.id, seconds)  # type: ignore[arg-type]
    assert rm.requests.get(held.id) == held


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"rank": 2**31}, "'rank' must be at most 2147483647"),
        ({"rank": -(2**40)}, "'rank' must be at least -2147483647"),
        ({"concurrency_limit": 10**23}, "'concurrency_limit' must be at most 2147483647"),
    ],
)
def test_ranks_and_limits_beyond_an_sql_integer_are_input_errors(
    rm: ResourceManagerService, fields: dict[str, Any], message: str
) -> None:
    """A number no SQL INTEGER column holds is refused with its field named, not a database
    error (an OverflowError on SQLite: a 500 from the API, a traceback from the CLI)."""
    body = {"name": "p", "classes": [{"name": "c", "capacity": {"GPU": 1}}]}
    with pytest.raises(InputError, match=message):
        rm.pools.create(ADMIN, {**body, **fields})
    with pytest.raises(InputError, match=message.replace("'", r"'classes\[0\]\.", 1)):
        rm.pools.create(ADMIN, {**body, "classes": [{**body["classes"][0], **fields}]})
    rm.pools.create(ADMIN, pool_spec())
    with pytest.raises(InputError, match=message):
        rm.pools.update(ADMIN, "gpus", fields)
    for policy in ({"concurrency_limit": 10**23}, {"fair_share_weight": 2**31}):
        with pytest.raises(InputError, match="must be at most 2147483647"):
            rm.policies.create(ADMIN, {**policy_spec().model_dump(by_alias=True), **policy})
    assert [p.name for p in rm.pools.list()] == ["gpus"]
    assert rm.pools.get("gpus").rank == 0
    assert rm.policies.list() == []
