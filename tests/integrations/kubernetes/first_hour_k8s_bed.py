"""Shared by the first-hour Kubernetes tests (``test_first_hour_k8s*.py``): a fresh home whose
active stack ``k8s`` runs on the API emulator (the ``workspace`` fixture), the ``tiny`` pipeline,
helpers to list what is left in the cluster and to make kubeconfigs that cannot reach it, and
an asynchronous run whose pod never starts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import JOBS, SECRETS
from wharf import pipeline, step
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace

IMAGE = "wharf/python:3.11"
NAMESPACE = "default"


@step
def one() -> int:
    return 1


@pipeline(code_source="image")
def tiny() -> None:
    one()


@pytest.fixture
def workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, emulator: Emulator
) -> Iterator[Workspace]:
    """A fresh home whose active stack ``k8s`` runs on the emulator (the user's kubeconfig),
    with the local artifact store (mounted, as the pods of this bed would see it)."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV, "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))
    ws = Workspace.open(load_config())
    config = {"image": IMAGE, "mounts_artifact_store": True}
    stacks.register_component(ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", config)
    stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
    yield ws
    ws.close()


def names(emulator: Emulator, kind: Any, namespace: str = NAMESPACE) -> list[str]:
    return [i["metadata"]["name"] for i in emulator.store.list(kind, namespace)["items"]]


def kubeconfig_variant(emulator: Emulator, tmp_path: Path, **changes: str) -> Path:
    """The emulator's kubeconfig with another ``server`` and/or ``token``."""
    config = json.loads(emulator.kubeconfig_path.read_text())
    if "server" in changes:
        config["clusters"][0]["cluster"]["server"] = changes["server"]
    if "token" in changes:
        config["users"][0]["user"]["token"] = changes["token"]
    path = tmp_path / f"kubeconfig-{len(list(tmp_path.glob('kubeconfig-*')))}"
    path.write_text(json.dumps(config))
    return path


def closed_port_url() -> str:
    """An address nothing listens on (port 1 is reserved and never bound by tests)."""
    return "http://127.0.0.1:1"


def update_orchestrator(ws: Workspace, **options: Any) -> None:
    stacks.update_component(ws, "k8s", ComponentType.ORCHESTRATOR, options)


def submitted_async(ws: Workspace, emulator: Emulator) -> str:
    """The name of an asynchronous run whose orchestrator Job exists and whose pod never
    starts (no kubelet)."""
    update_orchestrator(ws, synchronous=False)
    run = tiny.run_in(ws)
    assert run.status is ExecutionStatus.INITIALIZING
    assert len(names(emulator, JOBS)) == 1 and len(names(emulator, SECRETS)) == 1
    return run.name
