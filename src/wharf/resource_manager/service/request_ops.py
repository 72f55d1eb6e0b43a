"""Batched operations on requests: create, release, cancel, renew (SQLite) and sweep.

Owns the operation classes the service submits to the :class:`~.batch.BatchRunner`, and
:func:`check_demands` (the input checks that need the descriptors).

Invariants: every check (ownership, existence, units, the status machine) runs before anything
is staged, so a failing operation changes nothing; a request's ``created_at`` is the batch's
``now`` and its deadlines come from the durations the client sent; release, cancel and renewal
of a terminal request return it unchanged; only the requester or an admin may change a request
(:func:`~.principal.require_owner`); the ``by`` a caller names in a release or cancellation
never takes the forms the RM's own reasons use (:data:`RM_ENDERS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar
from uuid import UUID

from wharf.core.enums import ResourceRequestStatus as S
from wharf.core.errors import EntityNotFoundError, InputError
from wharf.resource_manager.contract.models import (
    ResourceRequestCreate,
    ResourceRequestInfo,
    ResourceRequestRenew,
)
from wharf.resource_manager.domain import (
    Demand,
    Pool,
    ResourceDescriptor,
    ResourceRequest,
    cancel,
    new_request,
    release,
)
from wharf.resource_manager.service import codec, ids, lease_store, request_store
from wharf.resource_manager.service.codec import neutral
from wharf.resource_manager.service.config_store import as_uuid
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.principal import Principal, require_owner
from wharf.resource_manager.service.transaction import Finisher, Tx


def check_demands(
    demands: Sequence[Demand],
    descriptors: Sequence[ResourceDescriptor],
    valid: set[tuple[str | None, str | None, str | None]] | None = None,
) -> None:
    """InputError for a demand naming an unknown resource, a kind nobody has, or an unknown unit.

    ``valid``: the (resource, kind, unit) of demands already found valid against these
    descriptors, which are not checked again; the demands found valid here are added."""
    by_name = {d.name: d for d in descriptors}
    for index, demand in enumerate(demands):
        names = (demand.resource, demand.kind, demand.unit)
        if valid is not None and names in valid:
            continue
        if demand.resource is not None:
            descriptor = by_name.get(demand.resource)
            if descriptor is None:
                raise InputError(
                    f"Demand #{index} names unknown resource '{demand.resource}'; known "
                    f"resources: {', '.join(sorted(by_name))}."
                )
            descriptor.multiplier(demand.unit)
        elif demand.kind is not None:
            of_kind = [d for d in descriptors if d.kind == demand.kind]
            if not of_kind:
                raise InputError(
                    f"Demand #{index}: no resource descriptor has kind '{demand.kind}'."
                )
            if not any(d.has_unit(demand.unit) for d in of_kind):
                of_kind[0].multiplier(demand.unit)  # raises with the known units
        if valid is not None:
            valid.add(names)


def _pool_id(pools: Sequence[Pool], ref: str | None) -> UUID | None:
    if ref is None:
        return None
    wanted = as_uuid(ref)
    for pool in pools:
        if pool.id == wanted or pool.name == ref:
            return pool.id
    return None


_DRAFT_ID = UUID(int=0)
_DRAFT_TIME = datetime(2000, 1, 1, tzinfo=UTC)
"""A draft request is built at this instant; its deadlines, shifted to the batch's ``now``,
are the real ones."""


@dataclass(slots=True)
class CreateRequest:
    """Create a request: built and validated by :meth:`prepare` in the caller's thread, then
    only stamped with its id and the batch's clock under the scheduling lock."""

    name: ClassVar[str] = "requests.create"
    result_type: ClassVar[Any] = ResourceRequestInfo
    principal: Principal
    draft: ResourceRequest
    """The request as it will be, but for its id, creation time and deadlines."""
    random_part: bytes
    idempotency: IdempotencyKey | None = None

    @classmethod
    def prepare(
        cls,
        principal: Principal,
        spec: ResourceRequestCreate,
        demands: tuple[Demand, ...],
        idempotency: IdempotencyKey | None = None,
    ) -> CreateRequest:
        """The operation with its request drafted (InputError for bad durations): the model's
        validation runs here, outside the lock that every scheduling operation waits for."""
        draft = new_request(
            request_id=_DRAFT_ID,
            subjects=spec.subjects,
            demands=demands,
            now=_DRAFT_TIME,
            lease_seconds=spec.lease_seconds,
            allocation_wait_timeout_seconds=spec.allocation_wait_timeout_seconds,
            reclaim_tolerance=spec.reclaim_tolerance,
            pool=spec.pool,
            pool_selector=spec.pool_selector,
            preemption_group=spec.preemption_group,
            metadata=spec.metadata,
        )
        return cls(principal, draft, ids.entropy(), idempotency)

    def run(self, tx: Tx) -> Finisher:
        config = tx.configuration()
        draft, shift = self.draft, tx.now - _DRAFT_TIME
        check_demands(draft.demands, config.descriptors, tx.valid_demands)
        lease = {
            "lease_expires_at": _shifted(draft.lease_expires_at, shift),
            "allocation_deadline": _shifted(draft.allocation_deadline, shift),
        }
        # Neutral (see codec.neutral): the transaction keeps the lease apart.
        request = codec.updated(
            draft,
            {
                "id": ids.request_id(tx.now, self.random_part),
                "created_at": tx.now,
                "lease_expires_at": None,
                "allocation_deadline": None,
            },
        )
        tx.add_request(request, self.principal.name, _pool_id(config.pools, draft.pool), lease)
        tx.want([request.id])
        return lambda: tx.info(request.id)


def _shifted(instant: datetime | None, shift: timedelta) -> datetime | None:
    return None if instant is None else instant + shift


def _owned(tx: Tx, principal: Principal, request_id: UUID) -> ResourceRequest | None:
    """The live request (neutral) after the ownership check; None when it is terminal."""
    current = tx.work.requests.get(request_id)
    if current is not None:
        require_owner(principal, tx.work.requesters[request_id], request_id)
        return current
    owner = request_store.owner(tx.conn, request_id)
    if owner is None:
        raise EntityNotFoundError(f"Resource request {request_id} not found.")
    require_owner(principal, owner[0], request_id)
    if owner[1] not in request_store.LIVE:
        return None
    # Live but not in the working copy (it is synced under the lock, so this is a bug):
    # use the row rather than report the request as finished.
    loaded = request_store.load(tx.conn, [request_id])[request_id]
    tx.work.requesters[request_id] = loaded.requester
    return neutral(loaded.request)


RM_ENDERS = ("resource manager administrator", "its requester", "the holder", "the client")
"""How the RM itself names who ends a request (:func:`_ender`, ``lifecycle.release``): a
caller's ``by`` may not start so, or any requester could end its own request as, say,
``Released by Resource Manager administrator 'admin'.``"""


def _given(by: str) -> str:
    """``by`` as a caller gave it, unless it takes a form the RM's own reasons use (InputError)."""
    if by.strip().casefold().startswith(RM_ENDERS):
        raise InputError(
            f"'by' names who ends a request for its status reason, and may not take the "
            f"Resource Manager's own forms (starting with 'Resource Manager administrator', "
            f"'its requester', 'the holder' or 'the client'): {by[:100]!r}."
        )
    return by


def _ender(
    tx: Tx, principal: Principal, request_id: UUID, by: str | None, manual: bool
) -> str | None:
    """Who ends the request, for its status reason: ``by`` as given (a workspace server names
    its user); else an administrator ending another principal's request, or any caller's
    ``manual`` command (``wharf request release``: the request may be its own only because a
    workspace server shares the RM administrator's key); else None (its holder)."""
    if by is not None:
        return _given(by)
    requester = tx.work.requesters.get(request_id, principal.name)
    if principal.admin and (manual or requester != principal.name):
        return f"Resource Manager administrator '{principal.name}'"
    if manual:
        return f"its requester '{principal.name}'"
    return None


@dataclass(slots=True)
class ReleaseRequest:
    name: ClassVar[str] = "requests.release"
    result_type: ClassVar[Any] = ResourceRequestInfo
    principal: Principal
    request_id: UUID
    idempotency: IdempotencyKey | None = None
    by: str | None = None
    manual: bool = False

    def run(self, tx: Tx) -> Finisher:
        current = _owned(tx, self.principal, self.request_id)
        if current is not None:
            by = _ender(tx, self.principal, self.request_id, self.by, self.manual)
            tx.transition(current, release(current, tx.now, by))
            tx.needs_cycle = True
        tx.want([self.request_id])
        return lambda: tx.info(self.request_id)


@dataclass(slots=True)
class CancelRequest:
    name: ClassVar[str] = "requests.cancel"
    result_type: ClassVar[Any] = ResourceRequestInfo
    principal: Principal
    request_id: UUID
    idempotency: IdempotencyKey | None = None
    by: str | None = None
    manual: bool = False

    def run(self, tx: Tx) -> Finisher:
        current = _owned(tx, self.principal, self.request_id)
        if current is not None:
            by = _ender(tx, self.principal, self.request_id, self.by, self.manual)
            tx.transition(current, cancel(current, tx.now, by))
            tx.needs_cycle = True
        tx.want([self.request_id])
        return lambda: tx.info(self.request_id)


@dataclass(slots=True)
class RenewRequest:
    """A renewal run inside a scheduling transaction (SQLite: see ``RequestService.renew``).

    A lapsed request was already expired at the start of this transaction, so it comes back
    terminal and unchanged; a still-pending one gets a cycle in the same transaction when
    ``cycle_if_pending`` (the lazy sweep).
    """

    name: ClassVar[str] = "requests.renew"
    result_type: ClassVar[Any] = ResourceRequestInfo
    principal: Principal
    request_id: UUID
    body: ResourceRequestRenew
    cycle_if_pending: bool
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        written = lease_store.renew(
            tx.conn,
            self.request_id,
            now=tx.now,
            lease=tx.now + timedelta(seconds=self.body.lease_seconds),
            runtime_state=self.body.runtime_state,
            requester=None if self.principal.admin else self.principal.name,
        )
        if isinstance(written, request_store.Written):
            tx.lease_columns_written(
                self.request_id, written.requester, request_store.volatile(written)
            )
        if not written:
            _owned(tx, self.principal, self.request_id)  # not found / not theirs
        current = tx.work.requests.get(self.request_id)
        if self.cycle_if_pending and current is not None and current.status is S.PENDING:
            tx.needs_cycle = True
        tx.want([self.request_id])
        return lambda: tx.info(self.request_id)


@dataclass(slots=True)
class Sweep:
    """Run a cycle (expiring lapsed leases) and forget old idempotency keys."""

    name: ClassVar[str] = "sweep"
    result_type: ClassVar[Any] = type(None)
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        tx.needs_cycle = True
        tx.swept = True
        return lambda: None
