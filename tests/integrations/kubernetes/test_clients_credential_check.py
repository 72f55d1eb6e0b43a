"""The client factory's throttle of the official client's per-request credential hook: the hook
runs on the first request, then at most once per interval, and requests keep their token."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.config.kube_config import KubeConfigLoader

from tests.kube.emulator import Emulator
from wharf.integrations.kubernetes.clients import IN_CLUSTER_ENV, _at_most_every, kube_clients


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


def test_the_hook_runs_once_per_interval() -> None:
    runs: list[client.Configuration] = []
    configuration = client.Configuration()
    throttled = _at_most_every(3600.0, runs.append)
    for _ in range(3):
        throttled(configuration)
    assert runs == [configuration]
    every_time = _at_most_every(0.0, runs.append)
    for _ in range(3):
        every_time(configuration)
    assert len(runs) == 4


def test_requests_keep_their_token_between_checks(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(IN_CLUSTER_ENV, raising=False)
    clients = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        configuration = clients.api_client.configuration
        assert configuration.refresh_api_key_hook is not None
        first = configuration.get_api_key_with_prefix("BearerToken")
        for name in ("one", "two", "three"):
            clients.core.create_namespaced_config_map("default", {"metadata": {"name": name}})
        assert configuration.get_api_key_with_prefix("BearerToken") == first
        assert configuration.host == emulator.url
        assert len(clients.core.list_namespaced_config_map("default").items) == 3
    finally:
        clients.close()


def test_the_loader_hook_stays_throttled_after_it_re_installs_itself(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kubeconfig loader's hook puts a new copy of itself on the configuration each time it
    runs; the throttle must survive that, or every later request runs the hook again."""
    monkeypatch.delenv(IN_CLUSTER_ENV, raising=False)
    loads: list[object] = []
    original = KubeConfigLoader._set_config

    def counted(self: KubeConfigLoader, configuration: client.Configuration) -> None:
        loads.append(configuration)
        original(self, configuration)

    monkeypatch.setattr(KubeConfigLoader, "_set_config", counted)
    clients = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        throttled = clients.api_client.configuration.refresh_api_key_hook
        for _ in range(5):
            clients.core.list_namespaced_config_map("default")
        assert clients.api_client.configuration.refresh_api_key_hook is throttled
        assert len(loads) == 2  # loading, then the first request's check; no more for 10 s
    finally:
        clients.close()
