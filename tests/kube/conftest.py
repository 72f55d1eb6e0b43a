"""Fixtures of the Kubernetes test bed.

- ``emulator``: a started :class:`~tests.kube.emulator.Emulator` (system clock), stopped after the
  test. Cheap (one thread, one port, a temporary directory): one per test. Tests that need a
  ``FakeClock`` build their own: ``with Emulator(clock=FakeClock(t0)) as emu: ...``.
- ``kube_client``: an official ``kubernetes.client.ApiClient`` configured from the emulator's
  kubeconfig, never touching the client's global default configuration; closed afterwards.
- ``core`` / ``batch``: ``CoreV1Api`` / ``BatchV1Api`` on ``kube_client``.
- ``kubelet``: a ready process kubelet for the emulator's pods (node ``wharf-test-node``, image
  ``PYTHON_IMAGE`` = this interpreter), stopped after the test with every process it started.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest
from kubernetes import client, config

from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.kube.kubelet_testing import PYTHON_IMAGE


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


def api_client_for(kubeconfig_path: str) -> client.ApiClient:
    """An ``ApiClient`` for the kubeconfig at ``kubeconfig_path`` (own configuration object)."""
    configuration = client.Configuration()
    config.load_kube_config(config_file=kubeconfig_path, client_configuration=configuration)
    return client.ApiClient(configuration)


@pytest.fixture
def kube_client(emulator: Emulator) -> Iterator[client.ApiClient]:
    api_client = api_client_for(str(emulator.kubeconfig_path))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def core(kube_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client)


@pytest.fixture
def batch(kube_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(kube_client)


@pytest.fixture
def kubelet(emulator: Emulator) -> Iterator[Kubelet]:
    with Kubelet(
        emulator.kubeconfig_path,
        node_name="wharf-test-node",
        images={PYTHON_IMAGE: sys.executable},
        log_dir=emulator.log_dir,
    ) as running:
        assert running.wait_ready(5)
        yield running
