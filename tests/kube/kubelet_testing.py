"""Helpers for tests that run pods through the process kubelet: pod builders and condition waits.

Every wait here is on a condition observed through the API (a pod watch from the listed
resourceVersion, or a followed ``/log`` stream) with a deadline, never a fixed sleep. Pods are
plain dicts as the API server returns them; ``None`` stands for "the pod is gone".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch

from wharf.store.process_identity import start_token

PYTHON_IMAGE = "wharf/python:3.11"
Pod = dict[str, Any]
PodCondition = Callable[[Pod | None], bool]


def python_pod(name: str, code: str, *, image: str = PYTHON_IMAGE, **container: Any) -> Pod:
    """A restartPolicy-Never pod whose one container ``main`` runs ``python -c code``."""
    spec: dict[str, Any] = {"name": "main", "image": image, "command": ["python", "-c", code]}
    spec.update(container)
    return {
        "metadata": {"name": name, "labels": {"app": "wharf"}},
        "spec": {"restartPolicy": "Never", "containers": [spec]},
    }


def wait_for_pod(
    core: client.CoreV1Api,
    name: str,
    condition: PodCondition,
    timeout: float = 5.0,
    *,
    namespace: str = "default",
) -> Pod | None:
    """The first state of the pod (None once gone) meeting ``condition``, seen through a watch."""
    deadline = time.monotonic() + timeout
    selector = f"metadata.name={name}"
    response = core.list_namespaced_pod(namespace, field_selector=selector, _preload_content=False)
    listing = json.loads(response.data)
    current = listing["items"][0] if listing["items"] else None
    if condition(current):
        return current
    version = listing["metadata"]["resourceVersion"]

    def list_pods(**kwargs: Any) -> Any:  # no model type to find: the watch yields raw dicts
        return core.list_namespaced_pod(namespace, **kwargs)

    while (remaining := deadline - time.monotonic()) > 0:
        for event in watch.Watch().stream(
            list_pods,
            field_selector=selector,
            resource_version=version,
            timeout_seconds=max(1, int(remaining + 0.999)),
        ):
            pod = event["raw_object"]
            version = pod["metadata"]["resourceVersion"]
            current = None if event["type"] == "DELETED" else pod
            if condition(current):
                return current
            if time.monotonic() > deadline:
                break
    raise AssertionError(f"pod {name}: condition not met within {timeout} s; last: {current}")


def phase_is(*phases: str) -> PodCondition:
    return lambda pod: pod is not None and pod.get("status", {}).get("phase") in phases


def container_state(pod: Pod, index: int = 0) -> dict[str, Any]:
    """``status.containerStatuses[index].state`` ({} before the kubelet reported any)."""
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return statuses[index]["state"] if len(statuses) > index else {}


def run_to_end(
    core: client.CoreV1Api, pod: Pod, timeout: float = 5.0, *, namespace: str = "default"
) -> Pod:
    """Create the pod and return it once Succeeded or Failed."""
    core.create_namespaced_pod(namespace, pod)
    name = pod["metadata"]["name"]
    final = wait_for_pod(core, name, phase_is("Succeeded", "Failed"), timeout, namespace=namespace)
    assert final is not None
    return final


def wait_for_output(
    core: client.CoreV1Api,
    name: str,
    text: str,
    timeout: float = 5.0,
    *,
    namespace: str = "default",
) -> str:
    """The pod's output once it contains ``text`` (the pod started; its /log followed)."""
    started = phase_is("Running", "Succeeded", "Failed")
    wait_for_pod(core, name, started, timeout, namespace=namespace)
    stream = core.read_namespaced_pod_log(
        name, namespace, follow=True, _preload_content=False, _request_timeout=timeout
    )
    seen = b""
    try:
        for chunk in stream.stream(64):
            seen += chunk
            if text.encode() in seen:
                return seen.decode()
    finally:
        stream.release_conn()
    raise AssertionError(f"pod {name}: {text!r} not in its output {seen!r}")


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's may wait for a reaper)."""
    return start_token(pid) is not None
