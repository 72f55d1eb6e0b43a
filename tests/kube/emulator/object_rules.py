"""The per-object write rules of a real kube-apiserver, as pure functions over object dicts.

What a create stamps (uid, timestamps, generation, generateName), what an update keeps from the
stored object (immutable metadata; status or spec depending on the subresource), when generation
moves, what a DELETE does to one object (grace, finalizers from the propagation policy, namespace
termination) and how it answers, what a patch and a pod binding may produce, the list order and
continue token. No state and no locking: the store calls these on private copies and commits the
results.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

from tests.kube.emulator import errors
from tests.kube.emulator.clock import parse_rfc3339, rfc3339
from tests.kube.emulator.resources import (
    CRONJOBS,
    JOBS,
    NAMESPACES,
    PODS,
    SERVICEACCOUNTS,
    ResourceType,
)

# Kinds whose metadata.generation counts spec changes (pods on 1.2x servers have none).
GENERATION_KINDS = frozenset({JOBS, CRONJOBS})
# Kinds whose DELETE answers with the object; the others answer with a Success Status.
RETURNS_DELETED_OBJECT = frozenset({PODS, NAMESPACES, SERVICEACCOUNTS})
# Kinds deleted gracefully (a grace period, recorded before removal).
GRACEFUL_KINDS = frozenset({PODS})
# Kinds that can own other objects here (the orphan finalizer only matters for them).
OWNER_KINDS = frozenset({JOBS, CRONJOBS})
FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"

PATCH_MEDIA_TYPES = (
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
)

Key = tuple[str, str]


def storage_key(key: Key) -> str:
    """The order etcd keeps objects in: ``<namespace>/<name>`` compared as a string."""
    return f"{key[0]}/{key[1]}"


def prepare_body(rtype: ResourceType, namespace: str | None, body: Any) -> dict[str, Any]:
    """A copy of a request body with kind, apiVersion and metadata.namespace checked and set."""
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


def stamp_new(
    rtype: ResourceType, obj: dict[str, Any], now: datetime, *, keep_status: bool
) -> None:
    """What a create sets: uid, creationTimestamp, generation, a name from generateName;
    server-owned fields from the client are dropped (and status, unless ``keep_status``)."""
    metadata = obj["metadata"]
    if _positive_int(metadata.get("resourceVersion")):
        # The storage layer refuses this with a plain (reason-less) internal error.
        raise errors.ApiError(500, "", "resourceVersion should not be set on objects to be created")
    for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        metadata.pop(field, None)
    if rtype.has_status and not keep_status:
        obj.pop("status", None)
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = rfc3339(now)
    if rtype in GENERATION_KINDS:
        metadata["generation"] = 1
    else:
        metadata.pop("generation", None)
    if not metadata.get("name") and metadata.get("generateName"):
        metadata["name"] = generated_name(metadata["generateName"])
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


def _positive_int(value: Any) -> bool:
    try:
        return int(str(value)) > 0
    except ValueError:
        return False


def generated_name(prefix: str) -> str:
    """``prefix`` plus five random characters, from the alphabet a real server uses."""
    return prefix + "".join(secrets.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))


def merge_update(
    rtype: ResourceType, old: dict[str, Any], requested: dict[str, Any], subresource: str | None
) -> dict[str, Any]:
    """The object an update stores: immutable metadata from ``old``; through ``/status`` only
    the status changes, through a namespace's ``/finalize`` only ``spec.finalizers``, and
    through the main resource everything but the status (for kinds with a status subresource)."""
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


def carry_generation(rtype: ResourceType, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Keep ``old``'s generation on ``new``, one more if the spec changed."""
    if rtype not in GENERATION_KINDS:
        return
    generation = old["metadata"].get("generation", 1)
    if new.get("spec") != old.get("spec"):
        generation += 1
    new["metadata"]["generation"] = generation


def deletion_can_finish(rtype: ResourceType, obj: dict[str, Any]) -> bool:
    """Whether an object being deleted can go now: no finalizers left (nor a namespace's
    ``spec.finalizers``) and no grace period to wait out (bound pods wait for their kubelet)."""
    metadata = obj["metadata"]
    return (
        bool(metadata.get("deletionTimestamp"))
        and not metadata.get("finalizers")
        and not (rtype == NAMESPACES and (obj.get("spec") or {}).get("finalizers"))
        and not metadata.get("deletionGracePeriodSeconds")
    )


def check_propagation_policy(rtype: ResourceType, name: str, policy: str | None) -> None:
    if policy is not None and policy not in PROPAGATION_POLICIES:
        raise errors.invalid(
            rtype,
            name,
            [
                {
                    "reason": "FieldValueNotSupported",
                    "message": f'Unsupported value: "{policy}": supported values: '
                    '"Foreground", "Background", "Orphan"',
                    "field": "propagationPolicy",
                }
            ],
        )


def check_preconditions(
    rtype: ResourceType, obj: dict[str, Any], preconditions: dict[str, Any]
) -> None:
    """409 Conflict when a DELETE's uid/resourceVersion preconditions do not hold."""
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


def mark_for_deletion(
    rtype: ResourceType,
    obj: dict[str, Any],
    *,
    grace: int | None,
    policy: str | None,
    now: datetime,
) -> str:
    """Apply a DELETE to ``obj`` (a private copy). Returns what the store must do:

    - "removed": remove it now (one DELETED event);
    - "recorded": a pod going with grace 0 — store the deletion first (MODIFIED: deletionTimestamp
      and grace 0 recorded), then remove it (DELETED), as a real server's graceful path does;
    - "marked": keep it with a deletionTimestamp (grace to wait out, finalizers, namespace);
    - "unchanged": already being deleted and this request changes nothing.
    """
    metadata = obj["metadata"]
    if grace is not None and grace < 0:
        grace = 1  # a real server treats a negative grace period as 1 s
    finalizers = list(metadata.get("finalizers") or [])
    if metadata.get("deletionTimestamp"):
        return _delete_again(rtype, obj, finalizers, grace, policy)
    grace = pod_grace(obj, grace) if rtype in GRACEFUL_KINDS else 0
    if policy is None:
        # batch/v1 Jobs orphan their pods unless told otherwise (kept for compatibility).
        policy = "Orphan" if rtype == JOBS else "Background"
    if rtype in OWNER_KINDS:
        _switch_policy(finalizers, policy)
    elif policy == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
        finalizers.append(FOREGROUND_FINALIZER)
    waiting_namespace = rtype == NAMESPACES and (obj.get("spec") or {}).get("finalizers")
    if not finalizers and not waiting_namespace and rtype not in GRACEFUL_KINDS:
        return "removed"
    _set_finalizers(metadata, finalizers)
    metadata["deletionTimestamp"] = rfc3339(now + timedelta(seconds=grace))
    metadata["deletionGracePeriodSeconds"] = grace
    if rtype in GENERATION_KINDS:
        metadata["generation"] = metadata.get("generation", 1) + 1
    if rtype == NAMESPACES:
        obj.setdefault("status", {})["phase"] = "Terminating"
    return "recorded" if deletion_can_finish(rtype, obj) else "marked"


def _delete_again(
    rtype: ResourceType,
    obj: dict[str, Any],
    finalizers: list[str],
    grace: int | None,
    policy: str | None,
) -> str:
    """A DELETE of an object already being deleted: an explicit policy may switch the GC
    finalizers; a pod's grace may only shrink (its deletionTimestamp moves with it)."""
    metadata = obj["metadata"]
    changed = _switch_policy(finalizers, policy) if policy else False
    _set_finalizers(metadata, finalizers)
    current = metadata.get("deletionGracePeriodSeconds") or 0
    if rtype in GRACEFUL_KINDS and grace is not None and 0 <= grace < current:
        requested_at = parse_rfc3339(metadata["deletionTimestamp"]) - timedelta(seconds=current)
        metadata["deletionTimestamp"] = rfc3339(requested_at + timedelta(seconds=grace))
        metadata["deletionGracePeriodSeconds"] = grace
        return "recorded" if deletion_can_finish(rtype, obj) else "marked"
    if not changed:
        return "unchanged"
    return "removed" if deletion_can_finish(rtype, obj) else "marked"


def _switch_policy(finalizers: list[str], policy: str | None) -> bool:
    """Make the GC finalizers in ``finalizers`` say ``policy``; whether anything changed."""
    wanted = {"Foreground": FOREGROUND_FINALIZER, "Orphan": ORPHAN_FINALIZER}.get(policy or "")
    before = list(finalizers)
    finalizers[:] = [f for f in finalizers if f not in (FOREGROUND_FINALIZER, ORPHAN_FINALIZER)]
    if wanted:
        finalizers.append(wanted)
    return finalizers != before


def _set_finalizers(metadata: dict[str, Any], finalizers: list[str]) -> None:
    if finalizers:
        metadata["finalizers"] = finalizers
    else:
        metadata.pop("finalizers", None)


def pod_grace(pod: dict[str, Any], requested: int | None) -> int:
    """A pod's deletion grace: unbound or finished pods go at once, others wait for the kubelet
    (the requested grace, else the pod's terminationGracePeriodSeconds)."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return 0
    if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is not None:
        return max(requested, 0)
    return int(pod["spec"].get("terminationGracePeriodSeconds", 30))


def deleted_reply(rtype: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
    """What a DELETE that removed ``obj`` answers: the object, or a Success ``Status``."""
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


def encode_continue(version: int, after: Key) -> str:
    """The ``metadata.continue`` token: the list's version and the last key sent."""
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": list(after)})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_continue(token: str | None) -> tuple[int | None, Key | None]:
    """Inverse of ``encode_continue`` (``(None, None)`` without a token; 400 if malformed)."""
    if not token:
        return None, None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(decoded["rv"]), (str(decoded["start"][0]), str(decoded["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as error:
        raise errors.bad_request(f"invalid continue token: {error}") from error


def list_item(obj: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``obj`` as a list item: no kind/apiVersion (the list carries them)."""
    item = copy.deepcopy(obj)
    item.pop("kind", None)
    item.pop("apiVersion", None)
    return item


def patch_media_type(content_type: str) -> str:
    """The patch flavour a Content-Type names (415 for anything but the three patch types)."""
    media_type = content_type.split(";", 1)[0].strip().lower()
    if media_type not in PATCH_MEDIA_TYPES:
        raise errors.ApiError(
            415,
            "UnsupportedMediaType",
            f"the body of the request was in an unknown format - accepted media types "
            f"include: {', '.join(PATCH_MEDIA_TYPES)}",
        )
    return media_type


def patched_object(rtype: ResourceType, name: str, new: Any) -> dict[str, Any]:
    """Check what a patch produced: an object of the same kind and name."""
    if not isinstance(new, dict) or not isinstance(new.get("metadata", {}), dict):
        raise errors.bad_request("the patch did not produce an object")
    new.setdefault("metadata", {})
    new["kind"], new["apiVersion"] = rtype.kind, rtype.api_version
    patched_name = new["metadata"].get("name", name)
    if patched_name != name:
        cause = {
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: "{patched_name}": field is immutable',
            "field": "metadata.name",
        }
        raise errors.invalid(rtype, name, [cause])
    return new


def bound_pod(pod: dict[str, Any], node_name: str, now: datetime) -> dict[str, Any]:
    """A copy of ``pod`` bound to ``node_name`` (409 if already bound or being deleted)."""
    name = pod["metadata"]["name"]
    bound_to = (pod.get("spec") or {}).get("nodeName")
    if bound_to or pod["metadata"].get("deletionTimestamp"):
        why = (
            f'pod {name} is already assigned to node "{bound_to}"'
            if bound_to
            else f"pod {name} is being deleted, cannot be assigned to a host"
        )
        raise errors.ApiError(
            409,
            "Conflict",
            f'Operation cannot be fulfilled on pods/binding "{name}": {why}',
            {"name": name, "kind": "pods/binding"},
        )
    new = copy.deepcopy(pod)
    new.setdefault("spec", {})["nodeName"] = node_name
    conditions = new.setdefault("status", {}).setdefault("conditions", [])
    conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": rfc3339(now),
        }
    )
    return new
