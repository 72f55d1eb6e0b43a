"""Holders first: the bookkeeping of steps that hold an allocation goes before the creation of
steps that will wait for one.

Owns :class:`HoldersFirst`. Invariants:
- a stretch belongs to a thread: :meth:`HoldersFirst.begin` and :meth:`HoldersFirst.end` are
  idempotent per thread, and the outermost layer closes it in a ``finally`` (a holder count
  never leaks);
- creation is delayed, never starved nor skipped: :meth:`HoldersFirst.creating` waits at most
  ``max_queue`` seconds for a turn and ``max_wait`` more for holders;
- holders never wait, for each other or for creations: a stretch only counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

MAX_DEFER_SECONDS = 0.25
"""Longest a creation waits for holders once it has its turn."""
CREATING_AT_ONCE = 1
"""Threads preparing and creating queued steps at once: concurrent creations only race each
other for the database's write lock."""
MAX_QUEUE_SECONDS = 2.0
"""Longest a creation waits for its turn among :data:`CREATING_AT_ONCE` (then it goes anyway)."""


class HoldersFirst:
    """Counts the threads in a holder's stretch; lets optional work wait for them.

    A step that holds its resources spends a short, latency-critical stretch on bookkeeping at
    each end of its allocation: from "allocated" to its user code (renew the lease, publish
    running, set up) and from its user code's return to "released" (save outputs, record its
    end, release). A burst of new steps (``step.map`` over hundreds of items) competes with it
    for the GIL and the database's single writer, although a step being created has nothing
    to run yet. So a holder's thread marks its stretch (:meth:`begin` / :meth:`end`, or
    :meth:`holding`), and a step that will queue for resources is prepared and created inside
    :meth:`creating`: only :data:`CREATING_AT_ONCE` threads create at once, and each first
    waits while any holder is in its stretch, unless no step of the process waits for an
    allocation (``queued``): then capacity may be free and the creation is what fills it.
    Waiters' keep-alive polls are not held back: the Resource Manager combines concurrent
    renewals into one transaction."""

    def __init__(
        self,
        *,
        max_wait: float = MAX_DEFER_SECONDS,
        creating_at_once: int = CREATING_AT_ONCE,
        max_queue: float = MAX_QUEUE_SECONDS,
        queued: Callable[[], int] | None = None,
    ) -> None:
        """``queued``: how many steps of the process wait for an allocation now (None:
        creations always defer to holders)."""
        self._queued = queued
        self._max_wait = max_wait
        self._max_queue = max_queue
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._holding = 0
        self._mine = threading.local()
        self._creating = threading.BoundedSemaphore(creating_at_once)

    @property
    def holding_now(self) -> int:
        """Threads in a stretch now."""
        with self._lock:
            return self._holding

    def begin(self) -> None:
        """This thread enters a holder's stretch (no-op if it is in one)."""
        if getattr(self._mine, "in_stretch", False):
            return
        self._mine.in_stretch = True
        with self._lock:
            self._holding += 1

    def end(self) -> bool:
        """This thread leaves its stretch; False if it was in none (then nothing changes)."""
        if not getattr(self._mine, "in_stretch", False):
            return False
        self._mine.in_stretch = False
        with self._lock:
            self._holding -= 1
            if not self._holding:
                self._idle.notify_all()
        return True

    @contextmanager
    def holding(self) -> Iterator[None]:
        """A stretch for the block (left at its end even if something inside left it)."""
        self.begin()
        try:
            yield
        finally:
            self.end()

    def defer(self) -> float:
        """Block while holders are in their stretch, at most ``max_wait`` seconds, if steps
        wait for an allocation; the time waited (0.0 without holders or waiters: the common
        case costs one uncontended lock)."""
        queued = self._queued
        with self._lock:
            if not self._holding or (queued is not None and not queued()):
                return 0.0
            began = time.monotonic()
            self._idle.wait_for(lambda: not self._holding, self._max_wait)
            return time.monotonic() - began

    @contextmanager
    def creating(self) -> Iterator[None]:
        """The block prepares and creates a queued step: it takes one of the few creation
        turns (waiting at most ``max_queue``) and defers to holders."""
        turn = self._creating.acquire(timeout=self._max_queue)
        try:
            self.defer()
            yield
        finally:
            if turn:
                self._creating.release()
