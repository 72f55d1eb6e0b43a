"""The emulator's object store: every object, one global resourceVersion, the event history.

``ObjectStore`` owns all objects as plain dicts keyed by resource type, namespace and name. Every
committed change takes the next global resourceVersion, is appended to a bounded event history
(watches resume from it; ``compact`` forgets it, so older versions get 410), is offered to the
open watchers, and is then handed to the subscribed listeners (the controllers) outside the lock,
in commit order (``listeners.py``). One lock guards all state; every object crossing the API is
a deep copy, and a stored dict is never mutated after it is committed (history entries share it).

The event history, the open watches and list paging are ``history.py``'s (``History``).

Write semantics follow a real kube-apiserver: defaulting and validation on every write,
``metadata.namespace`` from the URL, generateName, optimistic concurrency on a stale
resourceVersion, status only through the ``/status`` subresource for kinds that have one,
graceful deletion of bound pods, finalizers and deletion propagation, namespace termination.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from tests.kube.emulator import errors, object_rules, patches, selectors, validation
from tests.kube.emulator.admission import check_service_account
from tests.kube.emulator.clock import Clock
from tests.kube.emulator.defaults import apply_defaults
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.history import History
from tests.kube.emulator.listeners import Listener, ListenerQueue
from tests.kube.emulator.object_rules import Key
from tests.kube.emulator.resources import (
    NAMESPACES,
    PODS,
    RESOURCES,
    SERVICEACCOUNTS,
    ResourceType,
)
from tests.kube.emulator.watchers import ADDED, DELETED, MODIFIED, Watcher, WatchEvent

__all__ = ["ObjectStore", "WatchEvent", "Watcher"]

HISTORY_LIMIT = 10_000
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})


class ObjectStore:
    """Thread-safe store of API objects with watch support (see the module docstring)."""

    def __init__(self, clock: Clock, *, history_limit: int = HISTORY_LIMIT) -> None:
        self.clock = clock
        self.resource_version = 0
        self._lock = threading.Lock()
        self._objects: dict[ResourceType, dict[Key, dict[str, Any]]] = {r: {} for r in RESOURCES}
        self._history = History(history_limit)
        self._listeners = ListenerQueue()
        self.service_account_admission = False
        """Refuse pods naming a service account their namespace lacks (``admission``)."""
        for name in INITIAL_NAMESPACES:
            self.create(NAMESPACES, None, {"metadata": {"name": name}})

    # ------------------------------------------------------------------------------ reads

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            return copy.deepcopy(self._existing(rtype, namespace, name))

    def list(
        self,
        rtype: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> dict[str, Any]:
        """A real-shaped ``<Kind>List``; items in etcd key order (``namespace/name``)."""
        matches = self._matcher(rtype, label_selector, field_selector)
        with self._lock:
            return self._history.list_page(
                rtype,
                self._objects[rtype],
                namespace,
                matches,
                current_version=self.resource_version,
                limit=limit,
                continue_token=continue_token,
                count_remaining=not label_selector and not field_selector,
            )

    def matching(
        self,
        rtype: ResourceType,
        namespace: str | None,
        where: Callable[[dict[str, Any]], bool],
    ) -> list[dict[str, Any]]:
        """For controllers: the items ``list(rtype, namespace)`` would hold, only those for
        which ``where`` (shown the stored object: it must not change it) holds; only they are
        copied, so looking for a few objects among many stays cheap."""
        with self._lock:
            objects = self._objects[rtype]
            keys = [k for k in objects if (namespace is None or k[0] == namespace)]
            found = [k for k in keys if where(objects[k])]
            found.sort(key=object_rules.storage_key)
            return [object_rules.list_item(objects[k]) for k in found]

    def namespaces(self) -> list[dict[str, Any]]:
        """Test helper: every namespace (deep copies)."""
        return self.objects_of(NAMESPACES)

    def objects_of(self, rtype: ResourceType) -> list[dict[str, Any]]:
        """Test helper: every object of ``rtype`` in key order (deep copies)."""
        with self._lock:
            keys = sorted(self._objects[rtype], key=object_rules.storage_key)
            return [copy.deepcopy(self._objects[rtype][k]) for k in keys]

    # ------------------------------------------------------------------------------ create

    def create(
        self,
        rtype: ResourceType,
        namespace: str | None,
        body: dict[str, Any],
        *,
        dry_run: bool = False,
        internal: bool = False,
    ) -> dict[str, Any]:
        """POST: a new object from ``body``; ``internal`` (controllers) keeps the body's status."""
        obj = object_rules.prepare_body(rtype, namespace, body)
        object_rules.stamp_new(rtype, obj, self.clock.now(), keep_status=internal)
        metadata = obj["metadata"]
        generate_name = (
            None if (body.get("metadata") or {}).get("name") else metadata.get("generateName")
        )
        apply_defaults(rtype, obj, creating=True)
        validation.validate(rtype, obj)
        with self._lock:
            self._check_namespace_open(rtype, namespace, metadata["name"])
            if rtype is PODS and self.service_account_admission:
                check_service_account(self._objects[SERVICEACCOUNTS], obj, generate_name)
            key = (metadata.get("namespace", ""), metadata["name"])
            while key in self._objects[rtype] and generate_name:
                metadata["name"] = object_rules.generated_name(generate_name)
                key = (key[0], metadata["name"])
            if key in self._objects[rtype]:
                error = errors.already_exists(rtype, metadata["name"])
                if self._objects[rtype][key]["metadata"].get("deletionTimestamp"):
                    error.message = f"object is being deleted: {error.message}"
                raise error
            if dry_run:
                return copy.deepcopy(obj)
            self._commit(rtype, ADDED, obj, None)
            result = copy.deepcopy(obj)
        self._listeners.deliver()
        return result

    # ------------------------------------------------------------------------------ updates

    def replace(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        body: dict[str, Any],
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PUT: 409 on a stale metadata.resourceVersion; status rules as in the module doc."""
        obj = object_rules.prepare_body(rtype, namespace, body)
        body_name = obj["metadata"].get("name")
        if body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        return self._update(rtype, namespace, name, lambda _old: obj, subresource, dry_run)

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch: Any,
        content_type: str,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        """PATCH with a merge, strategic merge or JSON patch (415 for another content type)."""
        media_type = object_rules.patch_media_type(content_type)

        names_version = _patch_names_version(patch, media_type)

        def patched(old: dict[str, Any]) -> dict[str, Any]:
            base = copy.deepcopy(old)
            if not names_version:  # unconditional: a concurrent write makes it re-apply, not 409
                base["metadata"].pop("resourceVersion", None)
            new = patches.apply_patch(base, patch, media_type, rtype.kind)
            return object_rules.patched_object(rtype, name, new)

        return self._update(rtype, namespace, name, patched, subresource, dry_run)

    def update_internal(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        mutate: Callable[[dict[str, Any]], None],
    ) -> dict[str, Any]:
        """For controllers: ``mutate`` a copy (spec and status alike) and commit it, no checks
        other than that the object exists. Finishes a deletion whose finalizers are now gone."""
        with self._lock:
            old = self._existing(rtype, namespace, name)
            new = copy.deepcopy(old)
            mutate(new)
            for field in ("name", "namespace", "uid", "creationTimestamp"):  # the identity stays
                if field in old["metadata"]:
                    new["metadata"][field] = old["metadata"][field]
            object_rules.carry_generation(rtype, old, new)
            self._commit_update(rtype, old, new)
            result = copy.deepcopy(new)
        self._listeners.deliver()
        return result

    def remove_finalizer(
        self, rtype: ResourceType, namespace: str | None, name: str, finalizer: str
    ) -> None:
        """For the garbage collector: drop ``finalizer`` (no-op if absent or object gone)."""

        def drop(obj: dict[str, Any]) -> None:
            remaining = [f for f in obj["metadata"].get("finalizers") or [] if f != finalizer]
            if remaining:
                obj["metadata"]["finalizers"] = remaining
            else:
                obj["metadata"].pop("finalizers", None)

        try:
            self.update_internal(rtype, namespace, name, drop)
        except ApiError as error:
            if error.code != 404:
                raise

    def bind_pod(self, namespace: str, name: str, node_name: str) -> dict[str, Any]:
        """POST pods/<name>/binding: sets spec.nodeName once (409 if already bound)."""
        with self._lock:
            old = self._existing(PODS, namespace, name)
            new = object_rules.bound_pod(old, node_name, self.clock.now())
            self._commit_update(PODS, old, new)
            result = copy.deepcopy(new)
        self._listeners.deliver()
        return result

    # ------------------------------------------------------------------------------ delete

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        dry_run: bool = False,
        preconditions: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """DELETE. Bound, unfinished pods get a deletionTimestamp and wait for the kubelet's
        grace-0 delete; objects with finalizers (``foregroundDeletion`` for Foreground,
        ``orphan`` for Orphan, the default for Jobs) wait for them to be removed (the garbage
        collector's job); a namespace turns Terminating until its finaliser clears
        ``spec.finalizers``; anything else goes now. The reply is the object, or a Success
        ``Status`` for kinds a real server answers that way."""
        object_rules.check_propagation_policy(rtype, name, propagation_policy)
        if rtype == NAMESPACES and name in UNDELETABLE_NAMESPACES:
            raise ApiError(
                403,
                "Forbidden",
                f'namespaces "{name}" is forbidden: this namespace may not be deleted',
                {"name": name, "kind": "namespaces"},
            )
        with self._lock:
            old = self._existing(rtype, namespace, name)
            object_rules.check_preconditions(rtype, old, preconditions or {})
            new = copy.deepcopy(old)
            outcome = object_rules.mark_for_deletion(
                rtype,
                new,
                grace=grace_period_seconds,
                policy=propagation_policy,
                now=self.clock.now(),
            )
            if outcome == "unchanged":
                return copy.deepcopy(old)
            removed = outcome in ("removed", "recorded")
            if dry_run:
                return object_rules.deleted_reply(rtype, new) if removed else copy.deepcopy(new)
            if outcome == "recorded":  # the deletion is stored first, then carried out
                self._commit(rtype, MODIFIED, new, old)
                old, new = new, copy.deepcopy(new)
            self._commit(rtype, DELETED if removed else MODIFIED, new, old)
            reply = object_rules.deleted_reply(rtype, new) if removed else copy.deepcopy(new)
        self._listeners.deliver()
        return reply

    # ------------------------------------------------------------------------------ watch

    def watch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: int | None = None,
        send_bookmarks: bool = False,
    ) -> Watcher:
        """Open a watch. No version (or 0): synthetic ADDED for every current object first;
        a version: every later change; 410 Expired if that version was compacted away."""
        matches = self._matcher(rtype, label_selector, field_selector)
        watcher = Watcher(
            rtype,
            namespace,
            matches,
            send_bookmarks=send_bookmarks,
            on_close=self._forget_watcher,
            current_version=self._current_version,
            after_version=resource_version or 0,
        )
        with self._lock:
            self._history.open(watcher, self._objects[rtype], resource_version)
        return watcher

    def compact(self) -> None:
        """Forget the event history: watches from any version older than now get 410."""
        with self._lock:
            self._history.compact(self.resource_version)

    def drop_watches(self) -> None:
        """Close every open watch (their streams end), as a restarting server does."""
        with self._lock:
            watchers = self._history.watchers()
        for watcher in watchers:
            watcher.close()

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with every committed change, after the commit, outside the lock,
        in commit order (see ``listeners.py``: a listener's own writes queue behind)."""
        self._listeners.subscribe(listener)

    def _current_version(self) -> int:
        with self._lock:
            return self.resource_version

    def _forget_watcher(self, watcher: Watcher) -> None:
        with self._lock:
            self._history.forget(watcher)

    # ------------------------------------------------------------------------------ internals

    def _existing(self, rtype: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        key = ((namespace or "") if rtype.namespaced else "", name)
        obj = self._objects[rtype].get(key)
        if obj is None:
            raise errors.not_found(rtype, name)
        return obj

    def _matcher(
        self, rtype: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> Callable[[dict[str, Any]], bool]:
        labels = selectors.parse_label_selector(label_selector or "")
        fields = selectors.parse_field_selector(field_selector or "", rtype.kind)

        def matches(obj: dict[str, Any]) -> bool:
            return labels.matches(obj["metadata"].get("labels") or {}) and fields.matches(obj)

        return matches

    def _check_namespace_open(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        if not rtype.namespaced:
            return
        ns = self._objects[NAMESPACES].get(("", namespace or ""))
        if ns is None:
            raise errors.not_found(NAMESPACES, namespace or "")
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.namespace_terminating(rtype, name, namespace or "")

    def _update(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        produce: Callable[[dict[str, Any]], dict[str, Any]],
        subresource: str | None,
        dry_run: bool,
    ) -> dict[str, Any]:
        """Shared PUT/PATCH path: ``produce`` builds the requested object from the current one."""
        if subresource not in (None, "status", "finalize") or (
            subresource == "status" and not rtype.has_status
        ):
            raise errors.not_found(rtype, name)
        if subresource == "finalize" and rtype != NAMESPACES:
            raise errors.not_found(rtype, name)
        with self._lock:
            old = self._existing(rtype, namespace, name)
            requested = produce(copy.deepcopy(old))
        # Defaulting and validation run outside the lock; the commit re-checks the version.
        old_version = old["metadata"]["resourceVersion"]
        wanted_version = requested["metadata"].get("resourceVersion")
        if wanted_version and wanted_version != old_version:
            raise errors.conflict(rtype, name, errors.STALE_OBJECT)
        object_rules.check_preconditions(rtype, old, {"uid": requested["metadata"].get("uid")})
        new = object_rules.merge_update(rtype, old, requested, subresource)
        new["metadata"]["resourceVersion"] = old_version
        apply_defaults(rtype, new, creating=False)
        validation.validate(rtype, new, old=old)
        with self._lock:
            current = self._existing(rtype, namespace, name)
            if current["metadata"]["resourceVersion"] != old_version:
                if wanted_version:
                    raise errors.conflict(rtype, name, errors.STALE_OBJECT)
                # Unconditional update raced with another write: redo it against the new state.
                retry = True
            else:
                retry = False
                if dry_run:
                    return copy.deepcopy(new)
                object_rules.carry_generation(rtype, old, new)
                self._commit_update(rtype, old, new)
                result = copy.deepcopy(new)
        if retry:
            return self._update(rtype, namespace, name, produce, subresource, dry_run)
        self._listeners.deliver()
        return result

    def _commit_update(self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Commit ``new`` over ``old`` (lock held): MODIFIED, or DELETED when a deletion whose
        finalizers are all gone can now finish; nothing at all when nothing changed (a real
        server neither bumps the version nor tells watchers about a no-op write)."""
        if not new["metadata"].get("finalizers"):
            new["metadata"].pop("finalizers", None)
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if new == old:
            return
        finished = object_rules.deletion_can_finish(rtype, new)
        self._commit(rtype, DELETED if finished else MODIFIED, new, old)

    def _commit(
        self,
        rtype: ResourceType,
        kind: str,
        obj: dict[str, Any],
        old: dict[str, Any] | None,
    ) -> None:
        """Take the next version, store or drop ``obj`` and record the event (lock held).
        ``obj`` belongs to the store from here on and is never mutated again."""
        self.resource_version += 1
        obj["metadata"]["resourceVersion"] = str(self.resource_version)
        key = (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
        if kind == DELETED:
            self._objects[rtype].pop(key, None)
        else:
            self._objects[rtype][key] = obj
        change = WatchEvent(kind, obj, self.resource_version, rtype, old)
        self._history.record(change)
        self._listeners.enqueue(change)


def _patch_names_version(patch: Any, media_type: str) -> bool:
    """Whether a patch states ``metadata.resourceVersion`` (a precondition, as on a real
    server); a patch that does not applies to whatever version is current."""
    if media_type == patches.JSON_PATCH:
        operations = patch if isinstance(patch, list) else []
        return any(
            isinstance(op, dict) and str(op.get("path", "")).startswith("/metadata/resourceVersion")
            for op in operations
        )
    metadata = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(metadata, dict) and "resourceVersion" in metadata
