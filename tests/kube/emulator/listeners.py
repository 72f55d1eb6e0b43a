"""Delivery of the store's committed changes to its listeners (the controllers), in commit order.

The store ``enqueue``s each change while it still holds its own lock, so the queue is in commit
order, and calls ``deliver`` after releasing that lock. One thread at a time holds the delivery
role and calls the listeners with one change after the other; each listener gets its own deep
copies, and a failing listener is logged while the others still run.

Fairness: a change a writer queues is the root of a cascade, the changes listeners write while it
(or a change of its cascade) is being delivered; those are queued behind, never delivered
re-entrantly. A writer that finds the role free takes it and delivers, in queue order, until its
own cascades are delivered (so a lone caller returns with the controllers settled on its write),
then lets go: its wait is bounded by the changes queued before the end of its cascade, never by
what other writers keep queueing. A writer that finds the role taken returns at once, its
cascades turn orphans, and whoever lets go of the role while orphans are queued hands it to a
helper daemon thread, which delivers until none is left and then ends. No writer ever waits for
another thread: the controllers write while holding their own lock, which a listener may need.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections import deque
from collections.abc import Callable

from tests.kube.emulator.watchers import WatchEvent

log = logging.getLogger(__name__)

Listener = Callable[[WatchEvent], None]


class ListenerQueue:
    """The subscribed listeners and the committed changes not yet delivered to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Listener] = []
        self._pending: deque[tuple[int, WatchEvent]] = deque()  # (root, change), commit order
        self._outstanding: dict[int, int] = {}  # root -> its changes queued or being delivered
        self._orphans: set[int] = set()  # outstanding roots whose writers did not wait;
        # empty whenever nobody is _busy, so a writer taking the role finds no orphan queued
        self._last_ticket = 0
        self._busy = False  # someone holds the delivery role (maybe a helper not yet running)
        self._deliverer: int | None = None  # the thread delivering right now
        self._current_root = 0  # the root of the change being delivered
        self._mine = threading.local()  # .roots: what this thread queued since its deliver()

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def enqueue(self, change: WatchEvent) -> int | None:
        """Queue a committed change (the store calls this in commit order); its ticket, or
        None when nobody listens. A listener's write belongs to the cascade being delivered."""
        with self._lock:
            if not self._listeners:
                return None
            self._last_ticket += 1
            if self._deliverer == threading.get_ident():
                root = self._current_root
            else:
                root = self._last_ticket
                self._roots().append(root)
            self._pending.append((root, change))
            self._outstanding[root] = self._outstanding.get(root, 0) + 1
            return self._last_ticket

    def deliver(self) -> None:
        """Deliver this thread's queued changes and their cascades, with every change queued
        before them, unless another thread holds the role (then return at once)."""
        mine = self._roots()
        roots, mine[:] = list(mine), []
        with self._lock:
            waiting = [root for root in roots if root in self._outstanding]
            if not waiting:  # delivered already, or a listener's write (it has no roots)
                return
            if self._busy:
                self._orphans.update(waiting)
                return
            self._busy = True
        self._run(lambda: not any(root in self._outstanding for root in waiting))

    # ---- internals ---------------------------------------------------------------------------

    def _roots(self) -> list[int]:
        roots: list[int] | None = getattr(self._mine, "roots", None)
        if roots is None:
            roots = self._mine.roots = []
        return roots

    def _help(self) -> None:
        """The helper thread's body: deliver until no orphan is queued."""
        self._run(lambda: not self._orphans)

    def _run(self, done: Callable[[], bool]) -> None:
        """Deliver in queue order until ``done()`` (checked under the lock), holding the role;
        then hand the role to a helper if orphans are queued, else let go of it."""
        with self._lock:
            self._deliverer = threading.get_ident()
        try:
            while True:
                with self._lock:
                    if not self._pending or done():
                        break
                    root, change = self._pending.popleft()
                    self._current_root = root
                    listeners = list(self._listeners)
                try:
                    _call(listeners, change)
                finally:
                    with self._lock:
                        self._delivered(root)
        finally:
            with self._lock:
                self._deliverer = None
                handing_over = bool(self._orphans)
                self._busy = handing_over
            if handing_over:
                self._start_helper()

    def _start_helper(self) -> None:
        helper = threading.Thread(target=self._help, name="kube-listeners", daemon=True)
        try:
            helper.start()
        except RuntimeError:  # no new thread at interpreter shutdown: deliver them here
            self._help()

    def _delivered(self, root: int) -> None:
        left = self._outstanding[root] - 1
        if left:
            self._outstanding[root] = left
        else:
            del self._outstanding[root]
            self._orphans.discard(root)


def _call(listeners: list[Listener], change: WatchEvent) -> None:
    for listener in listeners:
        event = WatchEvent(
            change.type,
            copy.deepcopy(change.object),
            change.resource_version,
            change.rtype,
            copy.deepcopy(change.old_object),
        )
        try:
            listener(event)
        except Exception:
            log.exception("store listener %r failed on %s", listener, change.type)
