"""trusted_model builds what model_construct builds, for the models the RM builds that way."""

from __future__ import annotations

import pickle

from tests.resource_manager.builders import (
    gpu,
    holding,
    klass,
    policy,
    pool,
    request,
    run,
    snapshot,
)
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.resource_manager.domain import Allocation, ResourceRequest
from wharf.resource_manager.scheduler.trusted import trusted_model

P = pool("p", klass("c", GPU=4))
TEAM = policy("team", P)


def _same(built: ResourceRequest | Allocation, reference: ResourceRequest | Allocation) -> None:
    assert type(built) is type(reference)
    assert built == reference
    assert built.model_fields_set == reference.model_fields_set
    assert built.model_dump(mode="json", by_alias=True) == reference.model_dump(
        mode="json", by_alias=True
    )
    assert repr(built) == repr(reference)
    assert pickle.loads(pickle.dumps(built)) == reference


def test_an_allocation_equals_its_model_construct_twin() -> None:
    held = holding("h", P, TEAM, {("c", "GPU"): 2})
    for allocation in held.allocations:
        values = {name: getattr(allocation, name) for name in Allocation.model_fields}
        _same(trusted_model(Allocation, dict(values)), Allocation.model_construct(**values))


def test_admitted_allocations_are_valid_models() -> None:
    wanted = request("r", gpu(2))
    decisions = run(snapshot([P], [TEAM], [wanted]))
    (admission,) = decisions.admissions
    for allocation in admission.allocations:
        dumped = allocation.model_dump(by_alias=True)
        assert Allocation.model_validate(dumped) == allocation


def test_a_request_info_equals_its_model_construct_twin() -> None:
    held = holding("h", P, TEAM, {("c", "GPU"): 2}, lease=30)
    values = {name: getattr(held, name) for name in ResourceRequest.model_fields}
    reference = ResourceRequestInfo.model_construct(**values, requester="alice")
    _same(trusted_model(ResourceRequestInfo, {**values, "requester": "alice"}), reference)


def test_the_built_model_stays_frozen() -> None:
    held = holding("h", P, TEAM, {("c", "GPU"): 2})
    built = trusted_model(Allocation, dict(held.allocations[0].__dict__))
    try:
        built.priority = 5  # type: ignore[misc]
    except Exception as error:  # pydantic's frozen-instance error
        assert "frozen" in str(error)
    else:
        raise AssertionError("a frozen model accepted an assignment")
