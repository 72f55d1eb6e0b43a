"""What an allocation grants to pin: whole CPUs (rounded up from mCPU) and GPUs, by kind; the
allocation's way to a step's process (its environment); a step process without one never
imports the Resource Manager's contract models."""

from datetime import UTC, datetime
from uuid import uuid4

from tests.import_probe import loaded_after
from wharf.execution.pinning import allocated_amounts, allocation_env, allocation_from_env
from wharf.resource_manager.contract.models import ResourceRequestInfo


def _allocation(resource: str, kind: str, base: int) -> dict[str, object]:
    return {
        "id": str(uuid4()),
        "request_id": str(uuid4()),
        "demand_index": 0,
        "pool_id": str(uuid4()),
        "class": "default",
        "resource": resource,
        "resource_kind": kind,
        "quantity": base,
        "unit": resource,
        "base_quantity": base,
        "policy_id": str(uuid4()),
        "priority": 0,
    }


def _info() -> ResourceRequestInfo:
    return ResourceRequestInfo.model_validate(
        {
            "id": str(uuid4()),
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": "me"}]}],
            "demands": [{"kind": "cpu", "quantity": 1}],
            "created_at": datetime.now(UTC),
            "requester": "me",
            "allocations": [
                _allocation("CPU", "cpu", 1500),
                _allocation("GPU", "gpu", 2),
                _allocation("memory", "memory", 2**30),
                _allocation("license", "license", 3),
            ],
        }
    )


def test_allocated_amounts_sum_by_kind():
    assert allocated_amounts(_info()) == (2, 2)


def test_an_allocation_reaches_the_step_through_its_environment():
    info = _info()
    env = allocation_env({"KEPT": "1"}, info)
    assert env["KEPT"] == "1"
    assert allocation_from_env(env) == info
    assert allocation_from_env({"KEPT": "1"}) is None


def test_the_step_process_start_imports_no_resource_manager_models():
    code = (
        "import wharf.execution.entrypoint\n"
        "from wharf.execution.pinning import allocation_from_env\n"
        "assert allocation_from_env({}) is None\n"
    )
    assert loaded_after(code, ["wharf.resource_manager"]) == []
