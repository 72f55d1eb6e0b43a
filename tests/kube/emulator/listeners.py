"""Delivery of the store's committed changes to its listeners (the controllers), in order.

The store ``enqueue``s each change while it still holds its own lock, so the queue is in commit
order; after releasing that lock it calls ``deliver``. Only one thread delivers at a time, and a
listener's own writes are queued rather than delivered re-entrantly: whoever is delivering (maybe
further up the same thread's stack) also delivers them, after the current listener returns. Each
listener gets its own deep copies; a failing listener is logged and the others still run.
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
        self._pending: deque[WatchEvent] = deque()
        self._delivering = False

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def enqueue(self, change: WatchEvent) -> None:
        """Queue a committed change (the store calls this in commit order)."""
        with self._lock:
            if self._listeners:
                self._pending.append(change)

    def deliver(self) -> None:
        """Deliver queued changes unless another call is already doing so."""
        while True:
            with self._lock:
                if self._delivering or not self._pending:
                    return
                self._delivering = True
                change = self._pending.popleft()
                listeners = list(self._listeners)
            try:
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
            finally:
                with self._lock:
                    self._delivering = False
