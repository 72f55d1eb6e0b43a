"""The emulator's object store: every object, one global resourceVersion, the event history.

``ObjectStore`` owns all objects as plain dicts keyed by resource type, namespace and name. Every
committed change takes the next global resourceVersion, is appended to a bounded event history
(watches resume from it; ``compact`` forgets it, so older versions get 410), is offered to the
open watchers, and is then handed to the subscribed listeners (the controllers) outside the lock,
in commit order. One lock guards all state; every object crossing the API is a deep copy, and a
stored dict is never mutated after it is committed (history entries share it safely).

Write semantics follow a real kube-apiserver: defaulting and validation on every write,
``metadata.namespace`` from the URL, generateName, optimistic concurrency on a stale
resourceVersion, status only through the ``/status`` subresource for kinds that have one,
graceful deletion of bound pods, finalizers and deletion propagation, namespace termination.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import logging
import secrets
import threading
import uuid
from collections import deque
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from tests.kube.emulator import errors, patches, selectors, validation
from tests.kube.emulator.clock import Clock, rfc3339
from tests.kube.emulator.defaults import apply_defaults
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import CRONJOBS, JOBS, NAMESPACES, PODS, RESOURCES, ResourceType
from tests.kube.emulator.watchers import ADDED, DELETED, MODIFIED, Watcher, WatchEvent

__all__ = ["ObjectStore", "WatchEvent", "Watcher"]

log = logging.getLogger(__name__)

HISTORY_LIMIT = 10_000
INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# Kinds whose metadata.generation counts spec changes (pods on 1.2x servers have none).
GENERATION_KINDS = frozenset({JOBS, CRONJOBS})
# Kinds whose DELETE answers with the object; the others answer with a Success Status.
RETURNS_DELETED_OBJECT = frozenset({PODS, NAMESPACES})
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_CONTENT_TYPES = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)

Key = tuple[str, str]
Listener = Callable[[WatchEvent], None]


class ObjectStore:
    """Thread-safe store of API objects with watch support (see the module docstring)."""

    def __init__(self, clock: Clock, *, history_limit: int = HISTORY_LIMIT) -> None:
        self.clock = clock
        self.resource_version = 0
        self._lock = threading.Lock()
        self._objects: dict[ResourceType, dict[Key, dict[str, Any]]] = {r: {} for r in RESOURCES}
        self._history: deque[WatchEvent] = deque()
        self._history_limit = history_limit
        self._compacted_version = 0  # a watch may resume from any version >= this
        self._watchers: set[Watcher] = set()
        self._listeners: list[Listener] = []
        self._pending: deque[WatchEvent] = deque()
        self._dispatching = False
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
        """A real-shaped ``<Kind>List``; items sorted by namespace and name (etcd key order)."""
        matches = self._matcher(rtype, label_selector, field_selector)
        with self._lock:
            list_version, after = self._decode_continue(continue_token)
            if list_version is not None and list_version < self._compacted_version:
                raise ApiError(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter, or use "
                    "the continue value from the response.",
                )
            if list_version is None:
                list_version = self.resource_version
            keys = sorted(self._objects[rtype])
            found = [
                self._objects[rtype][key]
                for key in keys
                if (namespace is None or key[0] == namespace)
                and (after is None or key > after)
                and matches(self._objects[rtype][key])
            ]
            page = found if not limit or limit <= 0 else found[:limit]
            items = [_list_item(obj) for obj in page]
            metadata: dict[str, Any] = {"resourceVersion": str(list_version)}
            if len(page) < len(found):
                last = page[-1]["metadata"]
                metadata["continue"] = _encode_continue(
                    list_version, (last.get("namespace", ""), last["name"])
                )
                metadata["remainingItemCount"] = len(found) - len(page)
        return {
            "kind": rtype.list_kind,
            "apiVersion": rtype.api_version,
            "metadata": metadata,
            "items": items,
        }

    def namespaces(self) -> list[dict[str, Any]]:
        """Test helper: every namespace (deep copies)."""
        return self.objects_of(NAMESPACES)

    def objects_of(self, rtype: ResourceType) -> list[dict[str, Any]]:
        """Test helper: every object of ``rtype`` in key order (deep copies)."""
        with self._lock:
            return [copy.deepcopy(self._objects[rtype][k]) for k in sorted(self._objects[rtype])]

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
        obj = self._prepare_body(rtype, namespace, body)
        metadata = obj["metadata"]
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(field, None)
        if rtype.has_status and not internal:
            obj.pop("status", None)
        metadata["uid"] = str(uuid.uuid4())
        metadata["creationTimestamp"] = rfc3339(self.clock.now())
        if rtype in GENERATION_KINDS:
            metadata["generation"] = 1
        else:
            metadata.pop("generation", None)
        generate_name = metadata.get("generateName")
        if not metadata.get("name") and generate_name:
            metadata["name"] = generate_name + _random_suffix()
        if not metadata.get("name"):
            raise errors.invalid(
                rtype,
                "",
                [
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value: name or generateName is required",
                        "field": "metadata.name",
                    }
                ],
            )
        apply_defaults(rtype, obj, creating=True)
        validation.validate(rtype, obj)
        with self._lock:
            self._check_namespace_open(rtype, namespace, metadata["name"])
            key = (metadata.get("namespace", ""), metadata["name"])
            while (
                key in self._objects[rtype]
                and generate_name
                and not body.get("metadata", {}).get("name")
            ):
                metadata["name"] = generate_name + _random_suffix()
                key = (key[0], metadata["name"])
            if key in self._objects[rtype]:
                raise errors.already_exists(rtype, metadata["name"])
            if dry_run:
                return copy.deepcopy(obj)
            self._commit(rtype, ADDED, obj, None)
            result = copy.deepcopy(obj)
        self._dispatch()
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
        obj = self._prepare_body(rtype, namespace, body)
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
        media_type = content_type.split(";", 1)[0].strip().lower()
        if media_type not in _CONTENT_TYPES:
            raise ApiError(
                415,
                "UnsupportedMediaType",
                f"the body of the request was in an unknown format - accepted media types "
                f"include: {', '.join(_CONTENT_TYPES)}",
            )

        def patched(old: dict[str, Any]) -> dict[str, Any]:
            new = patches.apply_patch(copy.deepcopy(old), patch, media_type, rtype.kind)
            if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
                raise errors.bad_request("the patch did not produce an object")
            new.setdefault("metadata", {})
            new["kind"], new["apiVersion"] = rtype.kind, rtype.api_version
            if new["metadata"].get("name", name) != name:
                raise errors.invalid(rtype, name, [_immutable("metadata.name", new)])
            return new

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
            new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
            self._carry_generation(rtype, old, new)
            self._commit_update(rtype, old, new)
            result = copy.deepcopy(new)
        self._dispatch()
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
            bound_to = old["spec"].get("nodeName")
            if bound_to or old["metadata"].get("deletionTimestamp"):
                why = (
                    f'pod {name} is already assigned to node "{bound_to}"'
                    if bound_to
                    else f"pod {name} is being deleted, cannot be assigned to a host"
                )
                raise ApiError(
                    409,
                    "Conflict",
                    f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
                    {"name": name, "kind": "pods/binding"},
                )
            new = copy.deepcopy(old)
            new["spec"]["nodeName"] = node_name
            conditions = new.setdefault("status", {}).setdefault("conditions", [])
            conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
            conditions.append(
                {
                    "type": "PodScheduled",
                    "status": "True",
                    "lastProbeTime": None,
                    "lastTransitionTime": rfc3339(self.clock.now()),
                }
            )
            self._commit_update(PODS, old, new)
            result = copy.deepcopy(new)
        self._dispatch()
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
        if propagation_policy not in (None, "Orphan", "Background", "Foreground"):
            raise errors.invalid(
                rtype,
                name,
                [
                    {
                        "reason": "FieldValueNotSupported",
                        "message": f'Unsupported value: "{propagation_policy}": supported '
                        'values: "Foreground", "Background", "Orphan"',
                        "field": "propagationPolicy",
                    }
                ],
            )
        if grace_period_seconds is not None and grace_period_seconds < 0:
            grace_period_seconds = 1
        with self._lock:
            old = self._existing(rtype, namespace, name)
            self._check_preconditions(rtype, old, preconditions or {})
            new = copy.deepcopy(old)
            outcome = self._deletion_outcome(rtype, new, grace_period_seconds, propagation_policy)
            if dry_run:
                return (
                    copy.deepcopy(new) if outcome != "removed" else self._deleted_reply(rtype, new)
                )
            if outcome == "unchanged":
                return copy.deepcopy(old)
            if outcome == "removed":
                self._commit(rtype, DELETED, new, old)
                result = self._deleted_reply(rtype, new)
            else:
                self._commit(rtype, MODIFIED, new, old)
                result = copy.deepcopy(new)
        self._dispatch()
        return result

    def _deletion_outcome(
        self,
        rtype: ResourceType,
        obj: dict[str, Any],
        grace: int | None,
        policy: str | None,
    ) -> str:
        """Mark ``obj`` (a copy) for deletion; say whether it is "removed" now, "marked" (kept
        with a deletionTimestamp) or "unchanged" (already being deleted, nothing new)."""
        metadata = obj["metadata"]
        now = self.clock.now()
        grace = self._pod_grace(obj, grace) if rtype == PODS else 0
        if metadata.get("deletionTimestamp"):
            current = metadata.get("deletionGracePeriodSeconds") or 0
            if rtype == PODS and grace < current:
                if grace == 0 and not metadata.get("finalizers"):
                    return "removed"
                metadata["deletionGracePeriodSeconds"] = grace
                metadata["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace))
                return "marked"
            return "unchanged"
        if policy is None:
            policy = "Orphan" if rtype == JOBS else "Background"
        finalizers = list(metadata.get("finalizers") or [])
        if policy == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
            finalizers.append(FOREGROUND_FINALIZER)
        if policy == "Orphan" and ORPHAN_FINALIZER not in finalizers:
            finalizers.append(ORPHAN_FINALIZER)
        # The orphan finalizer only matters when something could own-reference this object.
        if policy == "Orphan" and rtype not in (JOBS, CRONJOBS):
            finalizers.remove(ORPHAN_FINALIZER)
        waiting_namespace = rtype == NAMESPACES and obj.get("spec", {}).get("finalizers")
        if not finalizers and not waiting_namespace and grace == 0:
            return "removed"
        if finalizers:
            metadata["finalizers"] = finalizers
        metadata["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace))
        metadata["deletionGracePeriodSeconds"] = grace
        if rtype in GENERATION_KINDS:
            metadata["generation"] = metadata.get("generation", 1) + 1
        if rtype == NAMESPACES:
            obj.setdefault("status", {})["phase"] = "Terminating"
        return "marked"

    @staticmethod
    def _pod_grace(pod: dict[str, Any], requested: int | None) -> int:
        """Grace for a pod: unbound or finished pods go at once, others wait for the kubelet."""
        if not pod.get("spec", {}).get("nodeName"):
            return 0
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            return requested
        return int(pod["spec"].get("terminationGracePeriodSeconds", 30))

    @staticmethod
    def _deleted_reply(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        if rtype in RETURNS_DELETED_OBJECT:
            return copy.deepcopy(obj)
        details: dict[str, Any] = {"name": obj["metadata"]["name"]}
        if rtype.group:
            details["group"] = rtype.group
        details["kind"] = rtype.plural
        details["uid"] = obj["metadata"]["uid"]
        return {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": details,
        }

    def _check_preconditions(
        self, rtype: ResourceType, obj: dict[str, Any], preconditions: dict[str, Any]
    ) -> None:
        name = obj["metadata"]["name"]
        for field, label in (("uid", "UID"), ("resourceVersion", "ResourceVersion")):
            wanted = preconditions.get(field)
            actual = obj["metadata"].get(field)
            if wanted is not None and str(wanted) != actual:
                raise errors.conflict(
                    rtype,
                    name,
                    f"Precondition failed: {label} in precondition: {wanted}, "
                    f"{label} in object meta: {actual}",
                )

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
            if not resource_version:
                for key in sorted(self._objects[rtype]):
                    obj = self._objects[rtype][key]
                    if watcher.wants(obj):
                        version = int(obj["metadata"]["resourceVersion"])
                        watcher.push(WatchEvent(ADDED, obj, version, rtype))
            else:
                if resource_version < self._compacted_version:
                    raise errors.expired(resource_version, self._compacted_version)
                for change in self._history:
                    if change.resource_version > resource_version:
                        watcher.offer(change)
            self._watchers.add(watcher)
        return watcher

    def compact(self) -> None:
        """Forget the event history: watches from any version older than now get 410."""
        with self._lock:
            self._history.clear()
            self._compacted_version = self.resource_version

    def drop_watches(self) -> None:
        """Close every open watch (their streams end), as a restarting server does."""
        with self._lock:
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.close()

    def subscribe(self, listener: Listener) -> None:
        """Call ``listener`` with every committed change, after the commit, outside the lock,
        in commit order (one dispatcher at a time; a listener's own writes queue behind)."""
        with self._lock:
            self._listeners.append(listener)

    def _current_version(self) -> int:
        with self._lock:
            return self.resource_version

    def _forget_watcher(self, watcher: Watcher) -> None:
        with self._lock:
            self._watchers.discard(watcher)

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

    def _prepare_body(
        self, rtype: ResourceType, namespace: str | None, body: Any
    ) -> dict[str, Any]:
        """A copy of a request body with kind, apiVersion and metadata.namespace checked/set."""
        if not isinstance(body, dict):
            raise errors.bad_request(f"the body of the request is not a {rtype.kind} object")
        obj = copy.deepcopy(body)
        for field, expected in (("apiVersion", rtype.api_version), ("kind", rtype.kind)):
            given = obj.get(field)
            if given and given != expected:
                raise errors.bad_request(
                    f"the {field} in the data ({given}) does not match the expected "
                    f"{field} ({expected})"
                )
        obj["apiVersion"], obj["kind"] = rtype.api_version, rtype.kind
        metadata = obj.get("metadata")
        if metadata is None:
            metadata = obj["metadata"] = {}
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        if rtype.namespaced:
            given_namespace = metadata.get("namespace")
            if given_namespace and given_namespace != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            metadata["namespace"] = namespace
        else:
            metadata.pop("namespace", None)
        return obj

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
        new = self._merge_update(rtype, old, requested, subresource)
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
                self._carry_generation(rtype, old, new)
                self._commit_update(rtype, old, new)
                result = copy.deepcopy(new)
        if retry:
            return self._update(rtype, namespace, name, produce, subresource, dry_run)
        self._dispatch()
        return result

    @staticmethod
    def _merge_update(
        rtype: ResourceType,
        old: dict[str, Any],
        requested: dict[str, Any],
        subresource: str | None,
    ) -> dict[str, Any]:
        """The object to store: immutable metadata from ``old``; status/spec per subresource."""
        if subresource == "status":
            new = copy.deepcopy(old)
            new["status"] = copy.deepcopy(requested.get("status") or {})
            return new
        if subresource == "finalize":
            new = copy.deepcopy(old)
            finalizers = (requested.get("spec") or {}).get("finalizers") or []
            new.setdefault("spec", {})["finalizers"] = list(finalizers)
            return new
        new = copy.deepcopy(requested)
        metadata, old_metadata = new["metadata"], old["metadata"]
        for field in ("uid", "creationTimestamp", "deletionTimestamp", "namespace", "name"):
            if field in old_metadata:
                metadata[field] = old_metadata[field]
            else:
                metadata.pop(field, None)
        for field in ("deletionGracePeriodSeconds", "generation", "generateName"):
            if field in old_metadata:
                metadata[field] = old_metadata[field]
        if rtype.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if rtype == NAMESPACES:
            new["spec"] = copy.deepcopy(old.get("spec", {}))
        return new

    @staticmethod
    def _carry_generation(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
        if rtype not in GENERATION_KINDS:
            return
        generation = old["metadata"].get("generation", 1)
        if new.get("spec") != old.get("spec"):
            generation += 1
        new["metadata"]["generation"] = generation

    def _commit_update(self, rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Commit ``new`` over ``old`` (lock held): MODIFIED, or DELETED when a deletion whose
        finalizers are all gone can now finish."""
        metadata = new["metadata"]
        if not metadata.get("finalizers"):
            metadata.pop("finalizers", None)
        finished = (
            bool(metadata.get("deletionTimestamp"))
            and not metadata.get("finalizers")
            and not (rtype == NAMESPACES and (new.get("spec") or {}).get("finalizers"))
            and not metadata.get("deletionGracePeriodSeconds")
        )
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
        self._history.append(change)
        while len(self._history) > self._history_limit:
            dropped = self._history.popleft()
            self._compacted_version = dropped.resource_version
        for watcher in self._watchers:
            watcher.offer(change)
        if self._listeners:
            self._pending.append(change)

    def _dispatch(self) -> None:
        """Deliver pending changes to the listeners unless another call is already doing so
        (that call, possibly further up this thread's stack, delivers ours too, in order)."""
        while True:
            with self._lock:
                if self._dispatching or not self._pending:
                    return
                self._dispatching = True
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
                    self._dispatching = False

    @staticmethod
    def _decode_continue(token: str | None) -> tuple[int | None, Key | None]:
        if not token:
            return None, None
        try:
            decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
            return int(decoded["rv"]), (str(decoded["start"][0]), str(decoded["start"][1]))
        except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as error:
            raise errors.bad_request(f"invalid continue token: {error}") from error


def _encode_continue(version: int, after: Key) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": list(after)})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _list_item(obj: dict[str, Any]) -> dict[str, Any]:
    """List items carry no kind/apiVersion on a real server (the list has them)."""
    item = copy.deepcopy(obj)
    item.pop("kind", None)
    item.pop("apiVersion", None)
    return item


def _random_suffix() -> str:
    return "".join(secrets.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))


def _immutable(field: str, obj: dict[str, Any]) -> dict[str, str]:
    value = obj["metadata"].get("name")
    return {
        "reason": "FieldValueInvalid",
        "message": f'Invalid value: "{value}": field is immutable',
        "field": field,
    }
