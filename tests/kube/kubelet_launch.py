"""How the process kubelet starts a container: its command line, environment and directory.

Owns `WorkerContext` (what every pod worker of one kubelet shares), `launch_config` (a container's
argv — ``command`` + ``args`` with ``$(VAR)`` expansion, ``args`` alone when ``command`` is empty —
its environment and working directory) and `container_run` (a `ContainerRun` with its memory
limit). The environment, in increasing precedence: the kubelet's pass-through variables and the
"image's" ``extra_env``; ``PATH`` with the image's Python first; ``HOSTNAME`` (the pod's name);
``KUBECONFIG`` (the kubelet's, standing in for the in-cluster service account);
``PYTHONUNBUFFERED=1`` (so output reaches the log line by line); the ``WHARF_KUBELET_LIMIT_*`` /
``WHARF_KUBELET_REQUEST_*`` resource variables; the pod's own ``envFrom``/``env``. The working
directory is ``workingDir`` (created if missing) or a fresh directory per pod. Its CPU weight
is a nice value that follows its CPU request (`tests.kube.kubelet_cpu_weight`).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.kube.kubelet_api import KubeletApi
from tests.kube.kubelet_cpu_weight import container_nice
from tests.kube.kubelet_env import (
    EnvironmentBuilder,
    effective_resources,
    expand_references,
    parse_quantity,
    resource_variables,
)
from tests.kube.kubelet_process import ImageRuntime, ProcessTable, lookup_image
from tests.kube.kubelet_status import ContainerRun

DEFAULT_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


@dataclass(frozen=True)
class WorkerContext:
    """What every pod worker of one kubelet shares."""

    api: KubeletApi
    processes: ProcessTable
    runtimes: dict[str, ImageRuntime]
    kubeconfig: Path
    log_dir: Path
    work_root: Path
    stopping: threading.Event
    base_env: dict[str, str]
    image_pull_backoff: float = 1.0
    config_retry: float = 0.5
    restart_backoff: float = 0.2


class ApiObjects:
    """`ObjectSource` over the API, giving up when the kubelet stops."""

    def __init__(self, api: KubeletApi, abort: threading.Event) -> None:
        self._api, self._abort = api, abort

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._api.read_secret(namespace, name, self._abort)

    def config_map(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self._api.read_config_map(namespace, name, self._abort)


@dataclass(frozen=True)
class Launch:
    """What a container's process is started with."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    nice: int = 0


def container_run(spec: dict[str, Any]) -> ContainerRun:
    """A container about to be run, with its memory limit in bytes (if any)."""
    limit = effective_resources(spec)[0].get("memory")
    memory_limit = None if limit is None else int(parse_quantity(limit))
    return ContainerRun(dict(spec), memory_limit=memory_limit)


def launch_config(
    ctx: WorkerContext, pod: dict[str, Any], run: ContainerRun, builder: EnvironmentBuilder
) -> Launch:
    """The container's argv, environment and working directory (raises ContainerConfigError)."""
    metadata = pod["metadata"]
    namespace, name, uid = metadata.get("namespace", "default"), metadata["name"], metadata["uid"]
    defined = builder.container_env(run.spec)
    command = [expand_references(str(c), defined) for c in run.spec.get("command") or []]
    args = [expand_references(str(a), defined) for a in run.spec.get("args") or []]
    runtime = lookup_image(ctx.runtimes, str(run.spec.get("image") or ""))
    assert runtime is not None
    env = dict(ctx.base_env)
    env["PATH"] = os.pathsep.join([*map(str, runtime.path_dirs), *DEFAULT_PATH])
    env["HOSTNAME"] = str(name)
    env["KUBECONFIG"] = str(ctx.kubeconfig)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(resource_variables(run.spec))
    env.update(defined)
    working_dir = run.spec.get("workingDir")
    if working_dir:
        cwd = Path(str(working_dir))
    else:
        cwd = ctx.work_root / "pods" / f"{namespace}_{name}_{str(uid)[:8]}"
    cwd.mkdir(parents=True, exist_ok=True)
    requests = {k: parse_quantity(v) for k, v in effective_resources(run.spec)[1].items()}
    return Launch(command + args, env, cwd, container_nice(requests))
