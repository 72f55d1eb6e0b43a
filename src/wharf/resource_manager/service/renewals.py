"""Lease renewals on servers with row locks (PostgreSQL, MySQL/MariaDB), combined per batch.

Owns :class:`Renewal` (one call), :class:`RenewalRunner` (see it for why a renewal needs
neither the scheduling lock nor a cycle), :data:`LAPSED`.

Invariants: a renewal changes no status and no allocation, so it can never over-allocate, and
never revives a lapsed lease (:data:`LAPSED` lets a cycle expire it); each renewal's checks
(existence, ownership, idempotency key reuse) fail that renewal alone; rows are updated in
request-id order, so two batches cannot deadlock on each other; a database failure retries
each renewal of the batch alone; an idempotent replay returns the first answer, storing nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import TypeAdapter
from sqlalchemy import Connection

from wharf.combining import Combiner
from wharf.core.enums import ResourceRequestRuntimeState
from wharf.core.errors import EntityNotFoundError, IllegalOperationError, WharfError
from wharf.resource_manager.contract.models import ResourceRequestInfo
from wharf.resource_manager.service import idempotency, lease_store, request_store
from wharf.resource_manager.service.convert import request_info
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.principal import Principal, require_owner
from wharf.resource_manager.service.state import CacheView
from wharf.sql.engine import Database

_INFO = TypeAdapter(ResourceRequestInfo)
LAPSED = object()
"""Outcome of a renewal whose lease had lapsed but was not expired yet."""


@dataclass(frozen=True, slots=True)
class Renewal:
    principal: Principal
    request_id: UUID
    lease_seconds: int
    runtime_state: ResourceRequestRuntimeState | None
    key: IdempotencyKey | None


@dataclass(slots=True)
class _Result:
    value: Any = None
    error: BaseException | None = None
    answer: bool = False
    """The value is the request as this transaction leaves it (loaded after the updates)."""
    written: request_store.Written | None = None
    """The row as the renewal wrote it, where the database returns it (SQLite, PostgreSQL)."""


class RenewalRunner(Combiner[Renewal]):
    """Renewals of this process, one transaction (and one commit) per batch.

    A renewal only moves a lease: it changes nothing the scheduler reads (``seq`` is not
    bumped, the scheduling cache holds no leases), so it is one compare-and-set ``UPDATE`` of
    the request's row (:func:`lease_store.renew`): live, not lapsed (``lapse_at > now``), and
    the caller's. Concurrent renewals are combined (:class:`wharf.combining.Combiner`), so a
    server makes one commit (one log flush) per batch, its updates in request-id order
    (:func:`lease_store.renew_many`).

    Capacity is only granted by scheduling transactions, under the scheduling lock and row
    locks. The only race is with the sweep (:func:`cycle.expire_lapsed` reads lapsed rows
    ``FOR UPDATE``): a renewal that commits first has moved ``lapse_at`` into the future, so
    the sweep no longer sees the row as lapsed; one that comes after finds the row terminal (or
    ``lapse_at <= now``) and changes nothing.

    Answers come from the scheduling cache's published view where the row's ``seq`` proves it
    current (:func:`request_store.current_from`), with the row's other columns as the
    ``UPDATE`` returned them (SQLite, PostgreSQL; MySQL/MariaDB read them with one ``SELECT``
    for the batch), else from the whole row.
    """

    def __init__(self, db: Database, max_batch: int, view: Callable[[], CacheView]) -> None:
        super().__init__(max_batch)
        self._db = db
        self._view = view

    def run_batch(self, operations: list[Renewal]) -> list[Any]:
        try:
            results = self._db.write(lambda conn: self._transaction(conn, operations))
        except BaseException as error:
            return self.each_alone(operations, error)
        return [r.value if r.error is None else r.error for r in results]

    def _transaction(self, conn: Connection, batch: list[Renewal]) -> list[_Result]:
        now = self._db.now()
        results = [_Result() for _ in batch]
        first: dict[tuple[str, str, str], tuple[str, int]] = {}
        """Idempotency scope -> (fingerprint, index) of its first renewal in this batch."""
        shared: dict[int, int] = {}
        """Index of a renewal that repeats a key -> index of the first one."""
        order = sorted(range(len(batch)), key=lambda i: batch[i].request_id.int)
        renewing: list[int] = []
        for index in order:
            renewal, result = batch[index], results[index]
            try:
                key = renewal.key
                if key is not None:
                    seen = first.get(key.scope)
                    if seen is not None:
                        if seen[0] != key.fingerprint:
                            raise IllegalOperationError(
                                f"Idempotency key '{key.key}' was already used for a different "
                                f"{key.operation} call."
                            )
                        shared[index] = seen[1]
                        continue
                    first[key.scope] = (key.fingerprint, index)
                    response = idempotency.lookup(conn, key)
                    if response is not None:
                        result.value = _INFO.validate_json(response)
                        continue
                renewing.append(index)
            except WharfError as error:
                result.error = error
        # Every lease, in request-id order.
        written = lease_store.renew_many(
            conn, [self._lease_renewal(batch[index], now) for index in renewing]
        )
        for index, outcome in zip(renewing, written, strict=True):
            try:
                self._renewed(conn, batch[index], results[index], outcome)
            except WharfError as error:
                results[index].error = error
        self._answer(conn, batch, results)
        for index, origin in shared.items():
            results[index].value = results[origin].value
            results[index].error = results[origin].error
        stored = [
            (batch[i].key, _INFO.dump_json(r.value, by_alias=True).decode())
            for i, r in enumerate(results)
            if r.answer and batch[i].key is not None and i not in shared
        ]
        keys = [(key, value) for key, value in stored if key is not None]
        idempotency.store(conn, keys, now)
        return results

    @staticmethod
    def _lease_renewal(renewal: Renewal, now: datetime) -> lease_store.LeaseRenewal:
        principal = renewal.principal
        return lease_store.LeaseRenewal(
            renewal.request_id,
            now,
            now + timedelta(seconds=renewal.lease_seconds),
            renewal.runtime_state,
            None if principal.admin else principal.name,
        )

    @staticmethod
    def _renewed(
        conn: Connection, renewal: Renewal, result: _Result, written: request_store.Written | bool
    ) -> None:
        """Settle one renewal from what its ``UPDATE`` did (a row that matched nothing: find
        out why)."""
        result.written = written if isinstance(written, request_store.Written) else None
        if not written:
            owner = request_store.owner(conn, renewal.request_id)
            if owner is None:
                raise EntityNotFoundError(f"Resource request {renewal.request_id} not found.")
            require_owner(renewal.principal, owner[0], renewal.request_id)
            if owner[1] in request_store.LIVE:
                result.value = LAPSED  # lapsed, not yet expired: the cycle expires it
                return
        result.answer = True  # renewed, or terminal and returned unchanged

    def _answer(self, conn: Connection, batch: list[Renewal], results: list[_Result]) -> None:
        wanted = [batch[i].request_id for i, r in enumerate(results) if r.answer]
        if not wanted:
            return
        view = self._view()
        written = [r.written for r in results if r.answer and r.written is not None]
        loaded = request_store.current_from(conn, written, view.requests, view.state_version)
        unread = [request_id for request_id in wanted if request_id not in loaded]
        if unread:  # terminal requests returned unchanged, and databases without RETURNING
            loaded.update(request_store.current(conn, unread, view.requests, view.state_version))
        for index, result in enumerate(results):
            if not result.answer:
                continue
            request_id = batch[index].request_id
            item = loaded.get(request_id)
            if item is None:  # deleted in between: cannot happen while requests are kept
                result.answer = False
                result.error = EntityNotFoundError(f"Resource request {request_id} not found.")
            else:
                result.value = request_info(item)
