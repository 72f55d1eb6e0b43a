"""``GET …/pods/{name}/log`` as the orchestrator reads it.

The API server itself answers for a missing pod, an unknown or unnamed container and a pod with
no node; the content needs a kubelet (emulator only): there the test plays the process kubelet —
it binds the pod, reports its container started and writes the container's output where the
emulator's ``/log`` reads it (``<log_dir>/<namespace>/<pod>/<container>.log``).
"""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from tests.kube.contract.conftest import MERGE_PATCH, Target

NEEDS_KUBELET = pytest.mark.emulator_only(reason="a log's content is served by a kubelet")


def _started_pod_with_log(target: Target, name: str, text: str) -> None:
    ns = target.namespace
    target.core.create_namespaced_pod(ns, target.pod_manifest(name))
    binding = {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-a"}}
    target.raw(target.core.create_namespaced_pod_binding, name, ns, binding)
    status = {
        "phase": "Running",
        "containerStatuses": [
            {"name": "main", "ready": True, "restartCount": 0, "image": "busybox:1.36",
             "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
        ],
    }  # fmt: skip
    target.core.patch_namespaced_pod_status(name, ns, {"status": status}, _content_type=MERGE_PATCH)
    assert target.emulator is not None
    path = target.emulator.log_dir / ns / name / "main.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


@NEEDS_KUBELET
def test_a_pod_log_is_read_whole_or_tailed(target: Target) -> None:
    _started_pod_with_log(target, "p", "one\ntwo\nthree\n")
    ns = target.namespace
    assert target.core.read_namespaced_pod_log("p", ns) == "one\ntwo\nthree\n"
    assert target.core.read_namespaced_pod_log("p", ns, tail_lines=1) == "three\n"
    assert target.core.read_namespaced_pod_log("p", ns, container="main") == "one\ntwo\nthree\n"


def test_the_log_of_an_unknown_container_is_a_bad_request(target: Target) -> None:
    target.core.create_namespaced_pod(target.namespace, target.pod_manifest("p"))
    status, error = target.error(
        target.core.read_namespaced_pod_log, "p", target.namespace, container="nope"
    )
    assert status == 400 and error["reason"] == "BadRequest"
    assert error["message"] == "container nope is not valid for pod p"


def test_the_log_of_a_pod_with_several_containers_needs_a_container_name(target: Target) -> None:
    containers = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    target.core.create_namespaced_pod(
        target.namespace, target.pod_manifest("two", containers=containers)
    )
    status, error = target.error(target.core.read_namespaced_pod_log, "two", target.namespace)
    assert status == 400 and error["reason"] == "BadRequest"
    assert error["message"] == (
        "a container name must be specified for pod two, choose one of: [a b]"
    )


def test_the_log_of_a_missing_pod_is_not_found(target: Target) -> None:
    status, error = target.error(target.core.read_namespaced_pod_log, "nope", target.namespace)
    assert status == 404 and error["reason"] == "NotFound"
    assert error["details"] == {"name": "nope", "kind": "pods"}


def test_the_log_of_a_pod_without_a_node_is_empty_or_refused(target: Target) -> None:
    target.core.create_namespaced_pod(target.namespace, target.pod_manifest("p"))
    _, minor = target.server_version()
    try:
        response = target.core.read_namespaced_pod_log(
            "p", target.namespace, _preload_content=False
        )
    except ApiException as exc:  # current servers refuse it
        assert minor > 20 and exc.status == 400
        assert "does not have a host assigned" in json.loads(exc.body)["message"]
    else:  # kube-apiserver 1.20 answers 204 No Content
        assert response.status == 204 and response.data == b""


@NEEDS_KUBELET
def test_a_followed_log_ends_when_the_container_has_finished(target: Target) -> None:
    _started_pod_with_log(target, "p", "one\ntwo\n")
    finished = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "main", "ready": False, "restartCount": 0, "image": "busybox:1.36",
             "imageID": "", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ],
    }  # fmt: skip
    target.core.patch_namespaced_pod_status(
        "p", target.namespace, {"status": finished}, _content_type=MERGE_PATCH
    )
    response = target.core.read_namespaced_pod_log(
        "p", target.namespace, follow=True, _preload_content=False, _request_timeout=10
    )
    try:
        text = b"".join(response.stream(1024))
    finally:
        response.close()
    assert text == b"one\ntwo\n"
