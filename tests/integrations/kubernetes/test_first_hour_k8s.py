# ruff: noqa: F811  (the workspace fixture is imported from first_hour_k8s_bed)
"""A user's first hour on Kubernetes, before anything runs: bad input and a cluster that cannot
take the run (what follows a submitted run: ``test_first_hour_k8s_runs.py``).

Each failure is one clear line (the CLI: one line on stderr, a non-zero exit, no traceback; the
SDK: a :class:`WharfError` whose message is one line) and loses no data: nothing half-recorded in
the store (no run left initializing or running) and nothing left in the cluster (no Secret, no
Job). On the API emulator, without a kubelet.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.integrations.kubernetes.first_hour_k8s_bed import (  # noqa: F401 (fixture)
    IMAGE,
    closed_port_url,
    kubeconfig_variant,
    names,
    tiny,
    update_orchestrator,
    workspace,
)
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import JOBS, SECRETS
from tests.waiting import wait_until
from wharf import pipeline, step
from wharf.core.enums import ComponentType
from wharf.core.errors import InputError, WharfError
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace


@step(
    settings={
        "orchestrator.kubernetes": {
            "pod_settings": {"tolerations": [{"key": "gpu", "operator": "Sometimes"}]}
        }
    }
)
def tolerant() -> int:
    return 1


@pipeline(code_source="image")
def badly_tolerant() -> None:
    tolerant()


@step(settings={"orchestrator.kubernetes": {"namespace": "elsewhere"}})
def moved() -> int:
    return 1


@pipeline(code_source="image")
def with_a_moved_step() -> None:
    moved()


# ----------------------------------------------------------------------------- registering


def test_register_refuses_a_mistyped_key_in_one_line_and_records_nothing(
    workspace: Workspace,
) -> None:
    command = ["component", "register", "k8s-2", "--type", "orchestrator", "--flavor"]
    result = wharf(*command, "kubernetes", "-c", f"image={IMAGE}", "-c", "namespaec=ml")
    assert_one_line_error(
        result,
        "Invalid Kubernetes orchestrator settings: 'namespaec' is not a known field "
        "(did you mean 'namespace'?)",
    )
    registered = stacks.list_components(workspace, ComponentType.ORCHESTRATOR).items
    assert "k8s-2" not in {c.name for c in registered}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"namespace": "ML_Team"}, "'namespace': 'ML_Team' is not a valid namespace"),
        ({"max_parallelism": -1}, "'max_parallelism' must be more than 0"),
        ({"synchronous": "maybe"}, "'synchronous' must be true or false (got 'maybe')"),
        ({"pod_settings": "{node_selectors: 5}"}, "'pod_settings' must be JSON"),
        ({"pod_settings": {"node_selectors": 5}}, "'pod_settings.node_selectors' must be a"),
        (
            {"pod_settings": {"tolerations": [{"key": "gpu", "effect": "NoSchedul"}]}},
            "'pod_settings.tolerations': entry 0 "
            '({"key": "gpu", "effect": "NoSchedul"}): '
            "effect 'NoSchedul' must be one of NoSchedule, PreferNoSchedule, NoExecute",
        ),
    ],
)
def test_register_refuses_bad_values_naming_the_field(
    workspace: Workspace, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError) as raised:
        stacks.register_component(
            workspace, "k8s-2", ComponentType.ORCHESTRATOR, "kubernetes", options
        )
    message = str(raised.value)
    assert message.startswith("Invalid Kubernetes orchestrator settings: "), message
    assert expected in message and "\n" not in message, message
    registered = stacks.list_components(workspace, ComponentType.ORCHESTRATOR).items
    assert "k8s-2" not in {c.name for c in registered}


def test_update_and_the_step_operator_are_checked_the_same_way(workspace: Workspace) -> None:
    updated = wharf("component", "update", "k8s", "--type", "orchestrator", "-c", "namespace=A")
    assert_one_line_error(updated, "'A' is not a valid namespace")
    assert stacks.find_component(workspace, ComponentType.ORCHESTRATOR, "k8s").configuration == {
        "image": IMAGE,
        "mounts_artifact_store": True,
    }
    command = ["component", "register", "gpu", "--type", "step_operator", "--flavor"]
    operator = wharf(*command, "kubernetes", "-c", "max_parallelism=2")
    assert_one_line_error(operator, "Kubernetes step operator settings: 'max_parallelism'")


def test_a_context_the_kubeconfig_lacks_is_registered_and_refused_by_the_run(
    workspace: Workspace, emulator: Emulator
) -> None:
    """The kubeconfig is the submitting user's (another machine, one set up later): the
    context is checked when a run needs it, in one line naming it, and nothing is left."""
    update_orchestrator(workspace, context="prod")
    with pytest.raises(InputError) as raised:
        tiny.run_in(workspace)
    message = str(raised.value)
    assert "\n" not in message and "context prod" in message, message
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


# ----------------------------------------------------------------------------- submitting


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("missing kubeconfig", "No kubeconfig found at"),
        ("malformed kubeconfig", "Cannot read the kubeconfig"),
        ("unreachable", "the Kubernetes API is unreachable (HTTPConnection(host='127.0.0.1'"),
        ("wrong token", "(HTTP 401): Unauthorized (the cluster refused the kubeconfig's"),
        (
            "no such namespace",
            '(HTTP 404): namespaces "ml-team" not found (create it, e.g. '
            "`kubectl create namespace ml-team`, or set the component's or the pipeline's "
            "`namespace` to one that exists)",
        ),
        ("jobs forbidden", '(HTTP 403): jobs.batch is forbidden: User "wharf-test" cannot'),
        ("secrets unpatchable", "Cannot let the Job own the run's Secret default/wharf-run-env"),
        ("failing exec plugin", 'User "system:anonymous" cannot create resource "secrets"'),
    ],
)
def test_a_run_the_cluster_cannot_take_fails_in_one_line_and_leaves_nothing(
    workspace: Workspace,
    emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
    expected: str,
) -> None:
    if case == "missing kubeconfig":
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    elif case == "malformed kubeconfig":
        (tmp_path / "broken").write_text("clusters: [\n")
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "broken"))
    elif case == "unreachable":
        monkeypatch.setenv(
            "KUBECONFIG", str(kubeconfig_variant(emulator, tmp_path, server=closed_port_url()))
        )
    elif case == "wrong token":
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig_variant(emulator, tmp_path, token="x")))
    elif case == "failing exec plugin":  # the client goes on without credentials
        config = json.loads(emulator.kubeconfig_path.read_text())
        config["users"][0]["user"] = {
            "exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": str(tmp_path / "no-such-cloud-cli"),
            }
        }
        (tmp_path / "exec").write_text(json.dumps(config))
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "exec"))
    elif case == "no such namespace":
        update_orchestrator(workspace, namespace="ml-team")
    elif case == "jobs forbidden":  # the run's Secret is created, then its Job refused
        emulator.access.deny("create", "jobs")
    else:  # the Job is created, then the Secret cannot be given to it: both go
        emulator.access.deny("patch", "secrets")
    with pytest.raises(WharfError) as raised:
        tiny.run_in(workspace)
    message = str(raised.value)
    assert "\n" not in message and expected in message, message
    if case == "failing exec plugin":
        assert message.endswith(
            "an exec plugin such as a cloud CLI may have failed, see the message above)"
        ), message
    assert workspace.store.runs.list().items == []  # the placeholder went with the failure
    assert names(emulator, SECRETS) == []
    assert wait_until(lambda: not names(emulator, JOBS), 30)  # a created Job: its pod first


def test_an_invalid_toleration_of_a_step_is_refused_before_anything_is_recorded(
    workspace: Workspace, emulator: Emulator
) -> None:
    with pytest.raises(InputError) as raised:
        badly_tolerant.run_in(workspace)
    message = str(raised.value)
    assert message.startswith("Invalid settings['orchestrator.kubernetes'] of step 'tolerant'")
    assert "'pod_settings.tolerations': entry 0" in message
    assert "operator 'Sometimes' must be one of Equal, Exists" in message
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


def test_a_step_moving_its_job_to_another_namespace_is_refused_before_anything_is_recorded(
    workspace: Workspace, emulator: Emulator
) -> None:
    """The orchestrator pod would fail the step before its pod; the user learns it now."""
    with pytest.raises(InputError) as raised:
        with_a_moved_step.run_in(workspace)
    assert str(raised.value) == (
        "Step 'moved': settings['orchestrator.kubernetes'] sets namespace to 'elsewhere', but "
        "the step's Job runs where the run's other steps run (namespace 'default'): set "
        "namespace on the component or for the whole pipeline."
    )
    assert workspace.store.runs.list().items == []
    assert names(emulator, SECRETS) == [] and names(emulator, JOBS) == []


@pytest.mark.parametrize(
    ("toleration", "expected"),
    [
        ({"operator": "Equal", "value": "x"}, "without a key needs operator Exists"),
        ({"key": "gpu", "operator": "Exists", "value": "a"}, "value must be empty"),
        ({"key": "gpu", "value": "not valid!"}, "is not a valid label value"),
        ({"key": "bad key"}, "key 'bad key' is not a valid label key"),
        ({"key": "gpu", "tolerationSeconds": 30}, "tolerationSeconds needs effect NoExecute"),
        ({"key": "gpu", "effect": "NoExecute", "tolerationSeconds": "30"}, "whole number"),
        ({"key": "gpu", "operater": "Exists"}, "unknown field 'operater'"),
    ],
)
def test_tolerations_the_api_server_would_refuse_are_refused_here(
    toleration: dict[str, Any], expected: str
) -> None:
    with pytest.raises(InputError, match="tolerations") as raised:
        KubernetesOrchestratorSettings.from_component(
            {"pod_settings": {"tolerations": [toleration]}}
        )
    assert expected in str(raised.value)


def test_valid_tolerations_are_kept_as_given() -> None:
    tolerations = [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoSchedule"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "tolerationSeconds": 60},
        {"operator": "Exists"},
    ]
    settings = KubernetesOrchestratorSettings(pod_settings={"tolerations": tolerations})
    assert settings.pod_settings is not None
    assert settings.pod_settings.tolerations == tolerations
