"""Helpers the emulator's controllers share: owner references, conditions, times, tolerant writes.

Pure functions over plain object dicts (as the store returns them), plus ``tolerate_missing``,
which runs a controller write and swallows the 404/409 a real controller also shrugs off (the
object went away or changed under it; the next event brings it back to the controller).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from tests.kube.emulator.clock import parse_rfc3339, rfc3339
from tests.kube.emulator.errors import ApiError
from tests.kube.emulator.resources import ResourceType

log = logging.getLogger("tests.kube.emulator.controllers")

T = TypeVar("T")

FOREGROUND = "foregroundDeletion"
ORPHAN = "orphan"


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    """The object's ``metadata`` (an empty dict when absent)."""
    result: dict[str, Any] = obj.get("metadata") or {}
    return result


def uid_of(obj: dict[str, Any]) -> str:
    return str(meta(obj).get("uid", ""))


def owner_refs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return list(meta(obj).get("ownerReferences") or [])


def controller_ref(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in owner_refs(obj):
        if ref.get("controller"):
            return ref
    return None


def is_controlled_by(obj: dict[str, Any], owner_uid: str) -> bool:
    ref = controller_ref(obj)
    return ref is not None and ref.get("uid") == owner_uid


def is_owned_by(obj: dict[str, Any], owner_uid: str) -> bool:
    return any(ref.get("uid") == owner_uid for ref in owner_refs(obj))


def controller_reference(owner: dict[str, Any], rtype: ResourceType) -> dict[str, Any]:
    """What ``metav1.NewControllerRef`` builds: controller and blockOwnerDeletion both true."""
    return {
        "apiVersion": rtype.api_version,
        "kind": rtype.kind,
        "name": meta(owner)["name"],
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_deleting(obj: dict[str, Any]) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def finalizers(obj: dict[str, Any]) -> list[str]:
    return list(meta(obj).get("finalizers") or [])


def find_condition(obj: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            result: dict[str, Any] = cond
            return result
    return None


def condition_true(obj: dict[str, Any], ctype: str) -> bool:
    cond = find_condition(obj, ctype)
    return cond is not None and cond.get("status") == "True"


def job_finished(job: dict[str, Any]) -> str | None:
    """``"Complete"`` or ``"Failed"`` when the Job has that condition with status True."""
    for ctype in ("Complete", "Failed"):
        if condition_true(job, ctype):
            return ctype
    return None


def job_finish_time(job: dict[str, Any]) -> datetime | None:
    """When the Job finished: its finished condition's lastTransitionTime (as the TTL controller)."""
    finished = job_finished(job)
    if finished is None:
        return None
    cond = find_condition(job, finished) or {}
    stamp = cond.get("lastTransitionTime") or (job.get("status") or {}).get("completionTime")
    return parse_rfc3339(stamp) if stamp else None


def new_condition(
    ctype: str, now: datetime, *, status: str = "True", reason: str = "", message: str = ""
) -> dict[str, Any]:
    """A Job condition shaped as the 1.2x job controller writes it."""
    cond: dict[str, Any] = {
        "type": ctype,
        "status": status,
        "lastProbeTime": rfc3339(now),
        "lastTransitionTime": rfc3339(now),
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def pod_phase(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def pod_terminal(pod: dict[str, Any]) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def timestamp(obj: dict[str, Any], *path: str) -> datetime | None:
    """The RFC 3339 time at ``obj[path...]`` as a datetime, or None when unset."""
    node: Any = obj
    for key in path:
        if not isinstance(node, dict):
            return None
        node = node.get(key)
    return parse_rfc3339(node) if isinstance(node, str) and node else None


def tolerate_missing(action: Callable[[], T]) -> T | None:
    """Run a controller write; a 404 (gone) or 409 (changed/exists) is logged and ignored."""
    try:
        return action()
    except ApiError as err:
        if err.code in (404, 409):
            log.debug("controller write skipped: %s", err)
            return None
        raise
