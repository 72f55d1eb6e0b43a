"""The request part of the service API: create, get, list, renew, release, cancel, explain.

Create, release, cancel and explain are batched operations (:mod:`.request_ops`) that run in
scheduling transactions with a cycle, so ``create`` returns the request already allocated when
it fits. Renewal is the hot path of every heartbeat: on PostgreSQL and MySQL it does *not* take
the scheduling lock, it is one compare-and-set UPDATE on the request's lease (see
:func:`request_store.renew`), so renewals run in parallel with cycles. On SQLite every write
transaction holds the database's single write lock anyway, and writers waiting for it sleep in
SQLite's busy handler; there renewals join this process's batches instead, so a process never
competes with itself for the lock.

Invariants:
- durations come from the client, instants from the server's clock;
- a renewal never revives a lapsed lease: it runs a cycle instead, which expires the request,
  and returns the request in its final state; renewing a terminal request returns it unchanged;
- a renewal of a still-pending request runs a cycle when this process has not run one for
  ``ServiceOptions.lazy_sweep_interval``, so waiters progress without any timer.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter
from sqlalchemy import Connection

from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.client.models import (
    ExplanationInfo,
    Page,
    PageRequest,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestInfo,
    ResourceRequestRenew,
)
from wharf.resource_manager.domain import Demand, load
from wharf.resource_manager.service import idempotency, queries, request_store
from wharf.resource_manager.service.batch import BatchRunner
from wharf.resource_manager.service.convert import request_info
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.principal import Principal, require_owner
from wharf.resource_manager.service.request_ops import (
    CancelRequest,
    CreateRequest,
    ExplainRequest,
    ReleaseRequest,
    RenewRequest,
    Sweep,
)
from wharf.store.sql.engine import Database

_INFO = TypeAdapter(ResourceRequestInfo)
_LAPSED = object()


def _demands(spec: ResourceRequestCreate) -> tuple[Demand, ...]:
    return tuple(
        load(Demand, demand.model_dump(exclude_none=True, by_alias=True)) for demand in spec.demands
    )


class RequestService:
    def __init__(self, db: Database, runner: BatchRunner, options: ServiceOptions) -> None:
        self._db = db
        self._runner = runner
        self._options = options

    def create(
        self,
        principal: Principal,
        spec: ResourceRequestCreate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """Create a pending request and run a cycle; it comes back allocated if it fit."""
        model = load(ResourceRequestCreate, spec)
        key = None
        if idempotency_key is not None:
            payload = model.model_dump(mode="json", by_alias=True)
            key = IdempotencyKey.of(principal.name, CreateRequest.name, idempotency_key, payload)
        result: ResourceRequestInfo = self._runner.submit(
            CreateRequest(principal, model, _demands(model), key)
        )
        return result

    def get(self, request_id: UUID) -> ResourceRequestInfo:
        return self._db.read(lambda conn: queries.get_request(conn, request_id))

    def renew(
        self,
        principal: Principal,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """Set the lease to ``now + lease_seconds`` and record the runtime state."""
        body = load(
            ResourceRequestRenew, {"lease_seconds": lease_seconds, "runtime_state": runtime_state}
        )
        payload = {"id": str(request_id), **body.model_dump(mode="json")}
        key = IdempotencyKey.of(principal.name, "requests.renew", idempotency_key, payload)
        if self._db.is_sqlite:
            operation = RenewRequest(principal, request_id, body, self._sweep_due(), key)
            renewed: ResourceRequestInfo = self._runner.submit(operation)
            return renewed
        outcome = self._db.write(lambda conn: self._renew(conn, principal, request_id, body, key))
        if outcome is _LAPSED:
            self._runner.submit(Sweep())
            return self.get(request_id)
        assert isinstance(outcome, ResourceRequestInfo)
        if outcome.status is ResourceRequestStatus.PENDING and self._sweep_due():
            self._runner.submit(Sweep())
            return self.get(request_id)
        return outcome

    def _renew(
        self,
        conn: Connection,
        principal: Principal,
        request_id: UUID,
        body: ResourceRequestRenew,
        key: IdempotencyKey | None,
    ) -> object:
        if key is not None:
            found, response = idempotency.lookup(conn, key)
            if found:
                return _INFO.validate_python(response)
        now = self._db.now()
        renewed = request_store.renew(
            conn,
            request_id,
            now=now,
            lease=now + timedelta(seconds=body.lease_seconds),
            runtime_state=body.runtime_state,
            requester=None if principal.admin else principal.name,
        )
        if not renewed:
            owner = request_store.owner(conn, request_id)
            if owner is None:
                raise EntityNotFoundError(f"Resource request {request_id} not found.")
            require_owner(principal, owner[0], request_id)
            if owner[1] in request_store.LIVE:
                return _LAPSED  # lapsed, not yet expired: the cycle expires it
        info = request_info(request_store.load(conn, [request_id])[request_id])
        if key is not None:
            response = _INFO.dump_python(info, mode="json", by_alias=True)
            idempotency.store(conn, [(key, response)], now)
        return info

    def _sweep_due(self) -> bool:
        last = self._runner.last_cycle
        return last is None or self._db.now() - last >= self._options.lazy_sweep_interval

    def release(
        self, principal: Principal, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        """The holder is done: allocated -> released, preempting -> preempted, pending ->
        cancelled; a terminal request is returned unchanged."""
        key = IdempotencyKey.of(
            principal.name, ReleaseRequest.name, idempotency_key, {"id": str(request_id)}
        )
        result: ResourceRequestInfo = self._runner.submit(
            ReleaseRequest(principal, request_id, key)
        )
        return result

    def cancel(
        self, principal: Principal, request_id: UUID, *, idempotency_key: str | None = None
    ) -> ResourceRequestInfo:
        """Withdraw a pending request (IllegalOperationError if it holds capacity)."""
        key = IdempotencyKey.of(
            principal.name, CancelRequest.name, idempotency_key, {"id": str(request_id)}
        )
        result: ResourceRequestInfo = self._runner.submit(CancelRequest(principal, request_id, key))
        return result

    def explain(self, request_id: UUID) -> ExplanationInfo:
        """Why the request is where it is, after a cycle brought the state up to date."""
        result: ExplanationInfo = self._runner.submit(ExplainRequest(request_id))
        return result

    def list(
        self, query: RequestFilter | None = None, page: PageRequest | None = None
    ) -> Page[ResourceRequestInfo]:
        query = query or RequestFilter()
        page = page or PageRequest()
        return self._db.read(lambda conn: queries.list_requests(conn, query, page))
