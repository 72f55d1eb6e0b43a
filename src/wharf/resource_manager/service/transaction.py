"""One scheduling transaction: what the batched operations and the cycle share while it runs.

Owns :class:`Tx`, :class:`Operation` (the interface every batched operation implements) and
:data:`Finisher`.

Invariants:
- an operation raises a :class:`~wharf.core.errors.WharfError` *before* writing anything when
  it must fail;
- writes are staged and flushed in bulk after the cycle (:meth:`Tx.flush`);
- every request change also updates the working copy, so later operations and the cycle see
  it, and is stamped with :attr:`Tx.seq`, the state version this transaction publishes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol
from uuid import UUID

from sqlalchemy import Connection

from wharf.core.enums import ResourceRequestStatus
from wharf.core.errors import EntityNotFoundError
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.resource_manager.domain import ResourceRequest, is_terminal, lease_at_end
from wharf.resource_manager.scheduler import CycleDecisions
from wharf.resource_manager.service import codec, request_store, status_writes
from wharf.resource_manager.service.config_store import Configuration
from wharf.resource_manager.service.convert import info_with
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.leader import StateRow
from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.state import Working

Finisher = Callable[[], Any]
"""Builds an operation's result after the cycle, inside the transaction."""

_Answer = tuple[ResourceRequest, str, Mapping[str, Any] | None]
"""What answers for a request: a model, its requester and the values of fields that differ from
the model's (its lease, as stored), applied when the answer is built."""


@dataclass(frozen=True, slots=True)
class Created:
    """A request created in a transaction, but for its model (which :attr:`Tx.final` holds)."""

    requester: str
    pool_id: UUID | None
    """The pool the request named, if any."""
    lease: Mapping[str, Any]
    """Its lease fields (``lease_expires_at``, ``allocation_deadline``), which the neutral
    model leaves out."""


class Operation(Protocol):
    """A batched operation, in two steps inside the transaction: :meth:`run` checks and stages
    its change, then, after the cycle, the :data:`Finisher` it returned builds its result, so a
    created request comes back already allocated when the cycle admitted it."""

    name: ClassVar[str]
    """``<aggregate>.<verb>``; scopes idempotency keys."""
    result_type: ClassVar[Any]
    """Type of the result, to decode a replayed idempotent response."""
    idempotency: IdempotencyKey | None

    def run(self, tx: Tx) -> Finisher: ...


@dataclass(slots=True)
class Tx:
    conn: Connection
    now: datetime
    row: StateRow
    work: Working
    options: ServiceOptions
    needs_cycle: bool = False
    config_changed: bool = False
    swept: bool = False
    changed: bool = False
    decisions: CycleDecisions | None = None
    transitions: dict[UUID, tuple[ResourceRequest, ResourceRequest]] = field(default_factory=dict)
    created: dict[UUID, Created] = field(default_factory=dict)
    """Requests created in this transaction (their models are in :attr:`final`). They are
    inserted by :meth:`flush` in their final state (admitted or not), never updated."""
    replays: dict[tuple[str, str, str], tuple[str, Callable[[], Any]]] = field(default_factory=dict)
    """Idempotency scope -> (fingerprint, finisher) of the first operation with that key in
    this batch: a second call with the same key shares its result."""
    final: dict[UUID, ResourceRequest] = field(default_factory=dict)
    """The latest (neutral) model of every request created or changed in this transaction."""
    left_queue: list[ResourceRequest] = field(default_factory=list)
    """Requests that were pending before this transaction and are not any more (allocated,
    cancelled, expired ...), as :meth:`flush` wrote them: announced after commit."""
    valid_demands: set[tuple[str | None, str | None, str | None]] = field(default_factory=set)
    """(resource, kind, unit) of the demands found valid against this transaction's
    configuration (see :func:`.request_ops.check_demands`); emptied when it changes."""
    _wanted: set[UUID] = field(default_factory=set)
    _loaded: dict[UUID, _Answer] = field(default_factory=dict)
    _lease_columns: dict[UUID, tuple[str, dict[str, Any]]] = field(default_factory=dict)

    @property
    def seq(self) -> int:
        """The state version this transaction publishes if it changes anything."""
        return self.row.state_version + 1

    def configuration(self) -> Configuration:
        return self.work.configuration(self.conn)

    def config_written(self) -> None:
        self.work.config_dirty = True
        self.valid_demands.clear()
        self.config_changed = True
        self.needs_cycle = True

    # -- requests ---------------------------------------------------------------------------

    def add_request(
        self,
        request: ResourceRequest,
        requester: str,
        pool_id: UUID | None,
        lease: Mapping[str, Any],
    ) -> None:
        """Stage a new request: ``request`` neutral (see :func:`codec.neutral`), ``lease`` its
        ``lease_expires_at`` and ``allocation_deadline``."""
        self.created[request.id] = Created(requester, pool_id, lease)
        self.final[request.id] = request
        self.work.put(request, requester)
        self.work.appended.append(request)
        self.changed = True
        self.needs_cycle = True

    def transition(
        self, before: ResourceRequest, after: ResourceRequest, *, decided: bool = False
    ) -> None:
        """Stage ``before`` -> ``after``; ``decided``: applying this transaction's cycle."""
        if after is before:
            return
        if not decided:
            self.work.changed()
        if after.id not in self.created:
            first = self.transitions.get(after.id)
            self.transitions[after.id] = (first[0] if first else before, after)
        self.final[after.id] = after
        if is_terminal(after.status):
            self.work.drop(after.id)
        else:
            self.work.put(after)
        self.changed = True

    def flush(self) -> None:
        """Write everything staged: status changes (compare-and-set, see
        :func:`status_writes.write_transitions`; an admission writes its allocations), then new
        requests in their final state (with their allocations) and their child rows, one
        ``executemany`` per table."""
        rows: list[dict[str, Any]] = []
        children = request_store.Children.empty()
        for request_id, created in self.created.items():
            # Transitions change the status fields only: the final model and the creation's
            # lease are the whole request.
            final = self.final[request_id]
            pool_id = final.allocations[0].pool_id if final.allocations else created.pool_id
            lease = created.lease
            if is_terminal(final.status):  # ended in the transaction that created it
                ended = lease_at_end(lease["lease_expires_at"], self.now)
                lease = {**lease, "lease_expires_at": ended}
            rows.append(
                codec.request_row(
                    final,
                    requester=created.requester,
                    pool_id=pool_id,
                    seq=self.seq,
                    lease=lease,
                )
            )
            children.add(final)
            self._loaded[request_id] = (final, created.requester, lease)
        # Status changes first (their compare-and-set fails early), then every new row at once.
        written = status_writes.write_transitions(
            self.conn, self.transitions.values(), self.seq, self.now
        )
        for request_id, (requester, columns) in written.items():
            self.lease_columns_written(request_id, requester, columns)
        # Finishers answer created requests from their models, kept in ``_loaded`` above.
        request_store.insert_requests(self.conn, rows, children)
        self.created = {}
        self.left_queue.extend(
            after
            for before, after in self.transitions.values()
            if before.status is ResourceRequestStatus.PENDING
            and after.status is not ResourceRequestStatus.PENDING
        )
        self.transitions = {}

    # -- results ----------------------------------------------------------------------------

    def lease_columns_written(
        self, request_id: UUID, requester: str, columns: dict[str, Any]
    ) -> None:
        """A write of this transaction returned the request's lease columns (a renewal, or a
        status change, as the database wrote them): nothing changes them before commit (the
        row is this transaction's until then), so answering needs no read of them."""
        self._lease_columns[request_id] = (requester, columns)
        self._loaded.pop(request_id, None)

    def want(self, ids: Iterable[UUID]) -> None:
        """Announce requests a finisher will return, so they are loaded in one go."""
        self._wanted.update(ids)

    def info(self, request_id: UUID) -> ResourceRequestInfo:
        """The request as committed by this transaction (call from finishers only)."""
        # The first call of a batch loads every announced request; later ones are lookups
        # (recomputing the difference per call cost O(batch) hashes, O(batch²) per batch).
        if self._wanted or request_id not in self._loaded:
            self._load_missing(request_id)
        answer = self._loaded.get(request_id)
        if answer is None:
            raise EntityNotFoundError(f"Resource request {request_id} not found.")
        return info_with(*answer)

    def _load_missing(self, request_id: UUID) -> None:
        missing = {key for key in self._wanted if key not in self._loaded}
        if request_id not in self._loaded:
            missing.add(request_id)
        self._wanted.clear()
        if missing:
            # Known models only need the columns renewals change; others are loaded whole.
            known: dict[UUID, ResourceRequest] = {}
            for key in missing:
                model = self.final.get(key) or self.work.requests.get(key)
                if model is None:
                    continue
                written = self._lease_columns.get(key)
                if written is None:
                    known[key] = model
                else:
                    requester, columns = written
                    self._loaded[key] = (model, requester, columns)
            self._adopt(request_store.with_volatile(self.conn, known))
            rest = missing - known.keys() - self._loaded.keys()
            if rest:
                self._adopt(request_store.load(self.conn, rest))

    def _adopt(self, loaded: Mapping[UUID, request_store.Loaded]) -> None:
        for key, item in loaded.items():
            self._loaded[key] = (item.request, item.requester, None)
