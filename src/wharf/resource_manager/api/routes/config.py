"""Configuration routes: descriptors (``/v1/descriptors``), pools (``/v1/pools``, with their
``queue`` and ``allocations``) and policies (``/v1/policies``), addressed by name or id.

Invariants: reads are for any valid token, changes for administrators (refused with 403 by the
service; this module checks only the two administrators' reads, a pool's queue and
allocations); creates answer 201, deletes 204; PATCH bodies are partial (only the fields sent
change); every change honours ``X-Idempotency-Key``.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from wharf.resource_manager.api.deps import (
    AdminDep,
    CallerDep,
    IdempotencyDep,
    StateDep,
    json_response,
)
from wharf.resource_manager.contract.models import (
    DescriptorUpdate,
    PolicyCreate,
    PolicyUpdate,
    PoolAllocation,
    PoolCreate,
    PoolUpdate,
    QueueEntry,
)
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor

router = APIRouter()


def _doc(model: object, status: int = 200) -> dict[int | str, dict[str, object]]:
    return {status: {"model": model}}


# ----------------------------------------------------------------------------- descriptors


@router.get("/v1/descriptors", tags=["descriptors"], responses=_doc(list[ResourceDescriptor]))
def list_descriptors(state: StateDep, _caller: CallerDep) -> Response:
    return json_response(state.service.descriptors.list())


@router.get("/v1/descriptors/{name}", tags=["descriptors"], responses=_doc(ResourceDescriptor))
def get_descriptor(name: str, state: StateDep, _caller: CallerDep) -> Response:
    return json_response(state.service.descriptors.get(name))


@router.post(
    "/v1/descriptors", tags=["descriptors"], status_code=201, responses=_doc(ResourceDescriptor)
)
def create_descriptor(
    body: ResourceDescriptor, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    created = state.service.descriptors.create(caller, body, idempotency_key=key)
    return json_response(created, 201)


@router.patch("/v1/descriptors/{name}", tags=["descriptors"], responses=_doc(ResourceDescriptor))
def update_descriptor(
    name: str, body: DescriptorUpdate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    return json_response(state.service.descriptors.update(caller, name, body, idempotency_key=key))


@router.delete("/v1/descriptors/{name}", tags=["descriptors"], status_code=204)
def delete_descriptor(
    name: str, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    state.service.descriptors.delete(caller, name, idempotency_key=key)
    return Response(status_code=204)


# ----------------------------------------------------------------------------- pools


@router.get("/v1/pools", tags=["pools"], responses=_doc(list[Pool]))
def list_pools(state: StateDep, _caller: CallerDep) -> Response:
    return json_response(state.service.pools.list())


@router.get("/v1/pools/{pool}", tags=["pools"], responses=_doc(Pool))
def get_pool(pool: str, state: StateDep, _caller: CallerDep) -> Response:
    return json_response(state.service.pools.get(pool))


@router.post("/v1/pools", tags=["pools"], status_code=201, responses=_doc(Pool, 201))
def create_pool(
    body: PoolCreate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    return json_response(state.service.pools.create(caller, body, idempotency_key=key), 201)


@router.patch("/v1/pools/{pool}", tags=["pools"], responses=_doc(Pool))
def update_pool(
    pool: str, body: PoolUpdate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    return json_response(state.service.pools.update(caller, pool, body, idempotency_key=key))


@router.delete("/v1/pools/{pool}", tags=["pools"], status_code=204)
def delete_pool(pool: str, state: StateDep, caller: CallerDep, key: IdempotencyDep) -> Response:
    state.service.pools.delete(caller, pool, idempotency_key=key)
    return Response(status_code=204)


@router.get("/v1/pools/{pool}/queue", tags=["pools"], responses=_doc(list[QueueEntry]))
def pool_queue(pool: str, state: StateDep, _admin: AdminDep) -> Response:
    return json_response(state.service.pools.queue(pool))


@router.get("/v1/pools/{pool}/allocations", tags=["pools"], responses=_doc(list[PoolAllocation]))
def pool_allocations(pool: str, state: StateDep, _admin: AdminDep) -> Response:
    return json_response(state.service.pools.allocations(pool))


# ----------------------------------------------------------------------------- policies


@router.get("/v1/policies", tags=["policies"], responses=_doc(list[Policy]))
def list_policies(state: StateDep, _caller: CallerDep, pool: str | None = None) -> Response:
    return json_response(state.service.policies.list(pool))


@router.get("/v1/policies/{policy}", tags=["policies"], responses=_doc(Policy))
def get_policy(policy: str, state: StateDep, _caller: CallerDep) -> Response:
    return json_response(state.service.policies.get(policy))


@router.post("/v1/policies", tags=["policies"], status_code=201, responses=_doc(Policy, 201))
def create_policy(
    body: PolicyCreate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    return json_response(state.service.policies.create(caller, body, idempotency_key=key), 201)


@router.patch("/v1/policies/{policy}", tags=["policies"], responses=_doc(Policy))
def update_policy(
    policy: str, body: PolicyUpdate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    return json_response(state.service.policies.update(caller, policy, body, idempotency_key=key))


@router.delete("/v1/policies/{policy}", tags=["policies"], status_code=204)
def delete_policy(policy: str, state: StateDep, caller: CallerDep, key: IdempotencyDep) -> Response:
    state.service.policies.delete(caller, policy, idempotency_key=key)
    return Response(status_code=204)
