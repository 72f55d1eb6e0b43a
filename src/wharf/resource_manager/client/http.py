"""``HttpResourceManager``: the client interface over the Resource Manager's HTTP API (team and
production modes), one small client per resource over one :class:`~.http_transport.Transport`.

Invariants: callers see exactly the wire models and Wharf errors the in-process client gives;
each mutating call sends one idempotency key for all its attempts, except renew, release and
cancel (idempotent by nature), which send one only when the caller gives it, and ``renew_many``,
which never sends one; pools and policies are addressed by id or name (URL-quoted). Importing
it needs ``httpx`` (the ``server`` extra), which the engine must not require: the engine knows
only :class:`~wharf.resource_manager.contract.ResourceManagerClient`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import StoreError, WharfError
from wharf.resource_manager.client.http_transport import RetryPolicy, Transport
from wharf.resource_manager.contract.http_errors import error_from_response
from wharf.resource_manager.contract.models import (
    MAX_RENEWALS,
    DescriptorUpdate,
    ExplanationInfo,
    LoginRequest,
    Page,
    PageRequest,
    PolicyCreate,
    PolicyUpdate,
    PoolAllocation,
    PoolCreate,
    PoolUpdate,
    QueueEntry,
    RenewalItem,
    RenewalOutcome,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestInfo,
    ResourceRequestRenew,
    ResourceRequestRenewals,
    ResourceRequestRenewMany,
)
from wharf.resource_manager.contract.protocol import ResourceManagerClient
from wharf.resource_manager.domain import Policy, Pool, ResourceDescriptor, load

T = TypeVar("T")
_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _parse(kind: type[T] | Any, body: bytes | None) -> T:
    """The answer's JSON as ``kind`` (parsed and validated in one pass)."""
    adapter = _ADAPTERS.get(kind)
    if adapter is None:
        adapter = _ADAPTERS[kind] = TypeAdapter(kind)
    try:
        result: T = adapter.validate_json(body or b"null")
    except ValidationError as exc:
        raise StoreError(f"Unexpected answer from the Resource Manager: {exc}") from None
    return result


def _ref(value: str | UUID) -> str:
    return quote(str(value), safe="")


def _body(model: BaseModel, *, partial: bool = False) -> bytes:
    return model.model_dump_json(by_alias=True, exclude_unset=partial).encode()


def _ended_by(by: str | None, manual: bool) -> bytes | None:
    """The body of a release or cancellation naming who ends it (none: its holder)."""
    from wharf.resource_manager.contract.models import ResourceRequestEnd

    if by is None and not manual:
        return None
    return _body(ResourceRequestEnd(by=by, manual=manual), partial=True)


_RENEWALS: dict[tuple[int, ResourceRequestRuntimeState | None], bytes] = {}
_RENEWALS_KEPT = 64


def _renew_body(lease_seconds: int, state: ResourceRequestRuntimeState | None) -> bytes:
    """A renewal's body, validated and serialised once per distinct (lease, state): a
    heartbeat repeats the same few values, and validating them is a sizeable share of its
    CPU."""
    cacheable = type(lease_seconds) is int and (
        state is None or type(state) is ResourceRequestRuntimeState
    )
    key = (lease_seconds, state)
    body = _RENEWALS.get(key) if cacheable else None
    if body is None:
        renewal = {"lease_seconds": lease_seconds, "runtime_state": state}
        body = _body(load(ResourceRequestRenew, renewal))
        if cacheable:
            if len(_RENEWALS) >= _RENEWALS_KEPT:
                _RENEWALS.clear()
            _RENEWALS[key] = body
    return body


def _renewed(result: RenewalOutcome) -> ResourceRequestInfo | WharfError:
    """One item of a bulk renewal: its request, or the error a single renewal would raise."""
    if result.request is not None:
        return result.request
    detail = result.detail or f"HTTP {result.status}"
    return error_from_response(result.status, {"detail": detail, "error": result.error}, detail)


class _Descriptors:
    def __init__(self, transport: Transport) -> None:
        self._call = transport.call

    def get(self, name: str) -> ResourceDescriptor:
        return _parse(ResourceDescriptor, self._call("GET", f"/v1/descriptors/{_ref(name)}"))

    def create(
        self, descriptor: ResourceDescriptor, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor:
        body = self._call(
            "POST", "/v1/descriptors", content=_body(descriptor), idempotency_key=idempotency_key
        )
        return _parse(ResourceDescriptor, body)

    def update(
        self, name: str, update: DescriptorUpdate, *, idempotency_key: str | None = None
    ) -> ResourceDescriptor:
        path = f"/v1/descriptors/{_ref(name)}"
        body = _body(update, partial=True)
        return _parse(
            ResourceDescriptor,
            self._call("PATCH", path, content=body, idempotency_key=idempotency_key),
        )

    def delete(self, name: str, *, idempotency_key: str | None = None) -> None:
        self._call("DELETE", f"/v1/descriptors/{_ref(name)}", idempotency_key=idempotency_key)

    def list(self) -> list[ResourceDescriptor]:
        return _parse(list[ResourceDescriptor], self._call("GET", "/v1/descriptors"))


class _Pools:
    def __init__(self, transport: Transport) -> None:
        self._call = transport.call

    def get(self, pool: str | UUID) -> Pool:
        return _parse(Pool, self._call("GET", f"/v1/pools/{_ref(pool)}"))

    def create(self, spec: PoolCreate, *, idempotency_key: str | None = None) -> Pool:
        body = self._call("POST", "/v1/pools", content=_body(spec), idempotency_key=idempotency_key)
        return _parse(Pool, body)

    def update(
        self, pool: str | UUID, update: PoolUpdate, *, idempotency_key: str | None = None
    ) -> Pool:
        body = _body(update, partial=True)
        path = f"/v1/pools/{_ref(pool)}"
        return _parse(
            Pool, self._call("PATCH", path, content=body, idempotency_key=idempotency_key)
        )

    def delete(self, pool: str | UUID, *, idempotency_key: str | None = None) -> None:
        self._call("DELETE", f"/v1/pools/{_ref(pool)}", idempotency_key=idempotency_key)

    def queue(self, pool: str | UUID) -> list[QueueEntry]:
        return _parse(list[QueueEntry], self._call("GET", f"/v1/pools/{_ref(pool)}/queue"))

    def allocations(self, pool: str | UUID) -> list[PoolAllocation]:
        path = f"/v1/pools/{_ref(pool)}/allocations"
        return _parse(list[PoolAllocation], self._call("GET", path))

    def list(self) -> list[Pool]:
        return _parse(list[Pool], self._call("GET", "/v1/pools"))


class _Policies:
    def __init__(self, transport: Transport) -> None:
        self._call = transport.call

    def get(self, policy: str | UUID) -> Policy:
        return _parse(Policy, self._call("GET", f"/v1/policies/{_ref(policy)}"))

    def create(self, spec: PolicyCreate, *, idempotency_key: str | None = None) -> Policy:
        body = self._call(
            "POST", "/v1/policies", content=_body(spec), idempotency_key=idempotency_key
        )
        return _parse(Policy, body)

    def update(
        self, policy: str | UUID, update: PolicyUpdate, *, idempotency_key: str | None = None
    ) -> Policy:
        body = _body(update, partial=True)
        path = f"/v1/policies/{_ref(policy)}"
        answer = self._call("PATCH", path, content=body, idempotency_key=idempotency_key)
        return _parse(Policy, answer)

    def delete(self, policy: str | UUID, *, idempotency_key: str | None = None) -> None:
        self._call("DELETE", f"/v1/policies/{_ref(policy)}", idempotency_key=idempotency_key)

    def list(self, pool: str | UUID | None = None) -> list[Policy]:
        params = None if pool is None else {"pool": str(pool)}
        return _parse(list[Policy], self._call("GET", "/v1/policies", params=params))


class _Requests:
    PATH = "/v1/resource-requests"

    def __init__(self, transport: Transport) -> None:
        self._call = transport.call

    def _post(
        self, request_id: UUID, action: str, key: str | None, content: bytes | None = None
    ) -> ResourceRequestInfo:
        """Renew, release or cancel: idempotent by nature (see :mod:`.http_transport`)."""
        path = f"{self.PATH}/{request_id}/{action}"
        answer = self._call("POST", path, content=content, idempotency_key=key, natural=True)
        return _parse(ResourceRequestInfo, answer)

    def create(
        self, spec: ResourceRequestCreate, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        body = self._call("POST", self.PATH, content=_body(spec), idempotency_key=idempotency_key)
        return _parse(ResourceRequestInfo, body)

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return _parse(ResourceRequestInfo, self._call("GET", f"{self.PATH}/{request_id}"))

    def renew(
        self,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        body = _renew_body(lease_seconds, runtime_state)
        return self._post(request_id, "renew", idempotency_key, body)

    def renew_many(self, renewals: Sequence[RenewalItem]) -> list[ResourceRequestInfo | WharfError]:
        """One ``POST /renew`` per :data:`MAX_RENEWALS` items (idempotent by nature: no key)."""
        answers: list[ResourceRequestInfo | WharfError] = []
        for start in range(0, len(renewals), MAX_RENEWALS):
            chunk = tuple(renewals[start : start + MAX_RENEWALS])
            body = _body(ResourceRequestRenewMany(renewals=chunk))
            answer = self._call("POST", f"{self.PATH}/renew", content=body, natural=True)
            parsed: ResourceRequestRenewals = _parse(ResourceRequestRenewals, answer)
            results = parsed.results
            if [result.id for result in results] != [item.id for item in chunk]:
                raise StoreError("Unexpected answer from the Resource Manager: renewals mismatch.")
            answers += [_renewed(result) for result in results]
        return answers

    def release(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        return self._post(request_id, "release", idempotency_key, _ended_by(by, manual))

    def cancel(
        self,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        return self._post(request_id, "cancel", idempotency_key, _ended_by(by, manual))

    def explain(self, request_id: UUID) -> ExplanationInfo:
        return _parse(ExplanationInfo, self._call("GET", f"{self.PATH}/{request_id}/explain"))

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        return _parse(
            Page[ResourceRequestInfo],
            self._call("GET", self.PATH, params=list_params(query, page)),
        )


def list_params(
    query: RequestFilter | None, page: PageRequest | None
) -> dict[str, str | int | list[str]]:
    """Query parameters of a request list: repeated ``status`` and ``id``,
    ``metadata[key]=value``."""
    query = query or RequestFilter()
    page = page or PageRequest()
    params: dict[str, str | int | list[str]] = {
        "page": page.index,
        "size": page.size,
        "sort": page.sort,
    }
    params.update(query.query_params())
    return params


class HttpResourceManager:
    """A :class:`ResourceManagerClient` over HTTP, acting as the principal of its credential.

    ``url``: the RM's base URL. Give ``api_key``, or ``username`` and ``password`` (InputError
    otherwise). ``timeout``: seconds per attempt; ``retry``: see :class:`RetryPolicy`;
    ``http``: an ``httpx.Client`` to use instead of a new one (its ``base_url`` must be
    ``url``), which :meth:`close` then closes too; ``sleep`` (backoff) and ``clock`` (token
    refresh, monotonic seconds) default to the real ones.
    """

    def __init__(
        self,
        url: str,
        *,
        api_key: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        login = load(LoginRequest, {"api_key": api_key, "username": username, "password": password})
        extra: dict[str, Any] = {}
        if sleep is not None:
            extra["sleep"] = sleep
        if clock is not None:
            extra["clock"] = clock
        self._transport = Transport(url, login, timeout=timeout, retry=retry, http=http, **extra)
        self._descriptors = _Descriptors(self._transport)
        self._pools = _Pools(self._transport)
        self._policies = _Policies(self._transport)
        self._requests = _Requests(self._transport)

    @property
    def url(self) -> str:
        return self._transport.url

    @property
    def descriptors(self) -> _Descriptors:
        return self._descriptors

    @property
    def pools(self) -> _Pools:
        return self._pools

    @property
    def policies(self) -> _Policies:
        return self._policies

    @property
    def requests(self) -> _Requests:
        return self._requests

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> HttpResourceManager:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _conforms(client: HttpResourceManager) -> ResourceManagerClient:
    return client  # mypy proves that HttpResourceManager implements the protocol
