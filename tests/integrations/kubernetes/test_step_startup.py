"""A step pod that takes long to start (no node for it yet) is not lost: the Kubernetes backend's
``pod_startup_timeout`` holds off the engine's liveness check until the pod's first beat.

The API emulator and the process kubelet (the ``emulator``, ``clients`` and ``world`` are
:mod:`.conftest`'s), which here binds no pod by itself (as a cluster whose node is still scaling
up): the test binds the step's pod once the engine's clock is past the usual liveness timeout. The pod's "image" is a script that records its step completed in the
real SQLite store, as the step's entry point would."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
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
from tests.integrations.kubernetes.step_backend_bed import launch, wait_all
from tests.kube.emulator import Emulator
from tests.kube.http_testing import bind
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepConfig, StepSpec
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.execution.backends import Ended, StepLaunch, startup_timeout_of
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.isolated_attempts import IsolatedExecutor
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import (
    STARTUP_REPORT_MARGIN_SECONDS,
    KubernetesStepBackend,
)
from wharf.integrations.kubernetes.step_operator import KubernetesStepOperator
from wharf.store.models import ComponentRecord

NS = "default"
IMAGE = "wharf/records-completed"


@pytest.fixture
def kubelet(emulator: Emulator, tmp_path: Path) -> Iterator[Kubelet]:
    step = tmp_path / "image" / "python"  # run as: python -m ...step_main ID NAMESPACE
    step.parent.mkdir()
    step.write_text(
        f"""#!{sys.executable}
import sys
from uuid import UUID
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepConfig, StepSpec
from wharf.core.enums import ComponentType, ExecutionStatus
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


def step_with(key: str, **settings: object) -> StepSpec:
    return StepSpec(
        name="s", source="x:s", code_hash="s", config=StepConfig(settings={key: settings})
    )


def test_a_steps_own_pod_startup_timeout_is_the_engines_allowance_until_its_first_beat(
    clients: KubeClients,
) -> None:
    """The step's entry is layered over the component's (600 s), for the orchestrator's step
    backend and for the step operator's; the backend reports a pod that never started at the
    timeout, so the engine's liveness check waits a margin longer."""
    plain = StepSpec(name="s", source="x:s", code_hash="s")
    backend = KubernetesStepBackend(
        clients, KubernetesOrchestratorSettings(namespace=NS), image=IMAGE, labels={}
    )
    eight = step_with("orchestrator.kubernetes", pod_startup_timeout=8)
    assert startup_timeout_of(backend, eight) == 8 + STARTUP_REPORT_MARGIN_SECONDS
    assert startup_timeout_of(backend, plain) == 600 + STARTUP_REPORT_MARGIN_SECONDS
    operator = KubernetesStepOperator(
        ComponentRecord(
            id=uuid.uuid4(),
            name="op",
            type=ComponentType.STEP_OPERATOR,
            flavor="kubernetes",
            configuration={"namespace": NS, "image": IMAGE},
            created=datetime.now(UTC),
        )
    ).step_backend()
    eight = step_with("step_operator.kubernetes", pod_startup_timeout=8)
    assert startup_timeout_of(operator, eight) == 8 + STARTUP_REPORT_MARGIN_SECONDS
    assert startup_timeout_of(operator, plain) == 600 + STARTUP_REPORT_MARGIN_SECONDS


def test_a_pod_never_scheduled_within_its_steps_startup_timeout_fails_saying_so(
    world: World, clients: KubeClients, logs: LocalArtifactStore
) -> None:
    """No node takes the pod (no kubelet): at the step's 1 s, not the component's 600 s, the
    attempt fails, naming the timeout and the pod left Pending unscheduled."""
    backend = KubernetesStepBackend(
        clients, KubernetesOrchestratorSettings(namespace=NS), image=IMAGE, labels={"p": "t"}
    )
    try:
        plain = launch(world, logs)
        spec = step_with("orchestrator.kubernetes", pod_startup_timeout=1)
        handle = backend.submit(StepLaunch(plain.record, spec, {}, logs), None)
        ((ended, detail),) = wait_all(backend, [handle], timeout=15).values()
        assert ended is Ended.FAILED
        assert detail.startswith("could not start within its pod_startup_timeout (1 s): its pod ")
        assert detail.endswith(" is Pending; not scheduled to a node"), detail
    finally:
        backend.close()


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
