"""Pod logs for ``GET …/pods/{name}/log``: which file to serve, the real server's refusals, follow.

The process kubelet writes each container's output to ``<log_dir>/<ns>/<pod>/<container>.log``
(``<container>.previous.log`` for a restarted container's last run). ``resolve`` picks the
container and refuses with 400 as a real API server + kubelet do: a pod with several containers
and none named, an unknown container, a pod not bound to a node yet (``pod "x" does not have a
host assigned``, as servers since 1.2x say; 1.20 answered 204), a container still waiting to
start, ``previous`` without a previous run. ``follow`` streams the file as it grows until the
container or pod is finished and the file is drained, the pod is gone, or the client leaves.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.kube.emulator.errors import ApiError, bad_request
from tests.kube.emulator.resources import PODS

if TYPE_CHECKING:
    from tests.kube.emulator.store import ObjectStore
    from tests.kube.emulator.streams import ChunkedResponse

POLL_SECONDS = 0.05
READ_SIZE = 64 * 1024
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class LogTarget:
    namespace: str
    pod: str
    container: str
    path: Path


def log_path(log_dir: Path, namespace: str, pod: str, container: str, previous: bool) -> Path:
    suffix = ".previous.log" if previous else ".log"
    return log_dir / namespace / pod / f"{container}{suffix}"


def resolve(
    store: ObjectStore,
    log_dir: Path,
    namespace: str,
    name: str,
    container: str | None,
    previous: bool,
) -> LogTarget:
    """The log file to serve, or a 400/404 ``ApiError``."""
    pod = store.get(PODS, namespace, name)
    container = _choose_container(pod, container)
    if not pod.get("spec", {}).get("nodeName"):
        raise bad_request(f"pod {name} does not have a host assigned")
    _check_started(pod, container, previous)
    return LogTarget(
        namespace, name, container, log_path(log_dir, namespace, name, container, previous)
    )


def _names(containers: list[dict[str, Any]] | None) -> list[str]:
    return [c["name"] for c in containers or []]


def _choose_container(pod: dict[str, Any], container: str | None) -> str:
    spec = pod.get("spec", {})
    names, init_names = _names(spec.get("containers")), _names(spec.get("initContainers"))
    pod_name = pod["metadata"]["name"]
    if container:
        if container not in names and container not in init_names:
            raise bad_request(f"container {container} is not valid for pod {pod_name}")
        return container
    if len(names) == 1:
        return names[0]
    if not names:
        raise bad_request(f"a container name must be specified for pod {pod_name}")
    message = (
        f"a container name must be specified for pod {pod_name}, choose one of: [{' '.join(names)}]"
    )
    if init_names:
        message += f" or one of the init containers: [{' '.join(init_names)}]"
    raise bad_request(message)


def _container_status(pod: dict[str, Any], container: str) -> dict[str, Any] | None:
    status: dict[str, Any] = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for entry in status.get(key) or []:
            if isinstance(entry, dict) and entry.get("name") == container:
                return entry
    return None


def _check_started(pod: dict[str, Any], container: str, previous: bool) -> None:
    """Refuse as the kubelet does for a container with nothing to show yet."""
    pod_name = pod["metadata"]["name"]
    entry = _container_status(pod, container) or {}
    state = entry.get("state") or {}
    last = (entry.get("lastState") or {}).get("terminated")
    if previous:
        if not last:
            raise bad_request(
                f'previous terminated container "{container}" in pod "{pod_name}" not found'
            )
        return
    if state.get("running") or state.get("terminated") or last:
        return
    reason = (state.get("waiting") or {}).get("reason") or "ContainerCreating"
    why = {
        "ErrImagePull": "image can't be pulled",
        "ImagePullBackOff": "trying and failing to pull image",
    }.get(reason, reason)
    raise bad_request(f'container "{container}" in pod "{pod_name}" is waiting to start: {why}')


def read(path: Path, tail_lines: int | None, limit_bytes: int | None) -> tuple[bytes, int]:
    """The log's content (last ``tail_lines`` lines, at most ``limit_bytes``) and the file
    offset its end corresponds to (where a follow continues)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return b"", 0
    end = len(data)
    if tail_lines is not None:
        data = _tail(data, max(tail_lines, 0))
    if limit_bytes is not None and limit_bytes > 0:
        data = data[:limit_bytes]
    return data, end


def _tail(data: bytes, lines: int) -> bytes:
    if lines == 0:
        return b""
    kept = data.splitlines(keepends=True)[-lines:]
    return b"".join(kept)


def follow(
    response: ChunkedResponse,
    store: ObjectStore,
    target: LogTarget,
    offset: int,
    stopping: threading.Event,
) -> None:
    """Stream the log from ``offset`` while it grows; ends when the container is done and the
    file is drained, the pod is gone, the client leaves or the server stops."""
    while not stopping.is_set():
        finished = _finished(store, target)
        chunk = _read_from(target.path, offset)
        while chunk:
            if not response.write(chunk):
                return
            offset += len(chunk)
            chunk = _read_from(target.path, offset)
        if finished:
            response.finish()
            return
        if response.client_gone():
            return
        stopping.wait(POLL_SECONDS)
    response.drop()


def _read_from(path: Path, offset: int) -> bytes:
    try:
        with path.open("rb") as stream:
            stream.seek(offset)
            return stream.read(READ_SIZE)
    except FileNotFoundError:
        return b""


def _finished(store: ObjectStore, target: LogTarget) -> bool:
    """Whether no more output can come (checked before the last read, so none is lost)."""
    try:
        pod = store.get(PODS, target.namespace, target.pod)
    except ApiError as error:
        if error.code == 404:
            return True
        raise
    if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return True
    entry = _container_status(pod, target.container) or {}
    return bool((entry.get("state") or {}).get("terminated"))
