"""The ``kubernetes`` step operator without a cluster: its configuration from the CLI, and
what it does before a step reaches the cluster (nothing: the run loop asks every stack's step
operator for a backend, whether a step names it or not)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from wharf import pipeline, step
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.errors import InputError
from wharf.integrations.kubernetes.step_operator import KubernetesStepOperator
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentRecord

IMAGE = "wharf/python:3.11"
OPERATOR = "k8s-op"


@step
def plain(value: int) -> int:
    return value + 1


@pipeline
def nothing_on_the_cluster() -> None:
    plain(1)


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "operated")  # registered by the tests that use it
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def test_the_cli_registers_a_kubernetes_step_operator(workspace: Workspace, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    command = [sys.executable, "-m", "wharf.cli.main", "component", "register", OPERATOR]
    command += ["--type", "step_operator", "--flavor", "kubernetes", "-c", "namespace=default"]
    command += ["-c", f"image={IMAGE}", "-c", f"kubeconfig={kubeconfig}"]
    command += ["-c", "backoff_limit_margin=2", "-c", "pod_stop_grace_period=5"]
    command += ["-c", 'pod_settings={"node_selectors": {"accelerator": "h200"}}']
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    record = stacks.find_component(workspace, ComponentType.STEP_OPERATOR, OPERATOR)
    operator = KubernetesStepOperator(record)
    settings = operator.settings
    assert (settings.namespace, settings.image, settings.kubeconfig) == (
        "default",
        IMAGE,
        str(kubeconfig),
    )
    assert (settings.backoff_limit_margin, settings.pod_stop_grace_period) == (2, 5)
    assert settings.pod_settings is not None
    assert settings.pod_settings.node_selectors == {"accelerator": "h200"}
    assert operator.code_travels
    # The kubeconfig does not exist: a backend is still made (the run loop asks for one even
    # when no step names the operator); only reaching the cluster says what is wrong.
    backend = operator.step_backend()
    assert backend.operator is operator
    with pytest.raises(InputError, match="No kubeconfig found"):
        operator.clients()


def test_an_invalid_configuration_names_the_step_operator(workspace: Workspace) -> None:
    """Refused at registration; one stored before that check names the operator when used."""
    with pytest.raises(InputError, match="step operator settings: 'namespace'"):
        stacks.register_component(
            workspace, OPERATOR, ComponentType.STEP_OPERATOR, "kubernetes", {"namespace": "Not_Ok"}
        )
    assert stacks.list_components(workspace, ComponentType.STEP_OPERATOR).items == []
    record = ComponentRecord(
        id=uuid.uuid4(),
        name=OPERATOR,
        type=ComponentType.STEP_OPERATOR,
        flavor="kubernetes",
        configuration={"namespace": "Not_Ok"},
        created=datetime.now(UTC),
    )
    with pytest.raises(InputError, match=f"Step operator '{OPERATOR}'.*namespace"):
        KubernetesStepOperator(record)


def test_a_run_whose_steps_name_no_operator_never_reaches_the_cluster(
    workspace: Workspace, tmp_path: Path
) -> None:
    configuration = {"image": IMAGE, "kubeconfig": str(tmp_path / "no-such-kubeconfig")}
    stacks.register_component(
        workspace, OPERATOR, ComponentType.STEP_OPERATOR, "kubernetes", configuration
    )
    stacks.register_stack(
        workspace,
        "operated",
        orchestrator="default",
        artifact_store="default",
        step_operator=OPERATOR,
    )
    run = nothing_on_the_cluster.run_in(workspace)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
