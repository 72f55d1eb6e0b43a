"""A step Job with a Secret of its own (the step operator's) waits for that Secret under a
deadline: on the API emulator and the process kubelet (:mod:`.step_backend_bed`).

The Job is created first, then its Secret (owned by it from its create on). A submitting process
that dies between the two left, before, a Job whose pod waited for its Secret for good (Pending,
``CreateContainerConfigError``) until someone deleted it. Now the Job is created with an active
deadline of its ``pod_startup_timeout`` (a pod without its credential could never report within
it anyway), which the submit gives back to the Job's own once the Secret is there: such a Job
ends (``DeadlineExceeded``), its pod deleted, its TTL collecting it later.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.step_backend_bed import (
    NS,
    STAND_IN_IMAGE,
    BackendFactory,
    job_names,
    launch,
    wait_all,
)
from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from tests.waiting import wait_for, wait_until
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.backends import Ended
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.step_backend_secret import secret_wait_deadline

STARTUP_TIMEOUT = 3.0
"""The dying submitter's ``pod_startup_timeout``: its Job's deadline while it awaits its Secret."""
HELD_SECONDS = 120.0
"""How long the emulator holds the Secret's create: the submitter is killed meanwhile."""

SUBMITTER = f"""
import sys
from pathlib import Path

from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepSpec
from wharf.execution.backends import StepLaunch
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend
from wharf.store.models import StepRunRecord

kubeconfig, record, logs = sys.argv[1:4]
settings = KubernetesOrchestratorSettings(namespace="{NS}", pod_startup_timeout={STARTUP_TIMEOUT})
clients = kube_clients(kubeconfig=kubeconfig)
backend = KubernetesStepBackend(clients, settings, image="{STAND_IN_IMAGE}", labels={{}})
spec = StepSpec(name="s", source="x:s", code_hash="s")
environment = {{"STAND_IN": "ok", "WHARF_API_KEY": "t"}}
step = StepRunRecord.model_validate_json(record)
backend.submit(StepLaunch(step, spec, environment, LocalArtifactStore(Path(logs))), None)
print("submitted: the Secret's create was not held", flush=True)
"""


def read_job(clients: KubeClients, name: str) -> dict[str, Any]:
    data = clients.batch.read_namespaced_job(name, NS, _preload_content=False).data
    job: dict[str, Any] = json.loads(data)
    return job


def failed_reason(clients: KubeClients, name: str) -> str | None:
    conditions = (read_job(clients, name).get("status") or {}).get("conditions") or []
    reasons = [c.get("reason") for c in conditions if c["type"] == "Failed"]
    return reasons[0] if reasons else None


def test_the_wait_is_bounded_by_the_startup_timeout_unless_the_jobs_own_deadline_is_shorter() -> (
    None
):
    assert secret_wait_deadline(600.0, None) == 600
    assert secret_wait_deadline(2.5, None) == 3  # whole seconds, rounded up
    assert secret_wait_deadline(0.0, None) == 1  # the API's least
    assert secret_wait_deadline(600.0, 900) == 600
    assert secret_wait_deadline(600.0, 300) is None  # the Job's own bounds it already


def test_a_job_whose_submitter_died_before_its_secret_ends_at_its_startup_timeout(
    emulator: Emulator,
    kubelet: Kubelet,
    clients: KubeClients,
    world: World,
    logs: LocalArtifactStore,
    tmp_path: Path,
) -> None:
    attempt = launch(world, logs, STAND_IN="ok", WHARF_API_KEY="t")
    emulator.faults.delay("create", HELD_SECONDS, "secrets")  # the submitter dies meanwhile
    command = [sys.executable, "-c", SUBMITTER, str(emulator.kubeconfig_path)]
    command += [attempt.record.model_dump_json(), str(tmp_path / "artifacts")]
    submitter = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        (name,) = wait_for(lambda: job_names(clients), "the step's Job", 60.0)
        wait_for(lambda: emulator.faults.pending_delays() == 0, "the Secret's create", 60.0)
    finally:
        submitter.kill()
        _, err = submitter.communicate(timeout=30)
    assert submitter.returncode < 0, err.decode()  # killed: no Secret, no clean-up
    assert read_job(clients, name)["spec"]["activeDeadlineSeconds"] == STARTUP_TIMEOUT
    ended = wait_until(lambda: failed_reason(clients, name) == "DeadlineExceeded", 30.0)
    assert ended, f"the Job still waits for its Secret: {read_job(clients, name)['status']}"
    pods: Any = clients.core.list_namespaced_pod(NS, label_selector=f"job-name={name}")
    assert wait_until(
        lambda: not clients.core.list_namespaced_pod(NS, label_selector=f"job-name={name}").items,
        30.0,
    ), f"its pod waits on: {[p.status.phase for p in pods.items]}"


@pytest.mark.parametrize("own", [None, 5000])
def test_once_its_secret_is_there_a_job_has_its_own_deadline_again(
    backend_for: BackendFactory,
    world: World,
    logs: LocalArtifactStore,
    clients: KubeClients,
    own: int | None,
) -> None:
    """None: no deadline of its own, the wait's is removed; 5000 (longer than the wait's):
    the Job's own is back."""
    settings: dict[str, Any] = {"pod_startup_timeout": 60.0}
    if own is not None:
        settings["active_deadline_seconds"] = own
    backend = backend_for(**settings)
    handle = backend.submit(launch(world, logs, STAND_IN="ok", WHARF_API_KEY="t"), None)
    assert read_job(clients, handle.job_name)["spec"].get("activeDeadlineSeconds") == own
    assert wait_all(backend, [handle])[handle][0] is Ended.SUCCEEDED
    backend.cleanup(handle)
