"""The controllers with the process kubelet, over HTTP: Jobs whose pods really run.

The emulator runs on the system clock here (its ticker drives time-based work); every wait is
on a condition read through the API with a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_testing import PYTHON_IMAGE, process_alive
from tests.waiting import wait_for

NS = "default"


@pytest.fixture
def core(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


def python_job(name: str, code: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "main", "image": PYTHON_IMAGE, "command": ["python", "-c", code]}
    return {
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            **spec,
        },
    }


def finished_condition(batch: client.BatchV1Api, name: str) -> dict[str, Any] | None:
    job = batch.api_client.sanitize_for_serialization(batch.read_namespaced_job(name, NS))
    for cond in job["status"].get("conditions") or []:
        if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
            return dict(cond)
    return None


def job_pods(core: client.CoreV1Api, name: str) -> list[Any]:
    return list(core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items)


def test_a_job_retries_a_failing_pod_then_completes(
    kubelet: Kubelet, batch: client.BatchV1Api, core: client.CoreV1Api, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    code = (
        f"import pathlib, sys\nmark = pathlib.Path({str(marker)!r})\n"
        "if not mark.exists():\n    mark.write_text('x'); sys.exit(3)\nprint('second try')\n"
    )
    batch.create_namespaced_job(NS, python_job("retry", code, backoffLimit=2))
    done = wait_for(lambda: finished_condition(batch, "retry"), "the job to finish")
    assert done["type"] == "Complete"
    status = batch.read_namespaced_job("retry", NS).status
    assert (status.succeeded, status.failed, status.active) == (1, 1, None)
    pods = job_pods(core, "retry")
    phases = sorted(p.status.phase for p in pods)
    assert phases == ["Failed", "Succeeded"]
    failed = next(p for p in pods if p.status.phase == "Failed")
    assert failed.status.container_statuses[0].state.terminated.exit_code == 3


def test_a_job_fails_after_its_backoff_limit_with_the_exit_code_readable(
    kubelet: Kubelet, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    batch.create_namespaced_job(NS, python_job("doomed", "import sys; sys.exit(7)", backoffLimit=1))
    failed = wait_for(lambda: finished_condition(batch, "doomed"), "the job to fail")
    assert (failed["type"], failed["reason"]) == ("Failed", "BackoffLimitExceeded")
    assert batch.read_namespaced_job("doomed", NS).status.failed == 2
    pods = job_pods(core, "doomed")
    assert len(pods) == 2
    assert {p.status.container_statuses[0].state.terminated.exit_code for p in pods} == {7}


def test_foreground_deletion_of_a_running_job_stops_its_process(
    kubelet: Kubelet, batch: client.BatchV1Api, core: client.CoreV1Api
) -> None:
    code = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    batch.create_namespaced_job(NS, python_job("stopme", code))
    pod = wait_for(
        lambda: [p for p in job_pods(core, "stopme") if p.status.phase == "Running"],
        "the pod to run",
    )[0]
    pid = int(
        wait_for(
            lambda: core.read_namespaced_pod_log(pod.metadata.name, NS).strip(), "the pid"
        ).split()[0]
    )
    batch.delete_namespaced_job("stopme", NS, propagation_policy="Foreground")
    wait_for(lambda: not job_pods(core, "stopme"), "the pod to go")
    wait_for(lambda: not batch.list_namespaced_job(NS).items, "the job to go")
    wait_for(lambda: not process_alive(pid), "the process to end")
