"""What an allocation grants to pin: whole CPUs (rounded up from mCPU) and GPUs, by kind."""

from datetime import UTC, datetime
from uuid import uuid4

from wharf.execution.pinning import allocated_amounts
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


def test_allocated_amounts_sum_by_kind():
    info = ResourceRequestInfo.model_validate(
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
    assert allocated_amounts(info) == (2, 2)
