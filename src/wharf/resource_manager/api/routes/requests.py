"""Resource request routes (``/v1/resource-requests``): create, list, get, renew (one or many),
release, cancel and explain; lean routes (:mod:`..lean`) that await the service's ``*_async``
combiner for the writes and run the reads in the thread pool.

Invariants: any valid token may call them, but a request is seen only by the principal that
created it and administrators (404 for anyone else) and only they may renew, release or cancel
it (403); a lease is at most ``ApiSettings.max_lease_seconds`` (400); every single-request POST
honours ``X-Idempotency-Key`` (a retried create returns the first request, never a second).
"""

from __future__ import annotations

from uuid import UUID

from starlette.requests import Request
from starlette.responses import Response

from wharf.core.errors import InputError, WharfError
from wharf.resource_manager.api.deps import json_response
from wharf.resource_manager.api.errors import status_for
from wharf.resource_manager.api.lean import Call, LeanRoutes, parse_body, parse_query, path_uuid
from wharf.resource_manager.contract.http_errors import wire_name
from wharf.resource_manager.contract.models import (
    ExplanationInfo,
    Page,
    PageRequest,
    RenewalOutcome,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestEnd,
    ResourceRequestInfo,
    ResourceRequestRenew,
    ResourceRequestRenewals,
    ResourceRequestRenewMany,
)

PATH = "/v1/resource-requests"
ONE = PATH + "/{request_id}"
FILTERS = ("subject_id", "subject_type", "pool", "requester")
METADATA_PREFIX, METADATA_SUFFIX = "metadata[", "]"

routes = LeanRoutes(tag="resource requests")


@routes.add(
    "POST", PATH, "Create a request", body=ResourceRequestCreate, response=ResourceRequestInfo,
    status=201,
)  # fmt: skip
async def create_request(request: Request) -> Response:
    call = Call.of(request)
    spec = parse_body(ResourceRequestCreate, await request.body())
    call.check_lease(spec.lease_seconds)
    info = await call.service.requests.create_async(call.caller, spec, idempotency_key=call.key)
    return json_response(info, 201)


@routes.add(
    "GET", PATH, "List requests", response=Page[ResourceRequestInfo],
    query=("status", "id", *FILTERS, "metadata[key]", "page", "size", "sort"),
)  # fmt: skip
async def list_requests(request: Request) -> Response:
    call = Call.of(request)
    params = request.query_params
    filters: dict[str, object] = {name: params.get(name) for name in FILTERS}
    filters["status"] = tuple(params.getlist("status")) or None
    filters["ids"] = tuple(params.getlist("id")) or None
    filters["metadata"] = _metadata(request)
    paging = {"index": params.get("page", 1), "size": params.get("size", 50)}
    paging["sort"] = params.get("sort", "desc")
    query = parse_query(RequestFilter, filters)
    page = parse_query(PageRequest, paging)
    listed = await call.run(call.service.requests.list, query, page, viewer=call.caller)
    return json_response(listed)


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


@routes.add(
    "POST", PATH + "/renew", "Renew many leases (one outcome per item)",
    body=ResourceRequestRenewMany, response=ResourceRequestRenewals,
)  # fmt: skip
async def renew_requests(request: Request) -> Response:
    """Renew many leases (the workspace server's coalesced heartbeat), one outcome per item.

    Each item is renewed as a single renewal would be, in the service's shared renewal
    transactions, and answered alone: the request, or ``{status, error, detail}`` with what a
    single renewal would have got (404, 403, 400 for too long a lease ...), so one bad id never
    fails the others. Only a malformed body, an oversized batch (422) or a bad token (401) fail
    the whole call. ``X-Idempotency-Key`` is refused (400): renewing is idempotent by nature.
    """
    call = Call.of(request)
    if call.key is not None:
        raise InputError(
            "A bulk renewal takes no X-Idempotency-Key: renewing is idempotent by nature (a "
            "retry moves each lease to now + lease_seconds again); renew a single request to "
            "have its answer replayed."
        )
    body = parse_body(ResourceRequestRenewMany, await request.body())
    answers: list[ResourceRequestInfo | WharfError | None] = []
    for item in body.renewals:  # an item asking for too long a lease fails alone
        try:
            call.check_lease(item.lease_seconds)
            answers.append(None)
        except InputError as error:
            answers.append(error)
    valid = [item for item, answer in zip(body.renewals, answers, strict=True) if answer is None]
    renewed = iter(await call.service.requests.renew_many_async(call.caller, valid))
    results = tuple(
        _outcome(item.id, next(renewed) if answer is None else answer)
        for item, answer in zip(body.renewals, answers, strict=True)
    )
    return json_response(ResourceRequestRenewals(results=results))


def _outcome(request_id: UUID, answer: ResourceRequestInfo | WharfError) -> RenewalOutcome:
    if isinstance(answer, WharfError):
        detail = " ".join(str(answer).split())
        return RenewalOutcome(
            id=request_id, status=status_for(answer), error=wire_name(answer), detail=detail
        )
    return RenewalOutcome(id=request_id, request=answer)


@routes.add("GET", ONE, "Get a request", response=ResourceRequestInfo)
async def get_request(request: Request) -> Response:
    call = Call.of(request)
    request_id = path_uuid(request, "request_id")
    return json_response(await call.run(call.service.requests.get, request_id, viewer=call.caller))


@routes.add(
    "POST", ONE + "/renew", "Renew the lease", body=ResourceRequestRenew,
    response=ResourceRequestInfo,
)  # fmt: skip
async def renew_request(request: Request) -> Response:
    call = Call.of(request)
    request_id = path_uuid(request, "request_id")
    body = parse_body(ResourceRequestRenew, await request.body())
    call.check_lease(body.lease_seconds)
    renewed = await call.service.requests.renew_async(
        call.caller, request_id, body.lease_seconds, body.runtime_state, idempotency_key=call.key
    )
    return json_response(renewed)


async def _ended_by(request: Request) -> ResourceRequestEnd:
    """The optional body: who ends the request, for its status reason."""
    body = await request.body()
    return parse_body(ResourceRequestEnd, body) if body.strip() else ResourceRequestEnd()


@routes.add(
    "POST", ONE + "/release", "Release the allocation", body=ResourceRequestEnd,
    response=ResourceRequestInfo,
)  # fmt: skip
async def release_request(request: Request) -> Response:
    call = Call.of(request)
    request_id = path_uuid(request, "request_id")
    end = await _ended_by(request)
    released = await call.service.requests.release_async(
        call.caller, request_id, idempotency_key=call.key, by=end.by, manual=end.manual
    )
    return json_response(released)


@routes.add(
    "POST", ONE + "/cancel", "Cancel a pending request", body=ResourceRequestEnd,
    response=ResourceRequestInfo,
)  # fmt: skip
async def cancel_request(request: Request) -> Response:
    call = Call.of(request)
    request_id = path_uuid(request, "request_id")
    end = await _ended_by(request)
    cancelled = await call.service.requests.cancel_async(
        call.caller, request_id, idempotency_key=call.key, by=end.by, manual=end.manual
    )
    return json_response(cancelled)


@routes.add("GET", ONE + "/explain", "Explain where a request is", response=ExplanationInfo)
async def explain_request(request: Request) -> Response:
    call = Call.of(request)
    request_id = path_uuid(request, "request_id")
    explained = await call.run(call.service.requests.explain, request_id, viewer=call.caller)
    return json_response(explained)
