"""``InProcessResourceManager`` implements ``ResourceManagerClient`` over the service."""

from __future__ import annotations

import pytest

from tests.conftest import FakeClock
from wharf.core.enums import ResourceRequestRuntimeState as RS
from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError, IllegalOperationError, InputError
from wharf.resource_manager.contract import PermissionDeniedError, ResourceManagerClient
from wharf.resource_manager.contract.models import (
    PolicyCreate,
    PoolCreate,
    PoolUpdate,
    RequestFilter,
    ResourceRequestCreate,
)
from wharf.resource_manager.embedded.inprocess import InProcessResourceManager
from wharf.resource_manager.service import Principal


def _pool() -> PoolCreate:
    return PoolCreate.model_validate(
        {"name": "gpus", "classes": [{"name": "a100", "capacity": {"GPU": 1, "CPU": "8"}}]}
    )


def _policy() -> PolicyCreate:
    return PolicyCreate.model_validate(
        {"name": "users", "pool": "gpus", "subject_selector": {"subject_type": "account"}}
    )


def _request(user: str, quantity: int = 1) -> ResourceRequestCreate:
    return ResourceRequestCreate.model_validate(
        {
            "subjects": [{"nodes": [{"subject_type": "account", "subject_id": user}]}],
            "demands": [{"resource": "GPU", "quantity": quantity}],
            "lease_seconds": 30,
            "metadata": {"user": user},
        }
    )


def _uses(client: ResourceManagerClient) -> ResourceManagerClient:
    return client  # typed use through the protocol only


def test_a_full_round_trip_through_the_protocol(
    client: InProcessResourceManager, clock: FakeClock
) -> None:
    rm = _uses(client)
    assert {d.name for d in rm.descriptors.list()} == {"CPU", "GPU", "memory"}
    pool = rm.pools.create(_pool(), idempotency_key="pool")
    assert rm.pools.create(_pool(), idempotency_key="pool") == pool
    rm.policies.create(_policy())
    held = rm.requests.create(_request("local-user"), idempotency_key="r1")
    assert held.status is S.ALLOCATED and held.requester == "local-user"
    assert rm.requests.create(_request("local-user"), idempotency_key="r1").id == held.id

    waiting = rm.requests.create(_request("local-user"))
    assert [e.request.id for e in rm.pools.queue("gpus")] == [waiting.id]
    assert rm.requests.explain(waiting.id).outcome == "waiting"
    clock.advance(5)
    renewed = rm.requests.renew(held.id, 60, RS.RUNNING)
    assert renewed.runtime_state is RS.RUNNING
    assert [a.request_id for a in rm.pools.allocations(pool.id)] == [held.id]
    assert rm.requests.release(held.id).status is S.RELEASED
    assert rm.requests.get(waiting.id).status is S.ALLOCATED
    page = rm.requests.list(RequestFilter(metadata={"user": "local-user"}, status=(S.RELEASED,)))
    assert [r.id for r in page.items] == [held.id]
    assert [p.name for p in rm.pools.list()] == ["gpus"]
    assert rm.pools.update("gpus", PoolUpdate(rank=3)).rank == 3
    assert [p.name for p in rm.policies.list("gpus")] == ["users"]


def test_principals_are_bound_to_the_client(client: InProcessResourceManager) -> None:
    client.pools.create(_pool())
    client.policies.create(_policy())
    alice = client.as_principal(Principal("alice"))
    bob = client.as_principal(Principal("bob"))
    mine = alice.requests.create(_request("alice"))
    assert mine.requester == "alice"
    with pytest.raises(PermissionDeniedError):
        bob.requests.release(mine.id)
    with pytest.raises(PermissionDeniedError):
        bob.pools.delete("gpus")
    assert alice.requests.release(mine.id).status is S.RELEASED


def test_errors_are_wharf_errors(client: InProcessResourceManager) -> None:
    import uuid

    with pytest.raises(EntityNotFoundError):
        client.pools.get("nope")
    with pytest.raises(EntityNotFoundError):
        client.requests.get(uuid.uuid4())
    with pytest.raises(InputError):
        client.requests.renew(uuid.uuid4(), 0)
    client.pools.create(_pool())
    client.policies.create(_policy())
    held = client.requests.create(_request("local-user"))
    with pytest.raises(IllegalOperationError):
        client.requests.cancel(held.id)
    with pytest.raises(IllegalOperationError):
        client.pools.delete("gpus")
