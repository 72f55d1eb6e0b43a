"""A tiny pod-per-step driver: the test bed's own check that pods can carry a pipeline.

Not the product orchestrator. It runs a DAG of Python snippets, one bare pod per step, through
the official client: a step's pod is created once every step it comes after has Succeeded; one
label-selected pod watch (re-listed after a 410 or a dropped stream) follows every pod; a step
whose pod Failed or vanished makes its downstream steps ``Skipped``. Invariant: each step gets
at most one pod, and ``run`` returns only when every step has an outcome or the deadline passed.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

RUN_LABEL = "wharf-driver/run"
STEP_LABEL = "wharf-driver/step"


@dataclass(frozen=True)
class PodStep:
    """One step: ``python -c code`` in its own pod, started after the steps named in ``after``."""

    name: str
    code: str
    after: tuple[str, ...] = ()


@dataclass
class Outcome:
    """How a step ended: ``Succeeded``, ``Failed``, ``Deleted`` (pod gone first) or ``Skipped``."""

    phase: str
    pod: str | None = None
    exit_code: int | None = None


@dataclass
class _Run:
    steps: dict[str, PodStep]
    pods: dict[str, str] = field(default_factory=dict)  # step -> pod name
    last_seen: dict[str, dict[str, Any]] = field(default_factory=dict)  # step -> last pod state
    outcomes: dict[str, Outcome] = field(default_factory=dict)


class PodPerStepDriver:
    """Runs :class:`PodStep` DAGs as pods in one namespace with one image."""

    def __init__(self, core: client.CoreV1Api, namespace: str, image: str) -> None:
        self.core = core
        self.namespace = namespace
        self.image = image

    def run(
        self,
        steps: Sequence[PodStep],
        *,
        timeout: float = 20.0,
        on_running: Callable[[str, str], None] | None = None,
    ) -> dict[str, Outcome]:
        """Run the DAG; ``on_running(step, pod)`` is called once when a step's pod is Running."""
        run = _Run({step.name: step for step in steps})
        run_id = secrets.token_hex(4)
        selector = f"{RUN_LABEL}={run_id}"
        deadline = time.monotonic() + timeout
        reported_running: set[str] = set()
        version = self._list(selector, run)
        self._advance(run, run_id)
        while len(run.outcomes) < len(run.steps):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"steps still open after {timeout} s: {self._open(run)}")
            try:
                for event in watch.Watch().stream(
                    self.core.list_namespaced_pod,
                    self.namespace,
                    label_selector=selector,
                    resource_version=version,
                    timeout_seconds=max(1, int(remaining)),
                ):
                    pod = event["raw_object"]
                    version = pod["metadata"]["resourceVersion"]
                    step = pod["metadata"]["labels"][STEP_LABEL]
                    self._observe(run, step, pod, deleted=event["type"] == "DELETED")
                    if on_running and step not in reported_running and _phase(pod) == "Running":
                        reported_running.add(step)
                        on_running(step, pod["metadata"]["name"])
                    self._advance(run, run_id)
                    if len(run.outcomes) == len(run.steps):
                        break
            except ApiException as error:
                if error.status != 410:
                    raise
                version = self._list(selector, run)  # the watch expired: start again from a list
                self._advance(run, run_id)
        return run.outcomes

    def _list(self, selector: str, run: _Run) -> str:
        response = self.core.list_namespaced_pod(
            self.namespace, label_selector=selector, _preload_content=False
        )
        listing = json.loads(response.data)
        present = set()
        for pod in listing["items"]:
            step = pod["metadata"]["labels"][STEP_LABEL]
            present.add(step)
            self._observe(run, step, pod, deleted=False)
        for step in set(run.pods) - present:  # gone while no watch was open
            self._observe(run, step, run.last_seen.get(step, {}), deleted=True)
        return str(listing["metadata"]["resourceVersion"])

    def _observe(self, run: _Run, step: str, pod: dict[str, Any], *, deleted: bool) -> None:
        if step in run.outcomes:
            return
        if pod:
            run.last_seen[step] = pod
        phase = _phase(pod)
        being_deleted = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
        if deleted or (being_deleted and phase in ("Succeeded", "Failed")):
            run.outcomes[step] = Outcome("Deleted", run.pods.get(step), _exit_code(pod))
        elif phase in ("Succeeded", "Failed"):
            run.outcomes[step] = Outcome(phase, run.pods.get(step), _exit_code(pod))

    def _advance(self, run: _Run, run_id: str) -> None:
        """Start every step whose upstream all Succeeded; skip those with a failed upstream."""
        changed = True
        while changed:
            changed = False
            for name, step in run.steps.items():
                if name in run.pods or name in run.outcomes:
                    continue
                upstream = [run.outcomes.get(dep) for dep in step.after]
                if any(o is not None and o.phase != "Succeeded" for o in upstream):
                    run.outcomes[name] = Outcome("Skipped")
                    changed = True
                elif all(o is not None for o in upstream):
                    run.pods[name] = self._create(step, run_id)

    def _create(self, step: PodStep, run_id: str) -> str:
        body = {
            "metadata": {
                "generateName": f"{step.name}-",
                "labels": {RUN_LABEL: run_id, STEP_LABEL: step.name},
            },
            "spec": {
                "restartPolicy": "Never",
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {"name": "main", "image": self.image, "command": ["python", "-c", step.code]}
                ],
            },
        }
        response = self.core.create_namespaced_pod(self.namespace, body, _preload_content=False)
        return str(json.loads(response.data)["metadata"]["name"])

    @staticmethod
    def _open(run: _Run) -> list[str]:
        return sorted(set(run.steps) - set(run.outcomes))


def _phase(pod: dict[str, Any]) -> str | None:
    return (pod.get("status") or {}).get("phase")


def _exit_code(pod: dict[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return int(terminated["exitCode"])
    return None
