"""Concurrent calls served in batches: the first caller runs the batch for everyone.

Owns :class:`Combiner`, used by the Resource Manager service (its scheduling transactions and
renewals) and by the workspace server (coalesced lease renewals).

Invariants: every queued operation runs in exactly one batch, and its caller gets its outcome
(the value :meth:`Combiner.run_batch` gave for it, raised if it is an exception, or the error
that batch raised as a whole); while operations are queued, a runner is at work (``_running``
changes only under the lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

OperationT = TypeVar("OperationT")


class _Pending:
    __slots__ = ("done", "event", "future", "operation", "outcome")

    def __init__(
        self,
        operation: Any,
        event: threading.Event | None = None,
        future: asyncio.Future[Any] | None = None,
    ) -> None:
        self.operation = operation
        self.event = event
        self.future = future
        self.outcome: Any = None
        self.done = False

    def result(self) -> Any:
        if isinstance(self.outcome, BaseException):
            raise self.outcome
        return self.outcome


class Combiner(ABC, Generic[OperationT]):
    """Runs submitted operations in batches of at most ``max_batch``.

    A call queues its operation under a lock; the caller that found nobody running becomes the
    runner: it takes up to ``max_batch`` queued operations, runs them as one batch
    (:meth:`run_batch`) and hands every caller its outcome, until its own is answered.
    Operations still queued then are carried on by a new thread, so no caller runs batches for
    longer than it takes to answer its own. A caller on an event loop (:meth:`submit_async`)
    never blocks it: a thread runs for it.
    """

    def __init__(self, max_batch: int) -> None:
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._running = False

    @abstractmethod
    def run_batch(self, operations: list[OperationT]) -> Sequence[Any]:
        """One outcome per operation, in order: its result, or the exception its caller raises."""

    def each_alone(self, operations: list[OperationT], error: BaseException) -> list[Any]:
        """For a :meth:`run_batch` whose batch failed as a whole (a rolled-back transaction):
        each operation run again alone, so one bad operation fails only itself; a single
        operation, or an interrupt, gets ``error``."""
        if len(operations) > 1 and not isinstance(error, KeyboardInterrupt | SystemExit):
            return [self.run_batch([operation])[0] for operation in operations]
        return [error] * len(operations)

    def submit(self, operation: OperationT) -> Any:
        """Run ``operation`` in the next batch; its result, or raise its error."""
        pending = _Pending(operation, event=threading.Event())
        if self._enqueue(pending):
            self._run(until=pending)
        else:
            pending.event.wait()  # type: ignore[union-attr]
        return pending.result()

    async def submit_async(self, operation: OperationT) -> Any:
        """:meth:`submit` for a caller on an event loop: a thread runs the batches."""
        pending = _Pending(operation, future=asyncio.get_running_loop().create_future())
        if self._enqueue(pending):
            self._carry_on()
        return await pending.future  # type: ignore[misc]

    def _enqueue(self, pending: _Pending) -> bool:
        """Queue ``pending``; True if the caller is to run the batches."""
        with self._lock:
            self._queue.append(pending)
            first = not self._running
            self._running = True
        return first

    def _carry_on(self) -> None:
        threading.Thread(target=self._run, name=type(self).__name__, daemon=True).start()

    def _run(self, until: _Pending | None = None) -> None:
        """Run batches until ``until`` is answered (None: until nothing is queued); hand the
        role on to a new thread if operations are still queued then."""
        while True:
            with self._lock:
                if not self._queue:
                    self._running = False
                    return
                if until is not None and until.done:
                    break
                batch = self._queue[: self.max_batch]
                del self._queue[: self.max_batch]
            self._serve(batch)
        self._carry_on()

    def _serve(self, batch: list[_Pending]) -> None:
        try:
            outcomes: Sequence[Any] = self.run_batch([pending.operation for pending in batch])
            if len(outcomes) != len(batch):
                raise RuntimeError(f"{type(self).__name__} answered a batch partly.")
        except BaseException as error:  # the whole batch failed: each caller raises it
            outcomes = [error] * len(batch)
        loops: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
        for pending, outcome in zip(batch, outcomes, strict=True):
            pending.outcome, pending.done = outcome, True
            if pending.future is not None:
                loops.setdefault(pending.future.get_loop(), []).append(pending)
            elif pending.event is not None:
                pending.event.set()
        for loop, answered in loops.items():
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
                loop.call_soon_threadsafe(_resolve, answered)


def _resolve(answered: list[_Pending]) -> None:
    """On the callers' loop: hand each asynchronous caller its outcome."""
    for pending in answered:
        future = pending.future
        if future is None or future.cancelled():  # the caller went away; it ran all the same
            continue
        if isinstance(pending.outcome, BaseException):
            future.set_exception(pending.outcome)
        else:
            future.set_result(pending.outcome)
