"""Helpers for the emulator's HTTP tests: failed calls, pods that look started.

``failure`` calls a client method that must fail and returns its HTTP status and ``Status`` body;
``bind``/``start_container``/``write_log`` play the kubelet's part for a pod (bind it, report its
container running, write its output where the emulator's ``/log`` reads it).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.kube.emulator import Emulator

NS = "default"
IMAGE = "python:3.11"


def failure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    """Call an API method that must fail: (HTTP status, Status body)."""
    with pytest.raises(ApiException) as caught:
        fn(*args, **kwargs)
    return int(caught.value.status), json.loads(caught.value.body)


def raw_get(api: client.ApiClient, path: str) -> tuple[int, bytes]:
    method, url, headers, _, _ = api.param_serialize("GET", path, auth_settings=["BearerToken"])
    response = api.call_api(method, url, headers)
    response.read()
    return response.status, response.data


def pod_body(name: str, containers: tuple[str, ...] = ("main",)) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"app": "demo"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": c, "image": IMAGE, "command": ["true"]} for c in containers],
        },
    }


def bind(core: client.CoreV1Api, name: str, node: str = "node-1") -> Any:
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": node}}
    # A real server answers with a Status, which the client's V1Binding model cannot decode.
    return core.create_namespaced_pod_binding(name, NS, binding, _preload_content=False)


def start_container(core: client.CoreV1Api, name: str, container: str = "main") -> None:
    running = {"name": container, "ready": True, "restartCount": 0, "image": IMAGE}
    running["imageID"], running["state"] = "", {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
    core.patch_namespaced_pod_status(
        name, NS, {"status": {"phase": "Running", "containerStatuses": [running]}}
    )


def write_log(emulator: Emulator, pod: str, text: str, container: str = "main") -> Path:
    path = emulator.pod_log_path(NS, pod, container)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as stream:
        stream.write(text)
    return path
