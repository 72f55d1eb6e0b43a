"""The process kubelet's view of one container and the pod status it reports.

Owns `ContainerRun` (one container of a pod: its current state, last state, restart count and
process) and `render_status`, which turns a pod's runs into the ``status`` object a real kubelet
reports: phase, conditions (PodScheduled, Initialized, ContainersReady, Ready, each with a
``lastTransitionTime`` that changes only when the condition does), ``hostIP``/``podIP``/``podIPs``,
``startTime`` and ``containerStatuses`` / ``initContainerStatuses`` carrying every field the
client's models require (name, image, imageID, ready, restartCount). Timestamps are RFC 3339 UTC
with second precision, as the API server stores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tests.kube.kubelet_env import HOST_IP, POD_IP
from tests.kube.kubelet_process import ContainerProcess

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def timestamp() -> str:
    """Now, as the API server writes times."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ContainerRun:
    """One container of a pod as the kubelet runs it."""

    spec: dict[str, Any]
    image_id: str = ""
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "Pending"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    restart_count: int = 0
    process: ContainerProcess | None = None
    restart_at: float | None = None  # monotonic time of a scheduled restart
    memory_limit: int | None = None  # bytes; the kubelet SIGKILLs the container above it
    oom_killed: bool = False

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return "running" in self.state

    @property
    def terminated(self) -> dict[str, Any] | None:
        return self.state.get("terminated")

    @property
    def exit_code(self) -> int | None:
        terminated = self.terminated
        return None if terminated is None else int(terminated["exitCode"])

    def wait(self, reason: str, message: str | None = None) -> None:
        self.state = {"waiting": _without_none({"reason": reason, "message": message})}

    def start(self, process: ContainerProcess) -> None:
        if self.terminated is not None:
            self.last_state = self.state
        self.process = process
        self.restart_at = None
        self.oom_killed = False
        self.state = {"running": {"startedAt": timestamp()}}

    def finish(
        self, exit_code: int, *, reason: str | None = None, message: str | None = None
    ) -> None:
        """Record the container's end (exit code, reason Completed/Error unless given)."""
        started = self.state.get("running", {}).get("startedAt") or timestamp()
        self.state = {
            "terminated": _without_none(
                {
                    "exitCode": exit_code,
                    "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                    "message": message,
                    "startedAt": started,
                    "finishedAt": timestamp(),
                    "containerID": self.container_id,
                }
            )
        }

    @property
    def container_id(self) -> str | None:
        return None if self.process is None else f"process://{self.process.pid}"

    def render(self) -> dict[str, Any]:
        status = {
            "name": self.name,
            "image": str(self.spec.get("image") or ""),
            "imageID": self.image_id,
            "ready": self.running,
            "started": self.running,
            "restartCount": self.restart_count,
            "state": self.state,
            "lastState": self.last_state,
        }
        if self.container_id is not None:
            status["containerID"] = self.container_id
        return status


def _without_none(values: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def pod_phase(restart_policy: str, init: list[ContainerRun], main: list[ContainerRun]) -> str:
    """The phase a kubelet reports for these runs (see the Kubernetes pod lifecycle)."""
    for run in init:
        code = run.exit_code
        if code is not None and code != 0 and restart_policy == "Never":
            return "Failed"
        if code is None:
            return "Pending"
    if not any(run.running or run.terminated or run.restart_at for run in main):
        return "Pending"
    if any(run.running or run.restart_at is not None for run in main):
        return "Running"
    if all(run.terminated is not None for run in main):
        return "Succeeded" if all(run.exit_code == 0 for run in main) else "Failed"
    return "Running"


class ConditionBook:
    """The pod's conditions, each keeping its lastTransitionTime until its status changes."""

    def __init__(self) -> None:
        self._conditions: dict[str, dict[str, Any]] = {}

    def set(self, kind: str, status: bool, reason: str | None = None) -> None:
        value = "True" if status else "False"
        previous = self._conditions.get(kind)
        if previous is not None and previous["status"] == value:
            changed_at = previous["lastTransitionTime"]
        else:
            changed_at = timestamp()
        self._conditions[kind] = _without_none(
            {
                "type": kind,
                "status": value,
                "reason": reason,
                "lastProbeTime": None,
                "lastTransitionTime": changed_at,
            }
        )

    def render(self) -> list[dict[str, Any]]:
        order = ("Initialized", "Ready", "ContainersReady", "PodScheduled")
        return [self._conditions[kind] for kind in order if kind in self._conditions]


def render_status(
    *,
    phase: str,
    start_time: str,
    conditions: ConditionBook,
    init: list[ContainerRun],
    main: list[ContainerRun],
    message: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """The pod ``status`` object for a merge patch (``None`` clears a field)."""
    initialised = all(run.exit_code == 0 for run in init)
    ready = phase == "Running" and all(run.running for run in main)
    completed = "PodCompleted" if phase in TERMINAL_PHASES else "ContainersNotReady"
    conditions.set("PodScheduled", True)
    conditions.set("Initialized", initialised, None if initialised else "ContainersNotInitialized")
    conditions.set("ContainersReady", ready, None if ready else completed)
    conditions.set("Ready", ready, None if ready else completed)
    status: dict[str, Any] = {
        "phase": phase,
        "conditions": conditions.render(),
        "hostIP": HOST_IP,
        "startTime": start_time,
        "containerStatuses": [run.render() for run in main],
        "message": message,
        "reason": reason,
    }
    if any(run.running or run.terminated for run in [*init, *main]):
        status["podIP"] = POD_IP
        status["podIPs"] = [{"ip": POD_IP}]
    if init:
        status["initContainerStatuses"] = [run.render() for run in init]
    return status
