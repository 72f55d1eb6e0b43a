"""The object store's change history and open watches: what watches start or resume from, and
what the pages of a list are cut from.

``History`` keeps the last committed changes (bounded: the oldest are forgotten past the limit,
and ``compact`` forgets them all; a watch or a list continuation from a forgotten version then
gets 410 Expired), offers every recorded change to the open watchers, and builds a list's page
(a later page from the objects as they were when the first was cut, rebuilt from the history).
It has no lock of its own: ``ObjectStore`` calls it with its lock held, and the stored dicts it
is given are never mutated.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from tests.kube.emulator import errors, object_rules
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.object_rules import Key
from tests.kube.emulator.resources import ResourceType
from tests.kube.emulator.watchers import ADDED, Matcher, Watcher, WatchEvent


class History:
    """The bounded event history and the open watchers of one store (see the module docstring)."""

    def __init__(self, limit: int) -> None:
        self._changes: deque[WatchEvent] = deque()
        self._limit = limit
        self._compacted_version = 0  # a watch may resume from any version >= this
        self._watchers: set[Watcher] = set()

    def record(self, change: WatchEvent) -> None:
        """Append a committed change (forgetting the oldest past the limit) and offer it to
        every open watcher."""
        self._changes.append(change)
        while len(self._changes) > self._limit:
            dropped = self._changes.popleft()
            self._compacted_version = dropped.resource_version
        for watcher in self._watchers:
            watcher.offer(change)

    def open(
        self,
        watcher: Watcher,
        objects: dict[Key, dict[str, Any]],
        resource_version: int | None,
    ) -> None:
        """Start ``watcher`` and keep offering it changes. No version (or 0): a synthetic ADDED
        for every object of ``objects`` (its resource type's current ones) it wants; a version:
        every later recorded change; 410 Expired if that version was forgotten."""
        if not resource_version:
            for key in sorted(objects, key=object_rules.storage_key):
                obj = objects[key]
                if watcher.wants(obj):
                    version = int(obj["metadata"]["resourceVersion"])
                    watcher.push(WatchEvent(ADDED, obj, version, watcher.rtype))
        else:
            if resource_version < self._compacted_version:
                raise errors.expired(resource_version, self._compacted_version)
            for change in self._changes:
                if change.resource_version > resource_version:
                    watcher.offer(change)
        self._watchers.add(watcher)

    def forget(self, watcher: Watcher) -> None:
        """Stop offering changes to a closed watcher."""
        self._watchers.discard(watcher)

    def watchers(self) -> list[Watcher]:
        """The open watchers."""
        return list(self._watchers)

    def compact(self, version: int) -> None:
        """Forget every change: watches from any version older than ``version`` get 410."""
        self._changes.clear()
        self._compacted_version = version

    def list_page(
        self,
        rtype: ResourceType,
        objects: dict[Key, dict[str, Any]],
        namespace: str | None,
        matches: Matcher,
        *,
        current_version: int,
        limit: int | None,
        continue_token: str | None,
        count_remaining: bool,
    ) -> dict[str, Any]:
        """A real-shaped ``<Kind>List`` of the ``objects`` (``rtype``'s current ones) in
        ``namespace`` (None: all) that match, in etcd key order (``namespace/name``), at most
        ``limit`` of them. A page after the first (``continue_token``) shows the state the
        first page was cut from, as etcd does (410 Expired once that version is forgotten);
        ``remainingItemCount`` only if ``count_remaining`` (a real server does not count when
        filtering)."""
        list_version, after = object_rules.decode_continue(continue_token)
        if list_version is None:
            list_version = current_version
        else:
            if list_version < self._compacted_version:
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue value from the response.",
                )
            objects = self._objects_at(rtype, objects, list_version)
        start = None if after is None else object_rules.storage_key(after)
        found = [
            objects[key]
            for key in sorted(objects, key=object_rules.storage_key)
            if (namespace is None or key[0] == namespace)
            and (start is None or object_rules.storage_key(key) > start)
            and matches(objects[key])
        ]
        page = found if not limit or limit <= 0 else found[:limit]
        metadata: dict[str, Any] = {"resourceVersion": str(list_version)}
        if len(page) < len(found):
            last = page[-1]["metadata"]
            metadata["continue"] = object_rules.encode_continue(
                list_version, (last.get("namespace", ""), last["name"])
            )
            if count_remaining:
                metadata["remainingItemCount"] = len(found) - len(page)
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": [object_rules.list_item(obj) for obj in page],
        }

    def _objects_at(
        self, rtype: ResourceType, objects: dict[Key, dict[str, Any]], version: int
    ) -> dict[Key, dict[str, Any]]:
        """The objects of ``rtype`` as they were at ``version`` (the history must reach back to
        it): ``objects`` (today's) with every later change undone."""
        past = dict(objects)
        for change in reversed(self._changes):
            if change.resource_version <= version:
                break
            if change.rtype != rtype:
                continue
            metadata = change.object["metadata"]
            key = (metadata.get("namespace") or "", metadata["name"])
            if change.old_object is None:
                past.pop(key, None)
            else:
                past[key] = change.old_object
        return past
