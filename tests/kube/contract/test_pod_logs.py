"""``GET …/pods/{name}/log`` as the orchestrator reads it (emulator only: it needs a kubelet).

The test plays the process kubelet: it binds the pod, reports its container started and writes
the container's output where the emulator's ``/log`` reads it
(``<log_dir>/<namespace>/<pod>/<container>.log``).
"""

from __future__ import annotations

import pytest

from tests.kube.contract.conftest import MERGE_PATCH, Target

pytestmark = pytest.mark.emulator_only(reason="/log is served by a kubelet")


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


def test_a_pod_log_is_read_whole_or_tailed(target: Target) -> None:
    _started_pod_with_log(target, "p", "one\ntwo\nthree\n")
    ns = target.namespace
    assert target.core.read_namespaced_pod_log("p", ns) == "one\ntwo\nthree\n"
    assert target.core.read_namespaced_pod_log("p", ns, tail_lines=1) == "three\n"
    assert target.core.read_namespaced_pod_log("p", ns, container="main") == "one\ntwo\nthree\n"


def test_the_log_of_an_unknown_container_is_a_bad_request(target: Target) -> None:
    _started_pod_with_log(target, "p", "x\n")
    status, error = target.error(
        target.core.read_namespaced_pod_log, "p", target.namespace, container="nope"
    )
    assert status == 400 and error["reason"] == "BadRequest"


def test_the_log_of_a_missing_pod_is_not_found(target: Target) -> None:
    status, error = target.error(target.core.read_namespaced_pod_log, "nope", target.namespace)
    assert status == 404 and error["reason"] == "NotFound"
