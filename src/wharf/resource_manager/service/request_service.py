"""The request part of the service API: create, get, list, renew, release, cancel, explain.

Owns :class:`RequestService` (see it for which calls run in scheduling transactions).

Invariants:
- durations come from the client, instants from the server's clock;
- a renewal never revives a lapsed lease: it runs a cycle instead, which expires the request,
  and returns the request in its final state; renewing a terminal request returns it unchanged;
- a renewal of a still-pending request runs a cycle when this process has not run one for
  ``ServiceOptions.lazy_sweep_interval``, so waiters progress without any timer;
- get, list and explain show a ``viewer`` only what :func:`~.principal.may_see` allows (the
  rest as not found); an untrusted principal creates requests for its own account only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any
from uuid import UUID

from wharf.combining import Combiner
from wharf.core.enums import ResourceRequestRuntimeState, ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError, WharfError
from wharf.resource_manager.contract.models import (
    ExplanationInfo,
    Page,
    PageRequest,
    RenewalItem,
    RequestFilter,
    ResourceRequestCreate,
    ResourceRequestInfo,
    ResourceRequestRenew,
)
from wharf.resource_manager.domain import Demand, load
from wharf.resource_manager.service import leader, queries, whatif
from wharf.resource_manager.service.batch import BatchRunner, LeftQueueListener
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.principal import Principal, may_see, own_subjects
from wharf.resource_manager.service.renewals import LAPSED, Renewal, RenewalRunner
from wharf.resource_manager.service.request_ops import (
    CancelRequest,
    CreateRequest,
    ReleaseRequest,
    RenewRequest,
    Sweep,
)
from wharf.sql.engine import Database


def _demands(spec: ResourceRequestCreate) -> tuple[Demand, ...]:
    return tuple(Demand.from_core(demand) for demand in spec.demands)


class RequestService:
    """Requests over the batch runner (scheduling transactions) and the renewal runner.

    Create, release and cancel are batched operations (:mod:`.request_ops`) run in scheduling
    transactions with a cycle, so ``create`` returns the request already allocated when it
    fits. Explain runs the scheduler on the committed state in a read transaction (no write
    lock). A renewal, the hot path of every heartbeat, needs no cycle (it changes no status
    and no allocation): on PostgreSQL and MySQL it takes no scheduling lock but is one
    compare-and-set UPDATE of the lease, concurrent renewals sharing a transaction
    (:mod:`.renewals`); on SQLite, whose single write lock every writer holds anyway, renewals
    join this process's batches (a batch of renewals alone runs no cycle), so a process never
    competes with itself for the lock. The ``*_async`` twins queue the operation and await its
    outcome (:meth:`wharf.combining.Combiner.submit_async`), so a call in flight holds no
    thread. Create uses :func:`~.principal.own_subjects` for an untrusted principal.
    """

    def __init__(self, db: Database, runner: BatchRunner, options: ServiceOptions) -> None:
        self._db = db
        self._runner = runner
        self._options = options
        self._renewals = RenewalRunner(db, options.max_batch, lambda: runner.cache.view)

    def on_left_queue(self, listener: LeftQueueListener) -> None:
        """Call ``listener`` right after each commit of this process that moved requests out
        of the queue (allocated, or ended while pending), with those requests."""
        self._runner.on_left_queue(listener)

    def unannounced_marker(self) -> tuple[int, int | None]:
        """A value that changes whenever requests may have changed without this process's
        listeners hearing of it: the stored state version was written by another writer, or a
        transaction of this process took in other writers' changes. Equal markers: everything
        that moved out of the queue in between was announced (see :meth:`on_left_queue`).

        The stored version is read first and the catch-ups after it, so a commit of another
        writer shows in one or the other; a version this process wrote counts as unchanged
        even while its commit is still being adopted (the cache's version would read such a
        commit as another writer's, and the watch would list every waiter for nothing)."""
        stored = self._db.read(lambda conn: leader.read(conn).state_version)
        runner = self._runner
        return runner.catch_ups, None if runner.produced(stored) else stored

    def create(
        self,
        principal: Principal,
        spec: ResourceRequestCreate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """Create a pending request and run a cycle; it comes back allocated if it fit."""
        result: ResourceRequestInfo = self._runner.submit(
            self._creation(principal, spec, idempotency_key)
        )
        return result

    async def create_async(
        self,
        principal: Principal,
        spec: ResourceRequestCreate | Mapping[str, Any],
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """:meth:`create` for callers on an event loop (no thread is blocked while it waits)."""
        result: ResourceRequestInfo = await self._runner.submit_async(
            self._creation(principal, spec, idempotency_key)
        )
        return result

    def _creation(
        self,
        principal: Principal,
        spec: ResourceRequestCreate | Mapping[str, Any],
        idempotency_key: str | None,
    ) -> CreateRequest:
        model = load(ResourceRequestCreate, spec)
        subjects = own_subjects(principal, model.subjects)
        if subjects is not model.subjects:
            model = model.model_copy(update={"subjects": subjects})
        key = None
        if idempotency_key is not None:
            payload = model.model_dump(mode="json", by_alias=True)
            key = IdempotencyKey.of(principal.name, CreateRequest.name, idempotency_key, payload)
        return CreateRequest.prepare(principal, model, _demands(model), key)

    def get(self, request_id: UUID, *, viewer: Principal | None = None) -> ResourceRequestInfo:
        """The request; to a ``viewer`` that may not see it (:func:`may_see`), not found."""
        info = self._db.read(lambda conn: queries.get_request(conn, request_id))
        if not may_see(viewer, info.requester):
            raise EntityNotFoundError(queries.not_found(request_id))
        return info

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
        combiner, operation = self._renewal(
            principal, request_id, lease_seconds, runtime_state, idempotency_key
        )
        final = self._renewed(combiner.submit(operation))
        return final if final is not None else self._swept(request_id)

    async def renew_async(
        self,
        principal: Principal,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> ResourceRequestInfo:
        """:meth:`renew` for callers on an event loop (no thread is blocked while it waits)."""
        combiner, operation = self._renewal(
            principal, request_id, lease_seconds, runtime_state, idempotency_key
        )
        final = self._renewed(await combiner.submit_async(operation))
        if final is not None:
            return final
        return await asyncio.to_thread(self._swept, request_id)

    def renew_many(
        self, principal: Principal, renewals: Sequence[RenewalItem]
    ) -> list[ResourceRequestInfo | WharfError]:
        """Each renewal as :meth:`renew` does it, answered in order: the request, or the error
        that renewal alone would have raised (one bad id never fails the others). It serves
        the bulk endpoint and the workspace server, which coalesces its steps' heartbeats. A
        blocking caller submits them one after the other (``Combiner`` has no multi-slot
        submit), so they share transactions only with other threads' operations;
        :meth:`renew_many_async` queues them all at once."""
        combiner, due = self._renewal_combiner(), self._sweep_due()
        outcomes: list[object] = []
        for item in renewals:
            try:
                outcomes.append(combiner.submit(self._item_renewal(principal, item, due)))
            except WharfError as error:
                outcomes.append(error)
        return self._swept_many(renewals, self._answers(outcomes))

    async def renew_many_async(
        self, principal: Principal, renewals: Sequence[RenewalItem]
    ) -> list[ResourceRequestInfo | WharfError]:
        """:meth:`renew_many` for callers on an event loop: every item is queued at once, so
        they share the combiner's next transactions and no thread waits for them."""
        combiner, due = self._renewal_combiner(), self._sweep_due()
        outcomes: list[object] = await asyncio.gather(
            *(combiner.submit_async(self._item_renewal(principal, item, due)) for item in renewals),
            return_exceptions=True,
        )
        for outcome in outcomes:  # only an item's own refusal is its answer
            if isinstance(outcome, BaseException) and not isinstance(outcome, WharfError):
                raise outcome
        answers = self._answers(outcomes)
        if any(answer is None for answer in answers):  # a cycle must run: it blocks
            return await asyncio.to_thread(self._swept_many, renewals, answers)
        return [answer for answer in answers if answer is not None]

    def _renewal_combiner(self) -> Combiner[Any]:
        return self._runner if self._db.is_sqlite else self._renewals

    def _item_renewal(self, principal: Principal, item: RenewalItem, sweep_due: bool) -> Any:
        """The operation renewing ``item``: it was validated as a :class:`RenewalItem`, whose
        fields are :class:`ResourceRequestRenew`'s, so it is not validated again (validation
        is a sizeable share of a bulk renewal's CPU)."""
        body = ResourceRequestRenew.model_construct(
            lease_seconds=item.lease_seconds, runtime_state=item.runtime_state
        )
        return self._renewal_operation(principal, item.id, body, None, sweep_due)

    def _answers(self, outcomes: Sequence[object]) -> list[ResourceRequestInfo | WharfError | None]:
        """Each item's answer, or None where :meth:`_renewed` asks for a cycle first."""
        return [o if isinstance(o, WharfError) else self._renewed(o) for o in outcomes]

    def _swept_many(
        self,
        renewals: Sequence[RenewalItem],
        answers: Sequence[ResourceRequestInfo | WharfError | None],
    ) -> list[ResourceRequestInfo | WharfError]:
        """``answers`` where one cycle, run for all the None ones (a lapsed lease, or a pending
        request and no recent cycle), answers those as it left them."""
        if all(answer is not None for answer in answers):
            return [answer for answer in answers if answer is not None]
        self._runner.submit(Sweep())
        final: list[ResourceRequestInfo | WharfError] = []
        for item, answer in zip(renewals, answers, strict=True):
            if answer is not None:
                final.append(answer)
                continue
            try:
                final.append(self.get(item.id))
            except WharfError as error:
                final.append(error)
        return final

    def _renewal(
        self,
        principal: Principal,
        request_id: UUID,
        lease_seconds: int,
        runtime_state: ResourceRequestRuntimeState | None,
        idempotency_key: str | None,
    ) -> tuple[Combiner[Any], Any]:
        """Which combiner runs the renewal, and the operation to submit to it."""
        body = load(
            ResourceRequestRenew, {"lease_seconds": lease_seconds, "runtime_state": runtime_state}
        )
        key = None
        if idempotency_key is not None:
            payload = {"id": str(request_id), **body.model_dump(mode="json")}
            key = IdempotencyKey.of(principal.name, "requests.renew", idempotency_key, payload)
        operation = self._renewal_operation(principal, request_id, body, key, self._sweep_due())
        return self._renewal_combiner(), operation

    def _renewal_operation(
        self,
        principal: Principal,
        request_id: UUID,
        body: ResourceRequestRenew,
        key: IdempotencyKey | None,
        sweep_due: bool,
    ) -> Any:
        """The operation :meth:`_renewal_combiner` runs: on SQLite a renewal joins the
        scheduling batches (one writer), elsewhere the renewal combiner's own transactions."""
        if self._db.is_sqlite:
            return RenewRequest(principal, request_id, body, sweep_due, key)
        return Renewal(principal, request_id, body.lease_seconds, body.runtime_state, key)

    def _renewed(self, outcome: object) -> ResourceRequestInfo | None:
        """The renewal's answer, or None when a cycle must run first (:meth:`_swept`): the lease
        had lapsed, or the request is still pending and no cycle ran for a while."""
        if outcome is LAPSED:
            return None
        assert isinstance(outcome, ResourceRequestInfo)
        # SQLite ran the lazy cycle in the renewal's own batch already.
        pending = outcome.status is ResourceRequestStatus.PENDING
        if pending and not self._db.is_sqlite and self._sweep_due():
            return None
        return outcome

    def _swept(self, request_id: UUID) -> ResourceRequestInfo:
        self._runner.submit(Sweep())
        return self.get(request_id)

    def _sweep_due(self) -> bool:
        last = self._runner.last_cycle
        return last is None or self._db.now() - last >= self._options.lazy_sweep_interval

    def release(
        self,
        principal: Principal,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """The holder is done: allocated -> released, preempting -> preempted, pending ->
        cancelled; a terminal request is returned unchanged. ``by``: who, when not its holder
        (for its status reason; an administrator releasing another's is named anyway);
        ``manual``: an operator's command, whose caller is named even on its own request."""
        result: ResourceRequestInfo = self._runner.submit(
            self._release(principal, request_id, idempotency_key, by, manual)
        )
        return result

    async def release_async(
        self,
        principal: Principal,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """:meth:`release` for callers on an event loop."""
        result: ResourceRequestInfo = await self._runner.submit_async(
            self._release(principal, request_id, idempotency_key, by, manual)
        )
        return result

    def _release(
        self,
        principal: Principal,
        request_id: UUID,
        idempotency_key: str | None,
        by: str | None,
        manual: bool,
    ) -> ReleaseRequest:
        key = IdempotencyKey.of(
            principal.name, ReleaseRequest.name, idempotency_key, {"id": str(request_id)}
        )
        return ReleaseRequest(principal, request_id, key, by, manual)

    def cancel(
        self,
        principal: Principal,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """Withdraw a pending request (IllegalOperationError if it holds capacity)."""
        result: ResourceRequestInfo = self._runner.submit(
            self._cancellation(principal, request_id, idempotency_key, by, manual)
        )
        return result

    async def cancel_async(
        self,
        principal: Principal,
        request_id: UUID,
        *,
        idempotency_key: str | None = None,
        by: str | None = None,
        manual: bool = False,
    ) -> ResourceRequestInfo:
        """:meth:`cancel` for callers on an event loop."""
        result: ResourceRequestInfo = await self._runner.submit_async(
            self._cancellation(principal, request_id, idempotency_key, by, manual)
        )
        return result

    def _cancellation(
        self,
        principal: Principal,
        request_id: UUID,
        idempotency_key: str | None,
        by: str | None,
        manual: bool,
    ) -> CancelRequest:
        key = IdempotencyKey.of(
            principal.name, CancelRequest.name, idempotency_key, {"id": str(request_id)}
        )
        return CancelRequest(principal, request_id, key, by, manual)

    def explain(self, request_id: UUID, *, viewer: Principal | None = None) -> ExplanationInfo:
        """Why the request is where it is: what the next cycle would do with it (read-only);
        to a ``viewer`` that may not see the request, not found."""
        if viewer is not None and not viewer.admin:
            self.get(request_id, viewer=viewer)
        now, view, budget = (
            self._db.now(),
            self._runner.cache.view,
            self._options.route_search_budget,
        )
        return self._db.read(
            lambda conn: whatif.explain_request(conn, view, request_id, now, budget)
        )

    def list(
        self,
        query: RequestFilter | None = None,
        page: PageRequest | None = None,
        *,
        viewer: Principal | None = None,
    ) -> Page[ResourceRequestInfo]:
        """The requests ``query`` matches, a ``viewer`` that is no admin sees only its own."""
        query = query or RequestFilter()
        page = page or PageRequest()
        if viewer is not None and not viewer.admin:
            if query.requester not in (None, viewer.name):  # none of them is visible
                return Page(items=[], index=page.index, size=page.size, total=0)
            query = query.model_copy(update={"requester": viewer.name})
        return self._db.read(lambda conn: queries.list_requests(conn, query, page))
