"""The team bed: :mod:`.testbed`'s cluster and project, with a real workspace server as store.

The server is the server tests' ``world`` (a uvicorn server on a local port, its own SQLite
database, principals of every role). The user is a project member of project ``A`` who reaches
the server with ``WHARF_SERVER_URL`` and the member's login token; its stack ``k8s`` is a
Kubernetes orchestrator with the bed's ``remote`` artifact store (moto S3).

Invariants: the test process's environment names no store, server, credential, project or
``PYTHONPATH`` of the caller; the member's scripts run with the caller's environment minus every
``WHARF_`` variable, plus the member's and ``KUBECONFIG`` (the emulator's); the workspace is
closed before the cluster stops.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.artifacts.s3_server import MotoServer
from tests.integrations.kubernetes.testbed import (
    IMAGE,
    Bed,
    cluster,
    register_kubernetes_stack,
    register_remote_store,
    write_project,
)
from tests.kube.emulator.clock import FakeClock
from tests.server.conftest import World
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace


@dataclass
class TeamBed(Bed):
    """A :class:`~.testbed.Bed` whose workspace is the member's, on the server ``server``."""

    server: World


@contextmanager
def open_team_bed(
    server: World,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
    project_files: Mapping[str, str],
    *,
    clock: FakeClock | None = None,
) -> Iterator[TeamBed]:
    """The member's bed on ``server`` (the cluster on ``clock``, else the system's)."""
    member = {
        "WHARF_HOME": str(tmp_path / "home"),
        "WHARF_SERVER_URL": server.url,
        "WHARF_API_KEY": str(server.credentials["member"]),
        "WHARF_PROJECT": "A",
        "WHARF_ACTIVE_STACK": "k8s",
        "WHARF_HEARTBEAT_INTERVAL": "2",
    }
    beds = open_user_bed(
        member, tmp_path, monkeypatch, s3_server, s3_bucket, project_files, clock=clock
    )
    with beds as bed:
        yield TeamBed(
            bed.emulator, bed.kubelet, bed.seen, bed.workspace, bed.project, bed.env, server
        )


@contextmanager
def open_user_bed(
    user: Mapping[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    s3_server: MotoServer,
    s3_bucket: str,
    project_files: Mapping[str, str],
    *,
    clock: FakeClock | None = None,
) -> Iterator[Bed]:
    """The cluster and the project of a user whose environment is ``user`` (a server URL and
    credential among it), with stack ``k8s`` (the Kubernetes orchestrator, the bed's remote
    artifact store) registered in the user's workspace."""
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    project = write_project(tmp_path, project_files)
    with cluster(tmp_path, clock) as running:
        workspace = Workspace.open(load_config(dict(user)))
        try:
            register_remote_store(workspace, s3_server, s3_bucket)
            register_kubernetes_stack(
                workspace,
                "k8s",
                {"image": IMAGE, "namespace": "default", "job_monitoring_interval": 0.5},
            )
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("WHARF_")},
                **user,
                "KUBECONFIG": str(running.emulator.kubeconfig_path),  # the user's cluster
            }
            yield Bed(running.emulator, running.kubelet, running.seen, workspace, project, env)
        finally:
            workspace.close()


def secret_values(secret: dict[str, Any]) -> list[str]:
    """The values a Secret holds, decoded (``data``) or plain (``stringData``)."""
    data = secret.get("data") or {}
    plain = secret.get("stringData") or {}
    return [base64.b64decode(v).decode() for v in data.values()] + list(plain.values())


def env_of(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The env entries of every container (init containers included) of a pod (template)."""
    spec = pod["spec"]
    containers = [*spec.get("initContainers", []), *spec["containers"]]
    return [entry for c in containers for entry in c.get("env", [])]
