"""``/api/v1/resource_pools``, ``/api/v1/resource_policies``, ``/api/v1/resource_descriptors``:
the team's Resource Manager configuration and queues, read through the workspace server.

Invariants: any authenticated caller reads them, and nothing here changes the RM (pools and
policies are managed on the RM itself). Errors: a pool or policy the RM does not know is 404; a
server without an RM, or whose RM credential may not read queues, answers 409 saying so; an RM
that cannot be reached is 503.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Response
from pydantic import BaseModel, TypeAdapter

from wharf.core.errors import IllegalOperationError
from wharf.resource_manager.contract.models import PoolAllocation, QueueEntry
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor
from wharf.server.deps import Ctx, CtxDep
from wharf.server.resource_manager import NO_RESOURCE_MANAGER, server_credentials
from wharf.server.routers._common import API_PREFIX, ERRORS

T = TypeVar("T")
MAX_NAME_LENGTH = 255
NOT_AN_RM_ADMIN = (
    "The workspace server's Resource Manager credential (--resource-manager-token) is not an "
    "RM administrator's, so it cannot read pool queues and allocations: ask the RM's "
    "administrator, or use the RM directly (--rm-url)."
)
_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    503: {**ERRORS[404], "description": "The Resource Manager cannot be reached"},
}
_Name = Annotated[str, Path(min_length=1, max_length=MAX_NAME_LENGTH)]
_PoolFilter = Annotated[str | None, Query(min_length=1, max_length=MAX_NAME_LENGTH)]


def _read(ctx: Ctx, call: Callable[[Any], T], *, admin_read: bool = False) -> T:
    """``call(client)`` with the server's RM client, its refusals worded for the caller.

    The server reads with its own RM credential; queues and allocations (``admin_read``) need
    that credential to be an RM administrator's, and a server whose credential is not says so
    (409) rather than failing obscurely.
    """
    from wharf.resource_manager.contract.errors import PermissionDeniedError

    link = ctx.state.resource_requests  # authenticates before anything reaches the RM
    if link is None:
        raise IllegalOperationError(NO_RESOURCE_MANAGER)
    with server_credentials(), _admin_refusal(admin_read, PermissionDeniedError):
        return call(link.client)


@contextmanager
def _admin_refusal(admin_read: bool, denied: type[Exception]) -> Iterator[None]:
    try:
        yield
    except denied:
        if admin_read:
            raise IllegalOperationError(NOT_AN_RM_ADMIN) from None
        raise


def _json(value: BaseModel | list[Any], kind: Any = None) -> Response:
    if isinstance(value, BaseModel):
        body = value.model_dump_json(by_alias=True)
    else:
        body = TypeAdapter(kind).dump_json(value, by_alias=True).decode()
    return Response(body, media_type="application/json")


def build_router() -> APIRouter:
    router = APIRouter(prefix=API_PREFIX, tags=["resource pools"], responses=_RESPONSES)

    @router.get("/resource_pools", response_model=list[Pool])
    def list_pools(ctx: CtxDep) -> Response:
        """The Resource Manager's pools."""
        return _json(_read(ctx, lambda rm: rm.pools.list()), list[Pool])

    @router.get("/resource_pools/{pool}", response_model=Pool)
    def get_pool(ctx: CtxDep, pool: _Name) -> Response:
        """One pool, by name or id."""
        return _json(_read(ctx, lambda rm: rm.pools.get(pool)))

    @router.get("/resource_pools/{pool}/queue", response_model=list[QueueEntry])
    def pool_queue(ctx: CtxDep, pool: _Name) -> Response:
        """The pool's pending requests, in queue order."""
        entries = _read(ctx, lambda rm: rm.pools.queue(pool), admin_read=True)
        return _json(entries, list[QueueEntry])

    @router.get("/resource_pools/{pool}/allocations", response_model=list[PoolAllocation])
    def pool_allocations(ctx: CtxDep, pool: _Name) -> Response:
        """The allocations held in the pool now."""
        held = _read(ctx, lambda rm: rm.pools.allocations(pool), admin_read=True)
        return _json(held, list[PoolAllocation])

    @router.get("/resource_policies", response_model=list[Policy])
    def list_policies(ctx: CtxDep, pool: _PoolFilter = None) -> Response:
        """The Resource Manager's policies (of one pool, by name or id, if given)."""
        return _json(_read(ctx, lambda rm: rm.policies.list(pool)), list[Policy])

    @router.get("/resource_policies/{policy}", response_model=Policy)
    def get_policy(ctx: CtxDep, policy: _Name) -> Response:
        return _json(_read(ctx, lambda rm: rm.policies.get(policy)))

    @router.get("/resource_descriptors", response_model=list[ResourceDescriptor])
    def list_descriptors(ctx: CtxDep) -> Response:
        """The resources the Resource Manager knows, with their units."""
        return _json(_read(ctx, lambda rm: rm.descriptors.list()), list[ResourceDescriptor])

    return router
