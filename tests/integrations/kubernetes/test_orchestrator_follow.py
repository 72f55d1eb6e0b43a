"""Seeing from outside that a run's orchestrator Job will never start it
(``orchestrator_follow.never_starts`` and ``unstartable_job``), and what ``wharf runs logs
--follow`` does when it cannot ask the cluster: it says so once and follows the run through the
store. (Following a Job whose pod cannot pull its image, end to end: ``test_orchestrator_e2e``.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.first_hour_k8s_bed import (  # noqa: F401 (fixture)
    closed_port_url,
    kubeconfig_variant,
    submitted_async,
    workspace,
)
from tests.kube.emulator import Emulator
from wharf.cli.run_logs import RunLogs
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import WharfError
from wharf.integrations.kubernetes.clients import KubeClients, kube_clients
from wharf.integrations.kubernetes.orchestrator_follow import (
    cannot_start,
    job_end,
    never_starts,
    unstartable_job,
)
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.sdk.client import Client
from wharf.sdk.workspace import Workspace

REASONS = KubernetesOrchestratorSettings().fail_on_container_waiting_reasons


def pod(name: str, waiting: str | None = None) -> dict[str, Any]:
    state = {"waiting": {"reason": waiting, "message": "no such image"}} if waiting else {}
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "img:1"}]},
        "status": {"phase": "Pending", "containerStatuses": [{"name": "main", "state": state}]},
    }


def job(*conditions: dict[str, str]) -> dict[str, Any]:
    return {"status": {"conditions": list(conditions)}}


FAILED = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}


def test_a_pod_stuck_on_a_configured_reason_cannot_start_naming_pod_image_and_reason() -> None:
    said = cannot_start(pod("j-1", "ErrImagePull"), REASONS)
    assert said == "cannot start its pod j-1 (image 'img:1': ErrImagePull: no such image)"
    assert cannot_start(pod("j-1", "ContainerCreating"), REASONS) is None
    assert cannot_start(pod("j-1"), REASONS) is None


@pytest.mark.parametrize(
    ("conditions", "pods", "expected"),
    [
        ((), [], None),  # no pod yet
        ((), [pod("j-1")], None),  # pending: it may still start
        ((), [pod("j-1", "ContainerCreating")], None),
        ((), [pod("j-1"), pod("j-2", "ImagePullBackOff")], "cannot start its pod j-2"),
        ((FAILED,), [], "failed: BackoffLimitExceeded"),  # its pods failed before taking over
        (({"type": "Complete", "status": "True"},), [], None),
    ],
    ids=["no-pod", "pending", "creating", "stuck", "failed", "complete"],
)
def test_a_job_never_starts_a_run_when_a_pod_is_stuck_or_it_failed(
    conditions: tuple[dict[str, str], ...], pods: list[dict[str, Any]], expected: str | None
) -> None:
    said = never_starts(job(*conditions), pods, REASONS)
    if expected is None:
        assert said is None
    else:
        assert said is not None and said.startswith(expected)


def test_a_job_that_does_not_exist_yet_may_still_start_its_run(clients: KubeClients) -> None:
    assert unstartable_job(clients, "default", "absent", REASONS) is None


def test_a_job_whose_create_answered_and_that_is_gone_was_deleted(clients: KubeClients) -> None:
    """A recorded uid says the create answered: a missing Job was deleted, never to come."""
    said = unstartable_job(clients, "default", "absent", REASONS, uid="0f3c")
    assert said == (
        "The orchestrator Job default/absent was deleted before its pod took the run over"
    )


def test_a_cluster_that_cannot_be_reached_is_one_line(emulator: Emulator, tmp_path: Path) -> None:
    unreachable = kubeconfig_variant(emulator, tmp_path, server=closed_port_url())
    clients = kube_clients(kubeconfig=str(unreachable))
    try:
        with pytest.raises(WharfError) as raised:
            unstartable_job(clients, "default", "j", REASONS)
    finally:
        clients.close()
    message = str(raised.value)
    assert message.startswith("Cannot read the orchestrator Job default/j: the Kubernetes API")
    assert "\n" not in message


def test_a_follower_that_cannot_reach_the_cluster_says_so_once_and_follows_the_store(
    workspace: Workspace,  # noqa: F811 (fixture)
    emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's pod never starts (no kubelet); the follower's kubeconfig names a closed port."""
    name = submitted_async(workspace, emulator)
    unreachable = kubeconfig_variant(emulator, tmp_path, server=closed_port_url())
    monkeypatch.setenv("KUBECONFIG", str(unreachable))
    lines: list[str] = []
    with Client(workspace.config, workspace.store) as client:
        logs = RunLogs(client, name, lines.append)
        polls = 0

        def sleep(_: float) -> None:  # the run ends after a few polls
            nonlocal polls
            polls += 1
            if polls == 3:
                workspace.store.runs.finish(logs.run.id, ExecutionStatus.STOPPED, "by hand")

        logs.follow(sleep=sleep)
    cannot = [line for line in lines if line.startswith(f"Cannot tell whether run '{name}'")]
    assert len(cannot) == 1, lines
    assert "the Kubernetes API is unreachable" in cannot[0] and cannot[0].endswith("; following.")
    assert f"Run '{name}' is initializing: its orchestrator has not started it yet" in lines[1]
    assert workspace.store.runs.get(logs.run.id).status is ExecutionStatus.STOPPED


def ended_pod(name: str, exit_code: int, reason: str) -> dict[str, Any]:
    terminated = {"exitCode": exit_code, "reason": reason}
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "img:1"}]},
        "status": {
            "phase": "Failed",
            "containerStatuses": [{"name": "main", "state": {"terminated": terminated}}],
        },
    }


def test_a_failed_job_names_how_its_last_pod_ended() -> None:
    """An orchestrator pod killed for its memory limit, retried up to the backoff limit, used
    to be reported as the bare 'failed: BackoffLimitExceeded', which does not say why."""
    pods = [ended_pod("j-1", 137, "OOMKilled"), ended_pod("j-2", 137, "OOMKilled")]
    said = never_starts(job(FAILED), pods, REASONS)
    assert said == (
        "failed: BackoffLimitExceeded; its last pod j-2 was killed by SIGKILL (exit code 137, "
        "OOMKilled)"
    )
    end = job_end(job(FAILED), [ended_pod("j-1", 2, "Error")])
    assert end is not None and end.detail.endswith("; its last pod j-1 exited with code 2")
