"""Contract: descriptors, pools and policies CRUD on every backend."""

from __future__ import annotations

import pytest

from tests.resource_manager.service.helpers import (
    ADMIN,
    ALICE,
    gpus,
    klass,
    policy_spec,
    pool_spec,
    request_spec,
    setup_pool,
)
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import (
    EntityExistsError,
    EntityNotFoundError,
    IllegalOperationError,
    InputError,
)
from wharf.resource_manager.contract.errors import PermissionDeniedError
from wharf.resource_manager.contract.models import DescriptorUpdate, PolicyUpdate, PoolUpdate
from wharf.resource_manager.domain import ResourceDescriptor, Unit
from wharf.resource_manager.service import ResourceManagerService

GIB = 1024**3
LICENSE = ResourceDescriptor(
    name="matlab",
    kind="license",
    units=(Unit(name="seat", multiplier=1), Unit(name="pack", multiplier=10)),
    default_unit="seat",
)


# ----------------------------------------------------------------------------- descriptors


def test_custom_descriptor_lifecycle(rm: ResourceManagerService) -> None:
    created = rm.descriptors.create(ADMIN, LICENSE)
    assert created == LICENSE
    assert rm.descriptors.get("matlab") == LICENSE
    assert [d.name for d in rm.descriptors.list()] == ["CPU", "GPU", "matlab", "memory"]
    with pytest.raises(EntityExistsError, match="'matlab' already exists"):
        rm.descriptors.create(ADMIN, LICENSE)

    updated = rm.descriptors.update(ADMIN, "matlab", DescriptorUpdate(description="Seats"))
    assert updated.description == "Seats" and updated.units == LICENSE.units
    assert rm.descriptors.get("matlab").description == "Seats"

    rm.pools.create(ADMIN, pool_spec("lic", klass("site", matlab="3pack")))
    assert rm.pools.get("lic").classes[0].capacity == {"matlab": 30}
    with pytest.raises(IllegalOperationError, match="still offered by pools: lic"):
        rm.descriptors.delete(ADMIN, "matlab")
    rm.pools.delete(ADMIN, "lic")
    rm.descriptors.delete(ADMIN, "matlab")
    with pytest.raises(EntityNotFoundError):
        rm.descriptors.get("matlab")


def test_stock_descriptors_are_read_only(rm: ResourceManagerService) -> None:
    with pytest.raises(IllegalOperationError, match="stock resource descriptor 'GPU'"):
        rm.descriptors.update(ADMIN, "GPU", DescriptorUpdate(description="x"))
    with pytest.raises(IllegalOperationError, match="stock"):
        rm.descriptors.delete(ADMIN, "CPU")


@pytest.mark.parametrize(
    ("name", "stock"), [("cpu", "CPU"), ("Memory", "memory"), ("gpu", "GPU"), ("MEMORY", "memory")]
)
def test_a_custom_resource_named_like_a_built_in_kind_is_refused(
    rm: ResourceManagerService, name: str, stock: str
) -> None:
    custom = LICENSE.model_copy(update={"name": name})
    with pytest.raises(InputError, match=f"built-in .* kind: use its stock resource '{stock}'"):
        rm.descriptors.create(ADMIN, custom)
    of_the_kind = LICENSE.model_copy(update={"kind": name.lower()})  # a CPU demand took it
    with pytest.raises(InputError, match=f"Kind '{name.lower()}' of '{LICENSE.name}' clashes"):
        rm.descriptors.create(ADMIN, of_the_kind)
    assert [d.name for d in rm.descriptors.list()] == ["CPU", "GPU", "memory"]


def test_invalid_descriptor_update_changes_nothing(rm: ResourceManagerService) -> None:
    rm.descriptors.create(ADMIN, LICENSE)
    with pytest.raises(InputError, match="Default unit 'crate'"):
        rm.descriptors.update(ADMIN, "matlab", DescriptorUpdate(default_unit="crate"))
    assert rm.descriptors.get("matlab") == LICENSE


@pytest.mark.parametrize("unit", ["core-hour", "my unit", "x2", "seat_pack"])
def test_a_unit_no_quantity_can_name_is_refused(rm: ResourceManagerService, unit: str) -> None:
    """'3core-hour' reads as 3 of unit 'core': such a unit was accepted and never usable."""
    odd = LICENSE.model_copy(
        update={"units": (Unit(name=unit, multiplier=1),), "default_unit": None}
    )
    with pytest.raises(InputError, match=f"Unit '{unit}' of resource 'matlab' is not letters"):
        rm.descriptors.create(ADMIN, odd)
    rm.descriptors.create(ADMIN, LICENSE)
    with pytest.raises(InputError, match=f"Unit '{unit}' of resource 'matlab'"):
        rm.descriptors.update(
            ADMIN,
            "matlab",
            DescriptorUpdate(units=(Unit(name=unit, multiplier=1),), default_unit=None),
        )
    assert rm.descriptors.get("matlab") == LICENSE
    own = ResourceDescriptor(name="tpu-v4", kind="tpu", units=(Unit(name="tpu-v4", multiplier=1),))
    assert rm.descriptors.create(ADMIN, own) == own  # named like its resource: a bare number


def test_a_resource_named_like_another_but_for_case_is_refused(rm: ResourceManagerService) -> None:
    rm.descriptors.create(ADMIN, LICENSE)
    twin = LICENSE.model_copy(update={"name": "MATLAB"})
    with pytest.raises(
        EntityExistsError, match="'MATLAB' differs from the existing resource 'matlab'"
    ):
        rm.descriptors.create(ADMIN, twin)
    assert [d.name for d in rm.descriptors.list()] == ["CPU", "GPU", "matlab", "memory"]


# ----------------------------------------------------------------------------- pools


def test_pool_create_get_list_update(rm: ResourceManagerService) -> None:
    pool = rm.pools.create(
        ADMIN,
        pool_spec(
            "gpus",
            klass("h100", GPU=8, CPU="96", memory="1TiB", rank=2),
            klass("cpu", CPU=64_000, memory=None, reclaimable="coordinated"),
            attributes={"site": "eu"},
        ),
    )
    assert pool.classes[0].capacity == {"GPU": 8, "CPU": 96_000, "memory": 1024 * GIB}
    assert pool.classes[1].capacity == {"CPU": 64_000, "memory": None}
    assert rm.pools.get("gpus") == pool == rm.pools.get(pool.id) == rm.pools.get(str(pool.id))
    assert [p.name for p in rm.pools.list()] == ["gpus"]
    with pytest.raises(EntityExistsError, match="'gpus' already exists"):
        rm.pools.create(ADMIN, pool_spec("gpus"))

    updated = rm.pools.update(ADMIN, "gpus", PoolUpdate(rank=5, concurrency_limit=3))
    assert (updated.rank, updated.concurrency_limit, updated.classes) == (5, 3, pool.classes)
    assert updated.attributes == {"site": "eu"}
    cleared = rm.pools.update(ADMIN, pool.id, PoolUpdate(concurrency_limit=None))
    assert cleared.concurrency_limit is None and cleared.rank == 5
    renamed = rm.pools.update(ADMIN, "gpus", PoolUpdate(name="accel"))
    assert rm.pools.get("accel") == renamed and renamed.id == pool.id
    with pytest.raises(EntityNotFoundError):
        rm.pools.get("gpus")


def test_pool_rename_to_taken_name_is_refused(rm: ResourceManagerService) -> None:
    rm.pools.create(ADMIN, pool_spec("a"))
    rm.pools.create(ADMIN, pool_spec("b"))
    with pytest.raises(EntityExistsError):
        rm.pools.update(ADMIN, "b", PoolUpdate(name="a"))


def test_shrinking_a_pool_below_reserved_is_refused(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=4, grants=[{"class": "h100", "resources": {"GPU": {"reserved": 3}}}])
    with pytest.raises(InputError, match="reserved 3 GPU in class 'h100' is above its capacity"):
        rm.pools.update(ADMIN, "gpus", PoolUpdate(classes=(klass("h100", GPU=2),)))
    assert rm.pools.get("gpus").classes[0].capacity == {"GPU": 4}


def test_deleting_a_pool_with_live_requests_is_refused(rm: ResourceManagerService) -> None:
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert held.status is S.ALLOCATED
    with pytest.raises(IllegalOperationError, match="still has 1 live resource request"):
        rm.pools.delete(ADMIN, "gpus")
    assert rm.pools.get("gpus")  # nothing deleted
    assert rm.policies.get("team")
    rm.requests.release(ALICE, held.id)
    rm.pools.delete(ADMIN, "gpus")
    assert rm.pools.list() == [] and rm.policies.list() == []
    assert rm.requests.get(held.id).status is S.RELEASED  # history is kept


def test_dropping_a_class_that_live_allocations_hold_is_refused(
    rm: ResourceManagerService,
) -> None:
    """Usage counts only against the pool's classes: a dropped class's allocations would be
    forgotten, and a renamed class handed out again while they run (overcommit)."""
    setup_pool(rm)
    held = rm.requests.create(ALICE, request_spec(gpus(3)))
    assert held.status is S.ALLOCATED
    renamed = PoolUpdate(classes=(klass("a100", GPU=4),))
    with pytest.raises(IllegalOperationError, match="cannot drop GPU of class 'h100': 1 live"):
        rm.pools.update(ADMIN, "gpus", renamed)
    assert [c.name for c in rm.pools.get("gpus").classes] == ["h100"]
    assert rm.requests.create(ALICE, request_spec(gpus(3))).status is S.PENDING
    rm.pools.update(ADMIN, "gpus", PoolUpdate(classes=(klass("h100", GPU=2),)))  # shrinks
    rm.requests.release(ALICE, held.id)
    assert [c.name for c in rm.pools.update(ADMIN, "gpus", renamed).classes] == ["a100"]


def test_pending_request_naming_the_pool_blocks_its_deletion(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=1)
    rm.requests.create(ALICE, request_spec(gpus(1)))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1), pool="gpus"))
    assert waiting.status is S.PENDING
    with pytest.raises(IllegalOperationError, match="2 live"):
        rm.pools.delete(ADMIN, "gpus")


# ----------------------------------------------------------------------------- policies


def test_policy_create_get_list_update_delete(rm: ResourceManagerService) -> None:
    rm.pools.create(ADMIN, pool_spec())
    grants = [{"class": "h100", "resources": {"GPU": {"reserved": 2, "limit": 3}}}]
    policy = rm.policies.create(ADMIN, policy_spec("team", grants=grants, priority=5))
    assert policy.grants[0].resources["GPU"].reserved == 2
    assert rm.policies.get("team") == policy == rm.policies.get(policy.id)
    assert rm.policies.list("gpus") == [policy] == rm.policies.list()
    with pytest.raises(EntityExistsError):
        rm.policies.create(ADMIN, policy_spec("team"))

    updated = rm.policies.update(ADMIN, "team", PolicyUpdate(priority=9))
    assert (updated.priority, updated.grants) == (9, policy.grants)
    regranted = rm.policies.update(ADMIN, "team", PolicyUpdate(grants=()))
    assert regranted.grants == () and regranted.priority == 9
    rm.policies.delete(ADMIN, "team")
    with pytest.raises(EntityNotFoundError):
        rm.policies.get("team")


def test_deleting_a_policy_live_allocations_were_made_under_is_refused(
    rm: ResourceManagerService,
) -> None:
    """As for a pool: the allocations would name a policy that is gone (its raw id in
    ``pool show`` and ``request show``)."""
    setup_pool(rm)
    rm.policies.create(ADMIN, policy_spec("spare"))
    held = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert held.status is S.ALLOCATED
    under = rm.policies.get(held.allocations[0].policy_id).name
    with pytest.raises(IllegalOperationError) as refused:
        rm.policies.delete(ADMIN, under)
    assert str(refused.value) == (
        f"Resource policy '{under}' still has 1 live resource request(s) allocated under it; "
        "release or cancel them before deleting it."
    )
    assert rm.policies.get(under)  # nothing deleted
    other = "spare" if under == "team" else "team"
    rm.policies.delete(ADMIN, other)  # no allocation made under it
    rm.requests.release(ALICE, held.id)
    rm.policies.delete(ADMIN, under)
    assert rm.policies.list() == []


def test_policy_quantities_accept_units(rm: ResourceManagerService) -> None:
    rm.pools.create(ADMIN, pool_spec())
    grants = [{"class": "h100", "resources": {"memory": {"reserved": "64GiB", "limit": 128 * GIB}}}]
    policy = rm.policies.create(ADMIN, policy_spec(grants=grants))
    assert policy.grants[0].resources["memory"].reserved == 64 * GIB
    assert policy.grants[0].resources["memory"].limit == 128 * GIB


def test_sum_of_reserved_above_capacity_is_refused(rm: ResourceManagerService) -> None:
    rm.pools.create(ADMIN, pool_spec())  # 4 GPU
    grant = [{"class": "h100", "resources": {"GPU": {"reserved": 3}}}]
    rm.policies.create(ADMIN, policy_spec("a", grants=grant))
    with pytest.raises(InputError, match="would total 6 GPU, above its capacity of 4 GPU"):
        rm.policies.create(ADMIN, policy_spec("b", grants=grant))
    assert [p.name for p in rm.policies.list()] == ["a"]
    rm.policies.create(ADMIN, policy_spec("b"))
    with pytest.raises(InputError, match="would total"):
        rm.policies.update(ADMIN, "b", PolicyUpdate.model_validate({"grants": grant}))
    assert rm.policies.get("b").grants == ()


def test_policy_for_unknown_pool_or_class(rm: ResourceManagerService) -> None:
    with pytest.raises(EntityNotFoundError, match="pool 'nope'"):
        rm.policies.create(ADMIN, policy_spec("t", pool="nope"))
    rm.pools.create(ADMIN, pool_spec())
    with pytest.raises(InputError, match="grants class 'a100', which pool 'gpus' does not have"):
        rm.policies.create(ADMIN, policy_spec("t", grants=[{"class": "a100"}]))


def test_configuration_needs_an_admin(rm: ResourceManagerService) -> None:
    with pytest.raises(PermissionDeniedError, match="Only an administrator may create"):
        rm.pools.create(ALICE, pool_spec())
    rm.pools.create(ADMIN, pool_spec())
    with pytest.raises(PermissionDeniedError):
        rm.policies.create(ALICE, policy_spec())
    with pytest.raises(PermissionDeniedError):
        rm.pools.delete(ALICE, "gpus")
    with pytest.raises(PermissionDeniedError):
        rm.descriptors.create(ALICE, LICENSE)
    assert rm.pools.get("gpus")


def test_growing_a_pool_admits_waiting_requests_at_once(rm: ResourceManagerService) -> None:
    setup_pool(rm, gpus_total=1)
    rm.requests.create(ALICE, request_spec(gpus(1)))
    waiting = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert waiting.status is S.PENDING
    rm.pools.update(ADMIN, "gpus", PoolUpdate(classes=(klass("h100", GPU=2),)))
    assert rm.requests.get(waiting.id).status is S.ALLOCATED


def test_a_request_no_policy_matches_is_rejected(rm: ResourceManagerService) -> None:
    rejected = rm.requests.create(ALICE, request_spec(gpus(1)))
    assert rejected.status is S.REJECTED
    reason = rejected.status_reason or ""
    assert reason.startswith("No resource policy matches any of the request subjects.")
    assert "can add one: wharf policy create NAME --pool POOL --subject-type account" in reason
