"""Watch events and watchers of the object store.

A ``WatchEvent`` is one committed change (or a synthetic/bookmark event). A ``Watcher`` is one
client watch: the store offers it every committed change of its resource type, in commit order,
under the store lock; the watcher translates the change through its namespace and selectors the
way a real server does (an object that stops matching is delivered as DELETED, one that starts
matching as ADDED) and queues it. ``next`` hands out deep copies, so consumers never share state.
"""

from __future__ import annotations

import copy
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.kube.emulator.resources import ResourceType

ADDED, MODIFIED, DELETED, BOOKMARK, ERROR = "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"


@dataclass(frozen=True)
class WatchEvent:
    """A change: ``type``, the object after it (for DELETED: its last state, with the deletion's
    version), its ``resource_version`` and its resource type. ``old_object`` is the state before
    a MODIFIED or DELETED change (listeners use it; watch streams do not send it)."""

    type: str
    object: dict[str, Any]
    resource_version: int
    rtype: ResourceType | None
    old_object: dict[str, Any] | None = None


Matcher = Callable[[dict[str, Any]], bool]


class Watcher:
    """One watch on one resource type, optionally limited to a namespace and selectors."""

    def __init__(
        self,
        rtype: ResourceType,
        namespace: str | None,
        matches: Matcher,
        *,
        send_bookmarks: bool,
        on_close: Callable[[Watcher], None],
        current_version: Callable[[], int],
        after_version: int = 0,
    ) -> None:
        self.rtype = rtype
        self.namespace = namespace
        self.send_bookmarks = send_bookmarks
        self._matches = matches
        self._on_close = on_close
        self._current_version = current_version
        self._queue: deque[WatchEvent] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._last_version = 0
        self._after_version = after_version  # changes at or before it are not delivered

    @property
    def closed(self) -> bool:
        return self._closed

    def wants(self, obj: dict[str, Any]) -> bool:
        """Whether ``obj`` is in this watch's namespace and matches its selectors."""
        if self.namespace is not None and obj["metadata"].get("namespace") != self.namespace:
            return False
        return self._matches(obj)

    def offer(self, change: WatchEvent) -> None:
        """Queue ``change`` as this watcher sees it (called by the store under its lock)."""
        event = self.translate(change)
        if event is not None:
            self.push(event)

    def translate(self, change: WatchEvent) -> WatchEvent | None:
        """The event this watcher delivers for a committed change, or None."""
        if change.rtype != self.rtype or change.resource_version <= self._after_version:
            return None
        new_matches = self.wants(change.object)
        obj = change.object
        if change.type == ADDED:
            kind = ADDED if new_matches else None
        elif change.type == DELETED:
            kind = DELETED if new_matches else None
        else:
            old = change.old_object
            old_matches = old is not None and self.wants(old)
            if new_matches:
                kind = MODIFIED if old_matches else ADDED
            elif old_matches and old is not None:
                # Leaving the selector: a real server sends the last matching content, at the
                # version of the change that made it leave.
                kind = DELETED
                version = str(change.resource_version)
                obj = {**old, "metadata": {**old["metadata"], "resourceVersion": version}}
            else:
                kind = None
        if kind is None:
            return None
        return WatchEvent(kind, obj, change.resource_version, change.rtype)

    def push(self, event: WatchEvent) -> None:
        with self._cond:
            if self._closed:
                return
            self._queue.append(event)
            self._cond.notify_all()

    def next(self, timeout: float) -> WatchEvent | None:
        """The next event (a deep copy), or None after ``timeout`` seconds or once closed."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._queue or self._closed, timeout):
                return None
            if not self._queue:
                return None
            event = self._queue.popleft()
            self._last_version = max(self._last_version, event.resource_version)
        return WatchEvent(
            event.type, copy.deepcopy(event.object), event.resource_version, event.rtype
        )

    def bookmark(self) -> WatchEvent | None:
        """A BOOKMARK event at the store's current version, or None while events are queued
        (a bookmark must never claim a version the client has not been sent yet)."""
        version = self._current_version()
        with self._cond:
            if self._queue or self._closed:
                return None
        metadata = {"resourceVersion": str(max(version, self._last_version))}
        return WatchEvent(
            BOOKMARK,
            {"kind": self.rtype.kind, "apiVersion": self.rtype.api_version, "metadata": metadata},
            max(version, self._last_version),
            self.rtype,
        )

    def close(self) -> None:
        """Stop the watch: pending and later ``next`` calls return None."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._queue.clear()
            self._cond.notify_all()
        self._on_close(self)
