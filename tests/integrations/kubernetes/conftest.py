"""Fixtures shared by the Kubernetes integration tests (the bed itself is :mod:`.testbed`).

- ``s3_server`` / ``s3_bucket``: the session's moto server, a fresh bucket per test.
- ``make_bed(project_files, *, active_stack, user_kubeconfig=True, clock=None,
  heartbeat_interval=2)``: the test's :class:`~.testbed.Bed` (call it once), torn down after
  the test; a module's own ``bed`` fixture calls it and registers the module's stacks.
- ``emulator``: a started API emulator (system clock); ``clients``: ``KubeClients`` on it.
- ``world``: a store world (:func:`tests.store.conftest.make_world`) on a fresh SQLite file
  ``tmp_path/store.db``, which processes started by a kubelet can open too. (Not the server
  tests' ``world``: a module that wants that one imports it.)
- The step backend's bed (:mod:`.step_backend_bed`): ``kubelet``, the process kubelet on
  ``emulator`` with the python and stand-in images; ``logs``, a local artifact store;
  ``backend_for(image=..., labels=..., close_when_idle=..., **settings)``, step backends on
  ``clients`` (with ``kubelet`` running), closed after the test.

A module's own fixture of the same name takes precedence over these.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import MotoServer
from tests.integrations.kubernetes.step_backend_bed import (
    BackendFactory,
    backend_factory,
    stand_in_kubelet,
)
from tests.integrations.kubernetes.testbed import Bed, BedFactory, open_bed
from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World, sqlite_world
from wharf.artifacts.store import LocalArtifactStore
from wharf.integrations.kubernetes.clients import KubeClients, kube_clients

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket


@pytest.fixture
def make_bed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: MotoServer, s3_bucket: str
) -> Iterator[BedFactory]:
    with ExitStack() as exits:
        opened: list[Bed] = []

        def make(project_files: Mapping[str, str], **options: Any) -> Bed:
            assert not opened, "one bed per test"
            bed = open_bed(
                exits, tmp_path, monkeypatch, s3_server, s3_bucket, project_files, **options
            )
            opened.append(bed)
            return bed

        yield make


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator() as emu:
        yield emu


@pytest.fixture
def clients(emulator: Emulator) -> Iterator[KubeClients]:
    made = kube_clients(kubeconfig=str(emulator.kubeconfig_path))
    try:
        yield made
    finally:
        made.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    with sqlite_world(tmp_path) as world:
        yield world


@pytest.fixture
def kubelet(emulator: Emulator, tmp_path: Path) -> Iterator[Kubelet]:
    with stand_in_kubelet(emulator, tmp_path) as running:
        yield running


@pytest.fixture
def logs(tmp_path: Path) -> LocalArtifactStore:
    return LocalArtifactStore(tmp_path / "artifacts")


@pytest.fixture
def backend_for(clients: KubeClients, kubelet: Kubelet) -> Iterator[BackendFactory]:
    with backend_factory(clients) as make:
        yield make
