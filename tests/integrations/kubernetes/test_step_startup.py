"""A step pod that takes long to start (no node for it yet) is not lost: the Kubernetes backend's
``pod_startup_timeout`` holds off the engine's liveness check until the pod's first beat.

The API emulator and the process kubelet (the ``emulator``, ``clients`` and ``world`` are
:mod:`.conftest`'s), which here binds no pod by itself (as a cluster whose node is still scaling
up): the test binds the step's pod once the engine's clock is past the usual liveness timeout. The pod's "image" is a script that records its step completed in the
real SQLite store, as the step's entry point would."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from tests.execution.test_isolated_wait import (
    DEADLINE,
    INTERVAL,
    AheadClock,
    Attempt,
    checks_after_now,
    services_for,
)
from tests.kube.emulator import Emulator
from tests.kube.http_testing import bind
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus
from wharf.execution.attempts import IsolatedExecutor
from wharf.execution.backends import startup_timeout_of
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesStepBackend

NS = "default"
IMAGE = "wharf/records-completed"


@pytest.fixture
def kubelet(emulator: Emulator, tmp_path: Path) -> Iterator[Kubelet]:
    step = tmp_path / "image" / "python"  # run as: python -m wharf.execution.entrypoint ID
    step.parent.mkdir()
    step.write_text(
        f"""#!{sys.executable}
import sys
from uuid import UUID
from wharf.core.enums import ExecutionStatus
from wharf.store.models import StepRunUpdate
from wharf.store.sql import SqlStore

store = SqlStore.open({f"sqlite:///{tmp_path / 'store.db'}"!r})
store.steps.update(UUID(sys.argv[3]), StepRunUpdate(status=ExecutionStatus.COMPLETED))
store.close()
"""
    )
    step.chmod(0o755)
    with Kubelet(
        emulator.kubeconfig_path,
        images={IMAGE: str(step)},
        log_dir=emulator.log_dir,
        bind_unscheduled=False,
    ) as running:
        assert running.wait_ready(5)
        yield running


def test_the_pod_startup_timeout_is_a_validated_setting_of_600_s_by_default() -> None:
    assert KubernetesOrchestratorSettings().pod_startup_timeout == 600
    configured = KubernetesOrchestratorSettings.from_component({"pod_startup_timeout": "120"})
    assert configured.pod_startup_timeout == 120
    with pytest.raises(ValidationError, match="pod_startup_timeout"):
        KubernetesOrchestratorSettings(pod_startup_timeout=-1)


def test_a_step_pod_waiting_for_a_node_past_the_liveness_timeout_runs_to_completion(
    world: World, tmp_path: Path, kubelet: Kubelet, clients: KubeClients
) -> None:
    clock = AheadClock()
    backend = KubernetesStepBackend(
        clients,
        KubernetesOrchestratorSettings(namespace=NS),
        image=IMAGE,
        labels={"wharf.io/pipeline": "training"},
    )
    try:
        assert startup_timeout_of(backend) == 600
        executor = IsolatedExecutor(services_for(world, tmp_path, clock), lambda spec: backend)
        attempt = Attempt(executor, world.step())
        record = attempt.record
        wait_for(
            lambda: world.store.steps.get(record.id).last_heartbeat is not None,
            "the liveness clock to start at submit",
            DEADLINE,
        )
        pods: list[str] = []

        def pod_created() -> bool:
            listed = clients.core.list_namespaced_pod(NS).items
            pods[:] = [p.metadata.name for p in listed if p.metadata and p.metadata.name]
            return bool(pods)

        wait_for(pod_created, "the step's pod", DEADLINE)
        clock.advance(liveness_timeout_for(INTERVAL) + 60)  # no node yet, a minute later
        checks_after_now(clock)
        assert world.store.steps.get(record.id).status is ExecutionStatus.RUNNING
        (pod,) = pods
        pod_spec = clients.core.read_namespaced_pod(pod, NS).spec
        assert pod_spec is not None and pod_spec.node_name is None  # still unscheduled
        bind(clients.core, pod, kubelet.node_name)  # the node is up
        ended = attempt.ended().record
        assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    finally:
        backend.close()
