"""How the Job controller judges a failed pod: ``podFailurePolicy`` rules, and removed pods.

``failure_policy_action`` returns the action of the first matching rule (FailJob, Ignore or
Count; Count when none matches or there is no policy) and the message a real controller writes
for FailJob. ``as_removed`` turns a pod that vanished before it ended into the Failed pod the
controller then sees. Pure functions over pod dicts.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.kube.emulator.controllers_common import find_condition, meta, pod_terminal


def as_removed(pod: dict[str, Any], has_policy: bool) -> dict[str, Any]:
    """A pod removed before it ended, as the controller then sees it: Failed.

    With a podFailurePolicy a real cluster marks an unscheduled pod deleted this way Failed with
    a ``DisruptionTarget`` condition (pod GC); a pod already Succeeded/Failed keeps its phase.
    """
    if pod_terminal(pod):
        return pod
    pod = copy.deepcopy(pod)
    status = pod.setdefault("status", {})
    status["phase"] = "Failed"
    if has_policy and not (pod.get("spec") or {}).get("nodeName"):
        conditions = [
            c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"
        ]
        conditions.append(
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByPodGC",
                "message": "PodGC: node no longer exists",
            }
        )
        status["conditions"] = conditions
    return pod


def failure_policy_action(
    policy: dict[str, Any] | None, pod: dict[str, Any]
) -> tuple[str, str | None]:
    """The action of the first podFailurePolicy rule matching a failed pod (default Count)."""
    if not policy:
        return "Count", None
    pod_ref = f"{meta(pod).get('namespace')}/{meta(pod).get('name')}"
    for index, rule in enumerate(policy.get("rules") or []):
        action = rule.get("action")
        if action not in ("FailJob", "Ignore", "Count"):
            continue
        on_exit = rule.get("onExitCodes")
        if on_exit:
            match = _matching_exit_code(on_exit, pod)
            if match is not None:
                container, code = match
                return action, (
                    f"Container {container} for pod {pod_ref} failed with exit code {code} "
                    f"matching {action} rule at index {index}"
                )
        for pattern in rule.get("onPodConditions") or []:
            cond = find_condition(pod, pattern.get("type", ""))
            if cond is not None and cond.get("status") == pattern.get("status", "True"):
                return action, (
                    f"Pod {pod_ref} has condition {pattern.get('type')} matching {action} rule "
                    f"at index {index}"
                )
    return "Count", None


def _matching_exit_code(requirement: dict[str, Any], pod: dict[str, Any]) -> tuple[str, int] | None:
    """The first terminated container (non-zero exit) matching an ``onExitCodes`` requirement."""
    status = pod.get("status") or {}
    wanted_name = requirement.get("containerName")
    values = {int(v) for v in requirement.get("values") or []}
    operator = requirement.get("operator")
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(key) or []:
            terminated = (container.get("state") or {}).get("terminated")
            if not terminated:
                continue
            code = int(terminated.get("exitCode") or 0)
            if code == 0 or (wanted_name and container.get("name") != wanted_name):
                continue
            if (operator == "In" and code in values) or (
                operator == "NotIn" and code not in values
            ):
                return str(container.get("name")), code
    return None
