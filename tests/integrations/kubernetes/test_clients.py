"""The Kubernetes client factory: the emulator's kubeconfig (named, or through ``$KUBECONFIG``),
a missing file and an unknown context, each with one clear line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from tests.kube.emulator import Emulator
from wharf.core.errors import InputError, WharfError
from wharf.integrations.kubernetes.clients import IN_CLUSTER_ENV, cluster_call, kube_clients


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture(autouse=True)
def outside_a_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IN_CLUSTER_ENV, raising=False)


def test_the_named_kubeconfig_reaches_the_emulator(emulator: Emulator) -> None:
    clients = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        clients.core.create_namespaced_config_map("default", {"metadata": {"name": "probe"}})
        names = [m.metadata.name for m in clients.core.list_namespaced_config_map("default").items]
        assert names == ["probe"]
        assert clients.batch.list_namespaced_job("default").items == []
    finally:
        clients.close()
    # the client's process-wide default configuration was neither read nor changed
    assert client.Configuration.get_default_copy().host != emulator.url


def test_kubeconfig_env_and_an_explicit_context(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'absent'}:{emulator.kubeconfig_path}")
    clients = kube_clients(context="wharf-emulator")
    try:
        assert clients.api_client.configuration.host == emulator.url
        assert clients.core.list_namespaced_pod("default").items == []
    finally:
        clients.close()


def test_a_missing_kubeconfig_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config"
    with pytest.raises(InputError) as caught:
        kube_clients(kubeconfig=str(missing))
    message = str(caught.value)
    assert "\n" not in message
    assert f"No kubeconfig found at {missing}" in message


def test_an_unknown_context_is_one_clear_line(emulator: Emulator) -> None:
    with pytest.raises(InputError) as caught:
        kube_clients(kubeconfig=str(emulator.kubeconfig_path), context="elsewhere")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"Cannot use the kubeconfig {emulator.kubeconfig_path}")
    assert "elsewhere" in message


def test_an_invalid_kubeconfig_is_one_clear_line(tmp_path: Path) -> None:
    broken = tmp_path / "config"
    broken.write_text("clusters: [unclosed\n")
    with pytest.raises(InputError) as caught:
        kube_clients(kubeconfig=str(broken))
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"Cannot read the kubeconfig {broken}")


def test_inside_a_pod_without_a_service_account_the_error_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(IN_CLUSTER_ENV, "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(InputError, match="in-cluster Kubernetes configuration"):
        kube_clients()


def test_a_body_the_client_itself_refuses_is_one_clear_line(emulator: Emulator) -> None:
    """The client (33 and newer) checks a body against its models before sending it."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "probe"},
        "spec": {
            "template": {
                "spec": {
                    "affinity": {"nodeAffinity": 3},
                    "containers": [{"name": "main", "image": "python:3.11"}],
                    "restartPolicy": "Never",
                }
            }
        },
    }
    clients = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        with pytest.raises(WharfError) as caught, cluster_call("create the Job default/probe"):
            clients.batch.create_namespaced_job("default", job, _preload_content=False)
        assert clients.batch.list_namespaced_job("default").items == []
    finally:
        clients.close()
    assert str(caught.value) == (
        "Cannot create the Job default/probe: the Kubernetes client refused the request: "
        "spec.template.spec.affinity.nodeAffinity: Input should be a valid dictionary or "
        "instance of V1NodeAffinity"
    )
