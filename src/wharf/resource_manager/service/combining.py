"""Flat combining: concurrent calls of one process served in batches by whichever thread is free.

Owns: :class:`Combiner` (the queue and the hand-over protocol) and :class:`Slot` (one caller's
operation and its outcome). Subclasses say how a batch runs (:class:`~.batch.BatchRunner`,
:class:`~.renewals.RenewalRunner`). The thread holding the combine lock executes queued slots in
batches of at most ``max_batch`` until its own is done, so N concurrent calls cost one
transaction. A batch's callers are woken as a tree (each woken caller wakes the next two), so
the combiner pays one wake-up per batch; event-loop callers (:meth:`Combiner.submit_async`) are
served by one drainer thread and answered once per batch and loop.

Invariants:
- every slot is executed exactly once, and a batch executor sets an outcome on every slot of
  its batch (:meth:`Slot.finish`), even when it fails;
- a synchronous caller returns only once its slot is answered, and wakes its successors in the
  tree before it returns, so every caller of a batch is woken;
- the combiner leaves only after handing the role on, even when a batch raised;
- whenever an asynchronous slot is queued, the drainer is awake or about to look again
  (``_draining``, changed only under the queue lock).
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

OperationT = TypeVar("OperationT")


class Signal:
    """A wake-up for one waiting thread: :meth:`set` wakes :meth:`wait`, which consumes it.

    A bare lock held while unset: ``threading.Event`` builds on a ``Condition`` (a waiter lock
    and a deque per wait), and waking the callers of a batch through it cost a fifth of the
    combining thread's time under load. Signals do not count: setting a set signal is a no-op.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _thread.allocate_lock()
        self._lock.acquire()

    def set(self) -> None:
        # Only one thread ever waits; two setters may race, and the loser finds it released.
        with contextlib.suppress(RuntimeError):
            self._lock.release()

    def wait(self) -> None:
        """Block until set, and unset it again."""
        self._lock.acquire()


@dataclass(slots=True, eq=False)
class Slot(Generic[OperationT]):
    operation: OperationT
    done: bool = False
    """The outcome is set (by the batch executor)."""
    answered: bool = False
    """Set by the combiner after the batch: the caller may return (and wake its followers)."""
    followers: tuple[Slot[OperationT], ...] = ()
    """The callers this one wakes (its children in the batch's wake tree)."""
    value: Any = None
    error: BaseException | None = None
    wake: Signal | None = None
    """A synchronous caller's: set when the slot is answered, or when its thread is handed the
    combiner's role (an asynchronous caller has no thread to wake: its future is resolved)."""
    future: asyncio.Future[Any] | None = None
    """An asynchronous caller's: resolved on its loop once the slot's batch is done."""

    def finish(self, value: Any = None, error: BaseException | None = None) -> None:
        self.value, self.error, self.done = value, error, True

    def result(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.value


class Combiner(ABC, Generic[OperationT]):
    """Runs submitted operations in batches; see the module docstring."""

    def __init__(self, max_batch: int) -> None:
        self.max_batch = max_batch
        self._queue: list[Slot[OperationT]] = []
        self._queue_lock = threading.Lock()
        self._combine_lock = threading.Lock()
        self._draining = False
        self._drain_wake = threading.Event()
        self._drainer: threading.Thread | None = None
        self._closed = False

    async def submit_async(self, operation: OperationT) -> Any:
        """:meth:`submit` for a caller on an event loop: the drainer thread runs it."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        slot = Slot(operation, future=future)
        with self._queue_lock:
            self._queue.append(slot)
            start = not self._draining
            self._draining = True
        if start:
            if self._drainer is None:
                self._drainer = threading.Thread(
                    target=self._drain_forever, name=f"{type(self).__name__}-drainer", daemon=True
                )
                self._drainer.start()
            self._drain_wake.set()
        return await future

    def close(self) -> None:
        """Let the drainer thread end once the queue is empty (the service is closing)."""
        self._closed = True
        self._drain_wake.set()

    def _drain_forever(self) -> None:
        while True:
            self._drain_wake.wait()
            self._drain_wake.clear()
            if self._closed and not self._draining:
                return
            while True:
                with self._combine_lock:  # a synchronous combiner may hold it: wait our turn
                    batch = self._take()
                    if batch:
                        with contextlib.suppress(Exception):  # set on its slots by _run
                            self._run(batch)
                with self._queue_lock:
                    if not self._queue:
                        self._draining = False
                        break

    def submit(self, operation: OperationT) -> Any:
        """Run ``operation`` in the next batch; its result, or raise its error."""
        wake = Signal()
        slot = Slot(operation, wake=wake)
        with self._queue_lock:
            self._queue.append(slot)
        while not slot.answered:
            if self._combine_lock.acquire(blocking=False):
                try:
                    while not slot.done:
                        self._run(self._take(), slot)
                finally:
                    self._combine_lock.release()
                    self._hand_off()
            else:
                wake.wait()
        for follower in slot.followers:
            _wake(follower)
        return slot.result()

    @abstractmethod
    def _execute(self, batch: list[Slot[OperationT]]) -> None:
        """Run ``batch`` and :meth:`Slot.finish` every slot of it (called under the lock)."""

    def _fail(self, batch: list[Slot[OperationT]], error: BaseException) -> None:
        """For executors whose batch failed as a whole (a rolled-back transaction): run each
        slot again alone, so that one bad operation fails only itself; a single slot, or an
        interrupt, gets ``error``."""
        if len(batch) > 1 and not isinstance(error, KeyboardInterrupt | SystemExit):
            for slot in batch:
                self._execute([slot])
            return
        for slot in batch:
            slot.finish(error=error)

    def _run(self, batch: list[Slot[OperationT]], own: Slot[OperationT] | None = None) -> None:
        """:meth:`_execute`, making sure no slot is left unfinished if it raises anyway, then
        answer the batch's callers (``own``: the running thread's slot, which is not woken)."""
        try:
            self._execute(batch)
        except BaseException as error:
            for slot in batch:
                if not slot.done:
                    slot.finish(error=error)
            raise
        finally:
            waiting = [slot for slot in batch if slot.future is None and slot is not own]
            for index in range(len(waiting) // 2):
                waiting[index].followers = tuple(waiting[2 * index + 1 : 2 * index + 3])
            by_loop: dict[asyncio.AbstractEventLoop, list[Slot[OperationT]]] = {}
            for slot in batch:
                slot.answered = True
                if slot.future is not None:
                    by_loop.setdefault(slot.future.get_loop(), []).append(slot)
            for loop, answered in by_loop.items():
                loop.call_soon_threadsafe(_resolve, answered)
            if waiting:
                _wake(waiting[0])

    def _take(self) -> list[Slot[OperationT]]:
        with self._queue_lock:
            batch = self._queue[: self.max_batch]
            del self._queue[: self.max_batch]
        return batch

    def _hand_off(self) -> None:
        """Wake the thread of the oldest queued operation to become the next combiner (an
        asynchronous head has no thread: the drainer, awake while it is queued, serves it)."""
        with self._queue_lock:
            head = self._queue[0] if self._queue else None
        if head is not None:
            _wake(head)


def _wake(slot: Slot[Any]) -> None:
    if slot.wake is not None:
        slot.wake.set()


def _resolve(slots: list[Slot[Any]]) -> None:
    """On the slots' loop: hand each asynchronous caller its outcome."""
    for slot in slots:
        future = slot.future
        if future is None or future.cancelled():  # the caller went away; it ran all the same
            continue
        if slot.error is not None:
            future.set_exception(slot.error)
        else:
            future.set_result(slot.value)
