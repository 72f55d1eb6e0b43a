"""``/api/v1/resource_requests``: the Resource Manager requests of the workspace's steps, listed,
read, explained, renewed, released and cancelled through the server, which made them under its
own RM principal.

Invariants: the server decides who sees what (:func:`_visible`, :func:`_narrowed`; the RM cannot
tell the server's callers apart), and other projects' requests never leave the RM; RM errors keep
their Wharf types, an unreachable RM is 503 naming it, and a server without an RM answers 409.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body, Depends, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError, IllegalOperationError, InputError
from wharf.resource_manager.contract.models import (
    MAX_DURATION_SECONDS,
    ExplanationInfo,
    Page,
    PageRequest,
    RequestFilter,
    ResourceRequestInfo,
)
from wharf.resource_manager.domain import SubjectType, load
from wharf.server.deps import Ctx, CtxDep
from wharf.server.request_holders import releaser
from wharf.server.resource_manager import NO_RESOURCE_MANAGER, ServerRequests
from wharf.server.routers._common import API_PREFIX, ERRORS, list_scope, missing
from wharf.server.schemas.filters import page_request
from wharf.store.models import PageRequest as WorkspacePage

METADATA_PREFIX, METADATA_SUFFIX = "metadata[", "]"
MAX_KEY_LENGTH = 255
_RESPONSES: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    503: {**ERRORS[404], "description": "The Resource Manager cannot be reached"},
}
_Key = Annotated[str | None, Query(min_length=1, max_length=MAX_KEY_LENGTH)]


class RenewBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    lease_seconds: int = Field(gt=0, le=MAX_DURATION_SECONDS)
    """The lease then ends this many seconds from now (the RM's clock)."""
    runtime_state: ResourceRequestRuntimeState | None = None
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_LENGTH)
    """Passed on to the RM: a retried call with the same key is applied once."""


class ReleaseBody(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    idempotency_key: str | None = Field(default=None, min_length=1, max_length=MAX_KEY_LENGTH)


def _link(ctx: Ctx) -> ServerRequests:
    link = ctx.state.resource_requests  # authenticates before anything reaches the RM
    if link is None:
        raise IllegalOperationError(NO_RESOURCE_MANAGER)
    return link


def _response(value: BaseModel) -> Response:
    # by alias, as the RM answers (a demand's ``class``), so RM clients parse it unchanged
    return Response(value.model_dump_json(by_alias=True), media_type="application/json")


def _metadata(request: Request) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name.startswith(METADATA_PREFIX) and name.endswith(METADATA_SUFFIX):
            key = name[len(METADATA_PREFIX) : -len(METADATA_SUFFIX)]
            if key in found:
                raise InputError(f"Metadata filter '{key}' is given more than once.")
            found[key] = value
    return found


IDS_FILTER = "Only these requests (repeat the parameter; a waiting engine asks for its own)."


def _narrowed(ctx: Ctx, project_id: UUID | None) -> dict[str, str] | None:
    """The metadata every listed request must have for this caller; None: nothing visible.

    Lists are narrowed in the RM's own query by the ``project_id`` (and, for run tokens,
    ``pipeline_run_id``) metadata the server writes on every request, so other projects'
    requests never leave the RM.
    """
    run = ctx.principal.run
    if run is not None:
        ctx.access.list_scope(project_id)  # another project is missing, as elsewhere
        return {"project_id": str(run.project_id), "pipeline_run_id": str(run.run_id)}
    scope = list_scope(ctx, project_id, None)
    if scope.empty:
        return None
    return {} if scope.project_id is None else {"project_id": str(scope.project_id)}


def _visible(
    ctx: Ctx, link: ServerRequests, request_id: UUID, *, write: bool, action: str
) -> ResourceRequestInfo | None:
    """Allow ``action`` on the request or raise (404 / 403); the request if it had to be read
    to find out where it belongs (the project and run of its subject chain).

    Admins see and change every request, including ones that belong to no project; members and
    viewers see (and have explained) the requests of their projects, members also renew
    them (release and cancel: :func:`_releaser`); a run token reaches the requests of its own
    run only (the launcher waits for its allocation through these routes). A request of
    another project, or of none, is missing (404), like an unknown id.
    """
    if ctx.principal.acts_as_admin:
        return None
    not_visible = missing("resource request", request_id)
    info = None
    scope = link.scope(request_id)
    if scope is None:
        try:
            info = link.requests.get(request_id)
        except EntityNotFoundError:  # worded exactly as for an invisible one
            raise not_visible() from None
        scope = link.remember(info)
    if scope.project_id is None:
        raise not_visible()
    ctx.access.check(
        scope.project_id, write=write, action=action, missing=not_visible, run_id=scope.run_id
    )
    return info


def _releaser(ctx: Ctx, link: ServerRequests, request_id: UUID, verb: str) -> str | None:
    """Allow releasing or cancelling (``verb``) the request or raise (404 / 403): only its
    holder, a project admin or an admin may (:mod:`wharf.server.request_holders`); who does,
    as its reason will say."""
    info = _visible(ctx, link, request_id, write=True, action=f"{verb} resource requests")
    return releaser(ctx, link, request_id, info, verb=verb)


def build_router() -> APIRouter:
    router = APIRouter(
        prefix=f"{API_PREFIX}/resource_requests",
        tags=["resource requests"],
        responses=_RESPONSES,
    )

    @router.get("", response_model=Page[ResourceRequestInfo])
    def list_requests(
        request: Request,
        ctx: CtxDep,
        page: Annotated[WorkspacePage, Depends(page_request)],
        project_id: Annotated[UUID | None, Query()] = None,
        status: Annotated[list[ResourceRequestStatus] | None, Query()] = None,
        subject_id: _Key = None,
        subject_type: Annotated[SubjectType | None, Query()] = None,
        pool: _Key = None,
        requester: _Key = None,
        ids: Annotated[list[UUID] | None, Query(alias="id", description=IDS_FILTER)] = None,
    ) -> Response:
        """Requests newest first (``sort=asc``: oldest); ``metadata[KEY]=VALUE`` filters too.
        Members of several projects pass ``project_id``."""
        limit = ctx.state.settings.max_filter_values
        if ids is not None and len(ids) > limit:
            raise InputError(f"At most {limit} request ids per list (got {len(ids)}).")
        link = _link(ctx)
        metadata = _metadata(request)
        narrowed = _narrowed(ctx, project_id)
        if narrowed is None or any(metadata.get(k, v) != v for k, v in narrowed.items()):
            nothing = Page[ResourceRequestInfo](items=[], index=page.index, size=page.size, total=0)
            return _response(nothing)
        query = load(
            RequestFilter,
            {
                "status": tuple(status) if status else None,
                "subject_id": subject_id,
                "subject_type": subject_type,
                "pool": pool,
                "requester": requester,
                "ids": tuple(ids) if ids else None,
                "metadata": {**metadata, **narrowed},
            },
        )
        paging = PageRequest(index=page.index, size=page.size, sort=page.sort)
        return _response(link.requests.list(query, paging))

    @router.get("/{request_id}", response_model=ResourceRequestInfo)
    def get_request(request_id: UUID, ctx: CtxDep) -> Response:
        link = _link(ctx)
        info = _visible(ctx, link, request_id, write=False, action="read resource requests")
        return _response(info or link.requests.get(request_id))

    @router.post("/{request_id}/renew", response_model=ResourceRequestInfo)
    def renew_request(request_id: UUID, body: RenewBody, ctx: CtxDep) -> Response:
        """Extend the lease to ``lease_seconds`` from now and record the runtime state."""
        link = _link(ctx)
        _visible(ctx, link, request_id, write=True, action="renew resource requests")
        renewed = link.requests.renew(
            request_id,
            body.lease_seconds,
            body.runtime_state,
            idempotency_key=body.idempotency_key,
        )
        return _response(renewed)

    @router.post("/{request_id}/release", response_model=ResourceRequestInfo)
    def release_request(
        request_id: UUID, ctx: CtxDep, body: Annotated[ReleaseBody | None, Body()] = None
    ) -> Response:
        """Give the allocation back (a pending request is cancelled)."""
        link = _link(ctx)
        by = _releaser(ctx, link, request_id, "release")
        key = body.idempotency_key if body is not None else None
        return _response(link.requests.release(request_id, idempotency_key=key, by=by))

    @router.post("/{request_id}/cancel", response_model=ResourceRequestInfo)
    def cancel_request(
        request_id: UUID, ctx: CtxDep, body: Annotated[ReleaseBody | None, Body()] = None
    ) -> Response:
        """Withdraw a pending request (a finished one comes back unchanged)."""
        link = _link(ctx)
        by = _releaser(ctx, link, request_id, "cancel")
        key = body.idempotency_key if body is not None else None
        return _response(link.requests.cancel(request_id, idempotency_key=key, by=by))

    @router.get("/{request_id}/explain", response_model=ExplanationInfo)
    def explain_request(request_id: UUID, ctx: CtxDep) -> Response:
        """Why the request is where it is: queue positions, what blocks it."""
        link = _link(ctx)
        _visible(ctx, link, request_id, write=False, action="read resource requests")
        return _response(link.requests.explain(request_id))

    return router
