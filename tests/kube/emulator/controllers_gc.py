"""The garbage collector (ownerReferences) and the namespace finaliser of the emulator.

``GarbageCollector``: when an owner is removed (DELETED), each dependent naming its uid is deleted
(Background) unless another of its owners still exists, in which case only the dangling
reference is removed; a dependent created (or re-pointed) with owners that all do not exist is
deleted too.
An owner being deleted with ``foregroundDeletion`` (Foreground propagation) gets its dependents
deleted (Foreground) first; the finalizer is removed once no dependent with
``blockOwnerDeletion: true`` remains, so the store then removes the owner. An owner with the
``orphan`` finalizer has its references removed from every dependent, then the finalizer.
Owners of a kind the emulator does not serve cannot be checked and count as existing.

``NamespaceFinalizer``: a namespace with a deletionTimestamp has everything in it deleted (pods
bound to a node with their grace period, so the kubelet stops them; unbound pods at once), and
once nothing is left its ``kubernetes`` entry of ``spec.finalizers`` is removed so the store
removes the namespace.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.controllers_common import (
    FOREGROUND,
    ORPHAN,
    finalizers,
    is_deleting,
    is_owned_by,
    meta,
    owner_refs,
    tolerate_missing,
    uid_of,
)
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import (
    NAMESPACES,
    PODS,
    RESOURCES,
    ResourceType,
    resource_of_kind,
)

if TYPE_CHECKING:
    from tests.kube.emulator.store import ObjectStore

NAMESPACE_FINALIZER = "kubernetes"
SOLID, ABSENT, WAITING = "solid", "absent", "waiting"


class GarbageCollector:
    """Deletes dependents of removed owners; runs foreground and orphan deletion."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def on_event(
        self,
        event_type: str,
        rtype: ResourceType,
        obj: dict[str, Any],
        old: dict[str, Any] | None = None,
    ) -> None:
        """React to one change; ``old`` is the object before a MODIFIED change, if known."""
        if event_type == "DELETED":
            self._collect_dependents(obj)
            self._recheck_waiting_owners(rtype, obj)
            return
        if is_deleting(obj):
            if FOREGROUND in finalizers(obj):
                self.delete_foreground(rtype, obj)
            if ORPHAN in finalizers(obj):
                self.orphan_dependents(rtype, obj)
        elif owner_refs(obj) and (old is None or owner_refs(old) != owner_refs(obj)):
            self._delete_if_all_owners_absent(rtype, obj)

    # ---- background ----------------------------------------------------------------------------

    def _collect_dependents(self, owner: dict[str, Any]) -> None:
        for rtype, dependent in self._dependents(owner):
            if not is_deleting(dependent):
                self._release_or_delete(rtype, dependent)

    def _release_or_delete(self, rtype: ResourceType, dependent: dict[str, Any]) -> None:
        """As the real GC: with a solid owner left (exists, not deleting in foreground), only the
        references to absent or foreground-deleting owners go; otherwise the dependent is
        deleted, in Foreground when an owner waits for it, else in Background."""
        states = {
            ref.get("uid"): self._owner_state(dependent, ref) for ref in owner_refs(dependent)
        }
        leaving = {uid for uid, state in states.items() if state != SOLID}
        if SOLID in states.values():
            self._drop_references(rtype, dependent, {u for u in leaving if u})
            return
        policy = "Foreground" if WAITING in states.values() else "Background"
        ns, name = meta(dependent).get("namespace"), meta(dependent)["name"]
        tolerate_missing(lambda: self._store.delete(rtype, ns, name, propagation_policy=policy))

    def _delete_if_all_owners_absent(self, rtype: ResourceType, obj: dict[str, Any]) -> None:
        if any(self._owner_state(obj, ref) != ABSENT for ref in owner_refs(obj)):
            return
        ns, name = meta(obj).get("namespace"), meta(obj)["name"]
        tolerate_missing(
            lambda: self._store.delete(rtype, ns, name, propagation_policy="Background")
        )

    # ---- foreground and orphan -------------------------------------------------------------------

    def delete_foreground(self, rtype: ResourceType, owner: dict[str, Any]) -> None:
        uid = uid_of(owner)
        for dep_type, dependent in self._dependents(owner):
            if not is_deleting(dependent):
                self._release_or_delete(dep_type, dependent)
        blocking = [
            dependent
            for _, dependent in self._dependents(owner)
            if any(
                r.get("uid") == uid and r.get("blockOwnerDeletion") for r in owner_refs(dependent)
            )
        ]
        if not blocking:
            self._remove_finalizer(rtype, owner, FOREGROUND)

    def orphan_dependents(self, rtype: ResourceType, owner: dict[str, Any]) -> None:
        uid = uid_of(owner)
        for dep_type, dependent in self._dependents(owner):
            self._drop_references(dep_type, dependent, {uid})
        self._remove_finalizer(rtype, owner, ORPHAN)

    def _recheck_waiting_owners(self, rtype: ResourceType, dependent: dict[str, Any]) -> None:
        """A dependent went away: an owner waiting on it in foreground may now be removed."""
        for ref in owner_refs(dependent):
            owner_type, owner = self._lookup_owner(dependent, ref)
            if owner_type is None or owner is None:
                continue
            if is_deleting(owner) and FOREGROUND in finalizers(owner):
                self.delete_foreground(owner_type, owner)

    # ---- store access ----------------------------------------------------------------------------

    def _dependents(self, owner: dict[str, Any]) -> list[tuple[ResourceType, dict[str, Any]]]:
        uid = uid_of(owner)
        namespace = meta(owner).get("namespace")
        found = []
        for rtype in RESOURCES:
            if not rtype.namespaced:
                continue
            owned = partial(is_owned_by, owner_uid=uid)
            found += [(rtype, item) for item in self._store.matching(rtype, namespace, owned)]
        return found

    def _lookup_owner(
        self, dependent: dict[str, Any], ref: dict[str, Any]
    ) -> tuple[ResourceType | None, dict[str, Any] | None]:
        owner_type = resource_of_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if owner_type is None:
            return None, None
        ns = meta(dependent).get("namespace") if owner_type.namespaced else None
        try:
            owner = self._store.get(owner_type, ns, str(ref.get("name", "")))
        except ApiError:
            return owner_type, None
        return owner_type, owner if uid_of(owner) == ref.get("uid") else None

    def _owner_state(self, dependent: dict[str, Any], ref: dict[str, Any]) -> str:
        """SOLID, ABSENT or WAITING (being deleted in foreground); unknown kinds count SOLID."""
        owner_type, owner = self._lookup_owner(dependent, ref)
        if owner_type is None:
            return SOLID
        if owner is None:
            return ABSENT
        if is_deleting(owner) and FOREGROUND in finalizers(owner):
            return WAITING
        return SOLID

    def _drop_references(
        self, rtype: ResourceType, dependent: dict[str, Any], uids: set[str]
    ) -> None:
        dep_uid = uid_of(dependent)

        def mutate(current: dict[str, Any]) -> None:
            if uid_of(current) != dep_uid:
                return
            kept = [r for r in owner_refs(current) if r.get("uid") not in uids]
            if kept:
                current["metadata"]["ownerReferences"] = kept
            else:
                current["metadata"].pop("ownerReferences", None)

        if not any(r.get("uid") in uids for r in owner_refs(dependent)):
            return
        ns, name = meta(dependent).get("namespace"), meta(dependent)["name"]
        tolerate_missing(lambda: self._store.update_internal(rtype, ns, name, mutate))

    def _remove_finalizer(self, rtype: ResourceType, owner: dict[str, Any], finalizer: str) -> None:
        ns, name = meta(owner).get("namespace"), meta(owner)["name"]
        tolerate_missing(lambda: self._store.remove_finalizer(rtype, ns, name, finalizer))


class NamespaceFinalizer:
    """Empties a namespace being deleted, then releases its ``kubernetes`` finalizer."""

    def __init__(self, store: ObjectStore) -> None:
        self._store = store

    def on_event(self, event_type: str, rtype: ResourceType, obj: dict[str, Any]) -> None:
        if rtype == NAMESPACES:
            if event_type != "DELETED" and is_deleting(obj):
                self.finalize(meta(obj)["name"])
            return
        namespace = meta(obj).get("namespace")
        if event_type == "DELETED" and namespace:
            try:
                ns_obj = self._store.get(NAMESPACES, None, namespace)
            except ApiError:
                return
            if is_deleting(ns_obj):
                self.finalize(namespace)

    def finalize(self, namespace: str) -> None:
        """Delete what is left in the namespace; once it is empty, drop the finalizer."""
        remaining = 0
        for rtype in RESOURCES:
            if not rtype.namespaced:
                continue
            for item in self._store.list(rtype, namespace)["items"]:
                if not is_deleting(item):
                    self._delete(rtype, namespace, item)
        for rtype in RESOURCES:
            if rtype.namespaced:
                remaining += len(self._store.list(rtype, namespace)["items"])
        if remaining == 0:
            self._release(namespace)

    def _delete(self, rtype: ResourceType, namespace: str, item: dict[str, Any]) -> None:
        name = meta(item)["name"]
        grace: int | None = None
        if rtype == PODS and not (item.get("spec") or {}).get("nodeName"):
            grace = 0
        tolerate_missing(
            lambda: self._store.delete(
                rtype,
                namespace,
                name,
                grace_period_seconds=grace,
                propagation_policy="Background",
            )
        )

    def _release(self, namespace: str) -> None:
        def mutate(current: dict[str, Any]) -> None:
            spec = current.setdefault("spec", {})
            spec["finalizers"] = [
                f for f in spec.get("finalizers") or [] if f != NAMESPACE_FINALIZER
            ]

        try:
            ns_obj = self._store.get(NAMESPACES, None, namespace)
        except ApiError:
            return
        if NAMESPACE_FINALIZER in ((ns_obj.get("spec") or {}).get("finalizers") or []):
            tolerate_missing(
                lambda: self._store.update_internal(NAMESPACES, None, namespace, mutate)
            )
