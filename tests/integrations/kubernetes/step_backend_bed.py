"""The step backend tests' bed: the API emulator and the process kubelet with two images, a
store world on SQLite, a local artifact store for the logs, and :class:`KubernetesStepBackend`
instances made by a factory (closed after the test); as fixtures (``emulator``, ``kubelet``,
``world``, ``logs``, ``backend_for``) in :mod:`.conftest`.

``wharf/python:3.11`` is this interpreter (the real step entry point runs), and
``wharf/stand-in`` is a shell script standing in for ``python -m wharf.integrations.kubernetes.step_main ID NAMESPACE``
whose behaviour the attempt's environment picks (``STAND_IN``: ok, fail, sleep; a sleeping one
writes ``$MARKER.started``, and ``$MARKER`` once it got SIGTERM, then takes ``$STOP_SECONDS``
to stop)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.kube.emulator import Emulator
from tests.kube.kubelet import Kubelet
from tests.store.conftest import World
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepSpec
from wharf.execution.backends import Ended, StepLaunch
from wharf.integrations.kubernetes.clients import KubeClients
from wharf.integrations.kubernetes.settings import KubernetesOrchestratorSettings
from wharf.integrations.kubernetes.step_backend import KubernetesHandle, KubernetesStepBackend

NS = "default"
PYTHON_IMAGE = "wharf/python:3.11"
STAND_IN_IMAGE = "wharf/stand-in"
SPEC = StepSpec(name="s", source="x:s", code_hash="s")
STAND_IN = """#!/bin/sh
# stands in for: python -m wharf.integrations.kubernetes.step_main STEP_RUN_ID NAMESPACE
case "$STAND_IN" in
  ok) echo "hello from $3"; echo "token $WHARF_API_KEY"; exit 0 ;;
  fail) echo "failing"; exit 2 ;;
  sleep)
    trap 'echo terminated > "$MARKER"; echo "stopping $3"; sleep "${STOP_SECONDS:-0}"; exit 143' TERM
    echo "sleeping $3"
    echo started > "$MARKER.started"
    sleep 60 &
    wait ;;
esac
"""


@contextmanager
def stand_in_kubelet(emulator: Emulator, tmp_path: Path) -> Iterator[Kubelet]:
    """A ready process kubelet running ``PYTHON_IMAGE`` and ``STAND_IN_IMAGE``."""
    stand_in = tmp_path / "stand-in" / "python"
    stand_in.parent.mkdir()
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    images = {PYTHON_IMAGE: sys.executable, STAND_IN_IMAGE: str(stand_in)}
    with Kubelet(
        emulator.kubeconfig_path, images=images, log_dir=emulator.log_dir, image_pull_backoff=0.2
    ) as running:
        assert running.wait_ready(5)
        yield running


BackendFactory = Callable[..., KubernetesStepBackend]


@contextmanager
def backend_factory(clients: KubeClients) -> Iterator[BackendFactory]:
    """Makes step backends on ``clients`` (each closed on exit): the stand-in image and the
    ``wharf.io/pipeline: training`` label unless told otherwise, no ``owner`` (as the step
    operator's: a Secret per Job) unless given one, ``settings`` for the rest."""
    made: list[KubernetesStepBackend] = []

    def make(
        image: str = STAND_IN_IMAGE,
        labels: dict[str, str] | None = None,
        close_when_idle: bool = False,
        owner: Mapping[str, Any] | None = None,
        **settings: object,
    ) -> KubernetesStepBackend:
        backend = KubernetesStepBackend(
            clients,
            KubernetesOrchestratorSettings(namespace=NS, **settings),
            image=image,
            labels={"wharf.io/pipeline": "training"} if labels is None else labels,
            close_when_idle=close_when_idle,
            owner=owner,
        )
        made.append(backend)
        return backend

    try:
        yield make
    finally:
        for backend in made:
            backend.close()


def launch(world: World, logs: LocalArtifactStore, **environment: str) -> StepLaunch:
    record = world.step(logs_uri=logs.new_uri("p", "r") + ".log", spec=SPEC)
    return StepLaunch(record, SPEC, environment, logs)


def wait_all(
    backend: KubernetesStepBackend, handles: list[KubernetesHandle], timeout: float = 30
) -> dict[KubernetesHandle, tuple[Ended, str]]:
    ended: dict[KubernetesHandle, tuple[Ended, str]] = {}
    deadline = time.monotonic() + timeout
    while len(ended) < len(handles):
        assert time.monotonic() < deadline, f"still running: {set(handles) - set(ended)}"
        left = [h for h in handles if h not in ended]
        outcomes = backend.poll(left, timeout=deadline - time.monotonic())
        ended.update({h: (o.ended, o.detail) for h, o in outcomes.items()})
    return ended


def job_names(clients: KubeClients) -> list[str]:
    return [job.metadata.name for job in clients.batch.list_namespaced_job(NS).items]
