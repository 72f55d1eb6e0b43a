"""The batch runner: every scheduling operation of this process, combined into transactions.

Owns :class:`BatchRunner` (see it for the steps of one transaction) and :class:`Beat`.

Invariants:
- an operation that fails its checks changes nothing and does not affect the others in the
  batch; any other failure rolls the transaction back and each operation is retried alone;
- the cache adopts the working copy only after commit (a stale compare-and-set invalidates it
  and the batch is retried once from a full reload); callers get results only after commit;
- :meth:`BatchRunner.produced` knows every state version this process committed lately, from
  before its commit on, and no version whose transaction rolled back.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from pydantic import TypeAdapter
from sqlalchemy import Connection

from wharf.combining import Combiner
from wharf.core.errors import IllegalOperationError, WharfError
from wharf.core.ids import new_id
from wharf.resource_manager.domain import ResourceRequest
from wharf.resource_manager.service import cycle, idempotency, leader, request_store
from wharf.resource_manager.service.idempotency import IdempotencyKey
from wharf.resource_manager.service.options import ServiceOptions
from wharf.resource_manager.service.state import SchedulingCache, open_working
from wharf.resource_manager.service.transaction import Finisher, Operation, Tx
from wharf.sql.engine import Database

logger = logging.getLogger(__name__)

LeftQueueListener = Callable[[Sequence[ResourceRequest]], None]

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}
OWN_VERSIONS_REMEMBERED = 64
"""State versions of this process's latest transactions kept for :meth:`BatchRunner.produced`."""


def _adapter(result_type: Any) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(result_type)
    if adapter is None:
        adapter = _ADAPTERS[result_type] = TypeAdapter(result_type)
    return adapter


@dataclass(slots=True)
class _Outcome:
    value: Any = None
    error: BaseException | None = None
    replayed: bool = False
    """Answered from a stored idempotency key: nothing new to store."""


@dataclass(slots=True)
class _Run:
    """What one transaction attempt produced, answered and adopted by the cache after commit."""

    outcomes: list[_Outcome]
    tx: Tx
    state_version: int
    config_version: int
    cycled: bool
    """A scheduling cycle ran (not only renewals or reads)."""


class BatchRunner(Combiner[Operation]):
    """Every scheduling operation of this process, combined into scheduling transactions.

    Operations that change scheduling state (create, release, cancel, configuration changes,
    sweeps; on SQLite also renewals) are submitted here. While one thread runs a transaction,
    the others queue theirs; the next thread to get the lock runs all queued operations in one
    transaction with one cycle (:class:`wharf.combining.Combiner`): one lock acquisition, one
    cache refresh, one scheduler run and a few ``executemany`` statements for N calls.

    One transaction, in order (see :mod:`.cycle`): take the scheduling lock and read
    ``rm_state`` -> on a takeover, extend live leases by the downtime (:mod:`.leader`) -> read
    the lapsed leases and the batch's stored idempotency keys -> refresh the working copy ->
    expire lapsed leases -> each operation's ``run`` (replays answered from stored keys) -> the
    cycle -> flush (status changes, then new requests in their final state, with allocations)
    -> finishers build results -> store idempotency responses, record versions and the leader
    -> commit. A transaction that changed nothing, such as a batch of renewals, records only
    when :func:`.leader.needs_record` says so.
    """

    def __init__(self, db: Database, options: ServiceOptions) -> None:
        super().__init__(options.max_batch)
        self.db = db
        self.options = options
        self.instance_id = new_id().hex
        self.cache = SchedulingCache()
        self.last_cycle: datetime | None = None
        """Server time of this process's latest committed scheduling cycle (a transaction of
        renewals alone runs none, so waiters still get the lazy sweep while heartbeats flow)."""
        self.catch_ups = 0
        """Transactions that found requests changed by other writers (never announced here)."""
        self._own_versions: deque[int] = deque(maxlen=OWN_VERSIONS_REMEMBERED)
        self._own_lock = threading.Lock()  # read by other threads (a wait room's watch)
        self._uncommitted: int | None = None
        """The version the running attempt will write, until it committed."""
        self._listeners: list[LeftQueueListener] = []

    def produced(self, state_version: int) -> bool:
        """True if one of this process's recent transactions wrote ``state_version`` (counted
        from before its commit, so a reader that sees the commit always finds it here)."""
        with self._own_lock:
            return state_version in self._own_versions

    def on_left_queue(self, listener: LeftQueueListener) -> None:
        """Call ``listener`` after each commit with the requests that left the queue in it.

        It gets the requests pending before and allocated or ended now, after the commit and
        before any caller of the batch is answered, so a waiter of this process hears of its
        allocation without asking. A failing listener is logged and never fails the batch.
        """
        self._listeners.append(listener)

    # -- one batch --------------------------------------------------------------------------

    def run_batch(self, operations: list[Operation]) -> list[Any]:
        try:
            run = self._attempt(operations)
        except request_store.StaleStateError:
            self.cache.invalidate()
            try:
                run = self._attempt(operations)
            except BaseException as error:
                return self.each_alone(operations, error)
        except BaseException as error:
            return self.each_alone(operations, error)
        self.cache.adopt(run.tx.work, run.state_version, run.config_version)
        if run.cycled:
            self.last_cycle = run.tx.now
        if run.tx.left_queue:
            self._announce(run.tx.left_queue)
        return [o.value if o.error is None else o.error for o in run.outcomes]

    def _announce(self, left: Sequence[ResourceRequest]) -> None:
        for listener in list(self._listeners):
            try:
                listener(left)
            except Exception:  # a listener's bug must not fail the batch that committed
                logger.exception("A listener of requests leaving the queue failed.")

    def _attempt(self, batch: list[Operation]) -> _Run:
        try:
            run = self.db.write(lambda conn: self._transaction(conn, batch))
        except BaseException:
            self._forget_uncommitted()
            raise
        self._uncommitted = None
        return run

    def _forget_uncommitted(self) -> None:
        """The last attempt never committed: another writer may write its version next."""
        if self._uncommitted is not None:
            with self._own_lock, contextlib.suppress(ValueError):
                self._own_versions.remove(self._uncommitted)
            self._uncommitted = None

    def _transaction(self, conn: Connection, batch: list[Operation]) -> _Run:
        self._forget_uncommitted()  # a retried attempt (a conflict rolled the last one back)
        now = self.db.now()
        # What every transaction reads first, under the lock.
        row = leader.acquire(conn)
        down = leader.downtime(row, self.instance_id, now, self.options)
        takeover = down is not None
        if down is not None:
            extended = cycle.extend_after_downtime(
                conn, now - down, now, self.options.sweep_interval
            )
            # Only news when a lease was extended: an embedded RM "takes over" at every start.
            logger.log(
                logging.INFO if extended else logging.DEBUG,
                "Taking over: no Resource Manager served for %.1f s; %d live lease(s) extended.",
                down.total_seconds(),
                extended,
            )
        lapsed = request_store.lapsed(conn, now)
        keys = [operation.idempotency for operation in batch]
        stored = idempotency.lookup_many(conn, [key for key in keys if key is not None])
        if self.cache.view.state_version != row.state_version:
            self.catch_ups += 1  # attempts, not commits: an extra count only costs a list
        work = open_working(conn, self.cache.view, row, self.cache.prepared, self.cache.take_walk())
        tx = Tx(conn=conn, now=now, row=row, work=work, options=self.options)
        cycle.expire_lapsed(tx, lapsed)
        finishers = [self._start(tx, operation, stored) for operation in batch]
        cycled = takeover or tx.needs_cycle
        if cycled:
            cycle.run_cycle(tx)
        tx.flush()
        outcomes = [finish() for finish in finishers]
        if tx.swept:
            idempotency.forget_before(conn, now - self.options.idempotency_ttl)
        idempotency.store(conn, self._responses(batch, outcomes), now)
        state_version = tx.seq if tx.changed else row.state_version
        config_version = row.config_version + 1 if tx.config_changed else row.config_version
        changed = tx.changed or tx.config_changed or tx.swept or cycled
        if changed or leader.needs_record(row, self.instance_id, now, self.options):
            leader.record(
                conn,
                row,
                instance_id=self.instance_id,
                state_version=state_version,
                config_version=config_version,
                now=now,
                swept=tx.swept,
            )
        if tx.changed:  # before the commit: whoever reads the new version finds it ours
            with self._own_lock:
                self._own_versions.append(state_version)
            self._uncommitted = state_version
        return _Run(outcomes, tx, state_version, config_version, cycled)

    def _start(
        self, tx: Tx, operation: Operation, stored: idempotency.Stored
    ) -> Callable[[], _Outcome]:
        """Run one operation's checks and staging; a replay or a failure needs no finisher."""
        key = operation.idempotency
        try:
            if key is not None:
                first = tx.replays.get(key.scope)
                if first is not None:
                    if first[0] != key.fingerprint:
                        raise IllegalOperationError(
                            f"Idempotency key '{key.key}' was already used for a different "
                            f"{key.operation} call."
                        )
                    return first[1]
                response = idempotency.find(tx.conn, stored, key)
                if response is not None:
                    replay = _Outcome(_adapter(operation.result_type).validate_json(response))
                    replay.replayed = True
                    return lambda: replay
            finisher = operation.run(tx)
        except WharfError as error:
            failed = _Outcome(error=error)
            return lambda: failed
        finish = _finish(finisher)
        if key is not None:
            tx.replays[key.scope] = (key.fingerprint, finish)
        return finish

    @staticmethod
    def _responses(
        batch: list[Operation], outcomes: list[_Outcome]
    ) -> list[tuple[idempotency.IdempotencyKey, str]]:
        stored: dict[tuple[str, str, str], tuple[idempotency.IdempotencyKey, str]] = {}
        for operation, outcome in zip(batch, outcomes, strict=True):
            key = operation.idempotency
            if key is None or outcome.error is not None or outcome.replayed:
                continue
            if key.scope in stored:
                continue
            adapter = _adapter(operation.result_type)
            stored[key.scope] = (key, adapter.dump_json(outcome.value, by_alias=True).decode())
        return list(stored.values())


@dataclass(slots=True)
class Beat:
    """Nothing but a transaction: it records this instance as serving when the record is old
    (:func:`.leader.needs_record`), and is a takeover where one is due."""

    name: ClassVar[str] = "beat"
    result_type: ClassVar[Any] = type(None)
    idempotency: IdempotencyKey | None = None

    def run(self, tx: Tx) -> Finisher:
        return lambda: None


def _finish(finisher: Finisher) -> Callable[[], _Outcome]:
    cached: list[_Outcome] = []

    def finish() -> _Outcome:
        if not cached:
            try:
                cached.append(_Outcome(value=finisher()))
            except WharfError as error:
                cached.append(_Outcome(error=error))
        return cached[0]

    return finish
