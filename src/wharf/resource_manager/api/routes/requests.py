"""Resource requests: any valid token; a request belongs to the principal that created it.

Routes:

    POST /v1/resource-requests                      create (201; allocated if it fit at once)
    GET  /v1/resource-requests                      list: status (repeatable), id (repeatable),
                                                    subject_id, subject_type, pool, requester,
                                                    metadata[key]=value, page, size, sort
    GET  /v1/resource-requests/{id}                 get
    POST /v1/resource-requests/renew                bulk renewal: body {renewals: [{id,
                                                    lease_seconds, runtime_state?}, ...]}
                                                    (at most MAX_RENEWALS), 200 with one
                                                    outcome per item, in order
    POST /v1/resource-requests/{id}/renew           body {lease_seconds, runtime_state?}
    POST /v1/resource-requests/{id}/release         give the allocation back
    POST /v1/resource-requests/{id}/cancel          withdraw a pending request
    GET  /v1/resource-requests/{id}/explain         why it is where it is

Create, renew, release and cancel await the service's combiner (``*_async``): no thread is
taken per request; the reads are plain ``def`` routes, run in the thread pool.

The bulk renewal is the workspace server's heartbeat path (it coalesces its steps' renewals):
each item is renewed as a single renewal would be, in the service's shared renewal
transactions, and answered alone — the request, or ``{status, error, detail}`` with the status
and error a single renewal would have got (404 not found, 403 someone else's ...), so one bad
id never fails the others. Only a malformed body, an oversized batch (422) or a bad token
(401) fail the whole call.

Invariants: only the requester or an administrator may renew, release or cancel (403 otherwise,
checked by the service, per item in a bulk renewal); every single-request POST honours
``X-Idempotency-Key`` (a retried create with the same key returns the first request and never
creates a second one); the bulk renewal refuses one (400): renewing is idempotent by nature, a
retry moves each lease to now + ``lease_seconds`` again.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeVar
from uuid import UUID

from fastapi import APIRouter, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from wharf.core.errors import InputError, WharfError
from wharf.resource_manager.api.deps import CallerDep, IdempotencyDep, StateDep, json_response
from wharf.resource_manager.api.errors import status_for
from wharf.resource_manager.contract.http_errors import wire_name
from wharf.resource_manager.contract.models import (
    ExplanationInfo,
    Page,
    PageRequest,
    RenewalOutcome,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestInfo,
    ResourceRequestRenew,
    ResourceRequestRenewals,
    ResourceRequestRenewMany,
)

PATH = "/v1/resource-requests"
ONE = PATH + "/{request_id}"
METADATA_PREFIX, METADATA_SUFFIX = "metadata[", "]"
Text = Annotated[str | None, Query()]
Texts = Annotated[list[str] | None, Query()]
M = TypeVar("M", bound=BaseModel)
METADATA_DOC = {
    "name": "metadata[key]",
    "in": "query",
    "required": False,
    "description": "Requests whose metadata has this key with this value (repeat per key).",
    "schema": {"type": "string"},
}

router = APIRouter(tags=["resource requests"], strict_content_type=False)
"""A body without a ``Content-Type`` is read as JSON too: these routes need a bearer token, so a
browser's cross-site form post cannot call them."""


@router.post(PATH, status_code=201, response_model=ResourceRequestInfo)
async def create_request(
    body: ResourceRequestCreate, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    """Create a request."""
    info = await state.service.requests.create_async(caller, body, idempotency_key=key)
    return json_response(info, 201)


@router.get(
    PATH,
    response_model=Page[ResourceRequestInfo],
    openapi_extra={"parameters": [METADATA_DOC]},
)
def list_requests(
    request: Request,
    state: StateDep,
    _caller: CallerDep,
    status: Texts = None,
    ids: Annotated[list[str] | None, Query(alias="id")] = None,
    subject_id: Text = None,
    subject_type: Text = None,
    pool: Text = None,
    requester: Text = None,
    page: Text = None,
    size: Text = None,
    sort: Text = None,
) -> Response:
    """List requests; ``metadata[key]=value`` filters on metadata (every entry must match)."""
    filters = {
        "status": tuple(status or ()) or None,
        "ids": tuple(ids or ()) or None,
        "subject_id": subject_id,
        "subject_type": subject_type,
        "pool": pool,
        "requester": requester,
        "metadata": _metadata(request),
    }
    paging = {
        "index": 1 if page is None else page,
        "size": 50 if size is None else size,
        "sort": "desc" if sort is None else sort,
    }
    query = _query(RequestFilter, filters)
    return json_response(state.service.requests.list(query, _query(PageRequest, paging)))


def _query(model: type[M], data: dict[str, Any]) -> M:
    """``data`` (from the query string) as ``model``; a 422 naming the query parameter else."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        errors = error.errors(include_url=False)
        raise RequestValidationError([{**e, "loc": ("query", *e["loc"])} for e in errors]) from None


def _metadata(request: Request) -> dict[str, str]:
    """``metadata[key]=value`` query parameters; a key given twice is an input error."""
    found: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name.startswith(METADATA_PREFIX) and name.endswith(METADATA_SUFFIX):
            key = name[len(METADATA_PREFIX) : -len(METADATA_SUFFIX)]
            if key in found:
                raise InputError(f"Metadata filter '{key}' is given more than once.")
            found[key] = value
    return found


@router.post(PATH + "/renew", response_model=ResourceRequestRenewals)
async def renew_requests(
    body: ResourceRequestRenewMany, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    """Renew many leases (one outcome per item)."""
    if key is not None:
        raise InputError(
            "A bulk renewal takes no X-Idempotency-Key: renewing is idempotent by nature (a "
            "retry moves each lease to now + lease_seconds again); renew a single request to "
            "have its answer replayed."
        )
    answers = await state.service.requests.renew_many_async(caller, body.renewals)
    results = tuple(
        _outcome(item.id, answer) for item, answer in zip(body.renewals, answers, strict=True)
    )
    return json_response(ResourceRequestRenewals(results=results))


def _outcome(request_id: UUID, answer: ResourceRequestInfo | WharfError) -> RenewalOutcome:
    if isinstance(answer, WharfError):
        detail = " ".join(str(answer).split())
        return RenewalOutcome(
            id=request_id, status=status_for(answer), error=wire_name(answer), detail=detail
        )
    return RenewalOutcome(id=request_id, request=answer)


@router.get(ONE, response_model=ResourceRequestInfo)
def get_request(request_id: UUID, state: StateDep, _caller: CallerDep) -> Response:
    """Get a request."""
    return json_response(state.service.requests.get(request_id))


@router.post(ONE + "/renew", response_model=ResourceRequestInfo)
async def renew_request(
    request_id: UUID,
    body: ResourceRequestRenew,
    state: StateDep,
    caller: CallerDep,
    key: IdempotencyDep,
) -> Response:
    """Renew the lease."""
    renewed = await state.service.requests.renew_async(
        caller, request_id, body.lease_seconds, body.runtime_state, idempotency_key=key
    )
    return json_response(renewed)


@router.post(ONE + "/release", response_model=ResourceRequestInfo)
async def release_request(
    request_id: UUID, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    """Release the allocation."""
    released = await state.service.requests.release_async(caller, request_id, idempotency_key=key)
    return json_response(released)


@router.post(ONE + "/cancel", response_model=ResourceRequestInfo)
async def cancel_request(
    request_id: UUID, state: StateDep, caller: CallerDep, key: IdempotencyDep
) -> Response:
    """Cancel a pending request."""
    cancelled = await state.service.requests.cancel_async(caller, request_id, idempotency_key=key)
    return json_response(cancelled)


@router.get(ONE + "/explain", response_model=ExplanationInfo)
def explain_request(request_id: UUID, state: StateDep, _caller: CallerDep) -> Response:
    """Explain where a request is."""
    return json_response(state.service.requests.explain(request_id))
