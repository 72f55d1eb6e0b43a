"""The process kubelet: runs the pods of a Kubernetes API server as local processes.

`Kubelet` talks to an API server (the test bed's emulator or a real kube-apiserver) only through
the official ``kubernetes`` client and a kubeconfig. It lists and watches pods (resuming from the
list's resourceVersion, re-listing after a 410 Expired or a dropped stream), binds pods without a
``spec.nodeName`` to its node (``bind_unscheduled``), and runs every pod bound to its node with a
`PodWorker` per pod uid (see ``kubelet_pod``). Images are names mapped to local Pythons; each
container's output goes to ``<log_dir>/<namespace>/<pod>/<container>.log``, which the emulator
serves on ``/log``. `stop()` kills and reaps every process it started. Command line::

    python -m tests.kube.kubelet --kubeconfig K --image NAME=PYTHON [--image ...]
        [--log-dir D] [--namespace NS] [--node-name N] [--no-bind] [--env NAME=VALUE ...]

runs until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from kubernetes.client import ApiException

from tests.kube.kubelet_api import TRANSPORT_ERRORS, KubeletApi
from tests.kube.kubelet_launch import WorkerContext
from tests.kube.kubelet_pod import PodWorker
from tests.kube.kubelet_process import ProcessTable, resolve_images
from tests.kube.kubelet_status import TERMINAL_PHASES

LOG = logging.getLogger("tests.kube.kubelet")
WATCH_TIMEOUT_SECONDS = 60
PASSED_THROUGH_ENV = ("HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME")


class Kubelet:
    """A kubelet for one node whose "containers" are local processes."""

    def __init__(
        self,
        kubeconfig: Path,
        *,
        node_name: str = "wharf-kubelet",
        images: Mapping[str, str],
        log_dir: Path | None = None,
        namespace: str | None = None,
        bind_unscheduled: bool = True,
        extra_env: Mapping[str, str] | None = None,
        image_pull_backoff: float = 1.0,
        restart_backoff: float = 0.2,
    ) -> None:
        """``images``: image name -> Python executable or venv directory. ``extra_env``: the
        "image's" own environment, given to every container before the pod's ``env``."""
        self.kubeconfig = Path(kubeconfig).absolute()
        self.node_name = node_name
        self.images = dict(images)
        self.namespace = namespace
        self.bind_unscheduled = bind_unscheduled
        self._requested_log_dir = log_dir
        self._extra_env = dict(extra_env or {})
        self._image_pull_backoff = image_pull_backoff
        self._restart_backoff = restart_backoff
        self._stopping = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._workers: dict[str, PodWorker] = {}
        self._finalising: set[str] = set()
        self._processes = ProcessTable()
        self._work_root: Path | None = None
        self._api: KubeletApi | None = None
        self._ctx: WorkerContext | None = None
        self._thread: threading.Thread | None = None
        self.log_dir: Path = Path()

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start watching (returns at once; see `wait_ready`)."""
        if self._thread is not None:
            raise RuntimeError("the kubelet is already started")
        self._work_root = Path(tempfile.mkdtemp(prefix="wharf-kubelet-"))
        self.log_dir = (self._requested_log_dir or self._work_root / "logs").absolute()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        runtimes = resolve_images(self.images, self._work_root / "images")
        self._api = KubeletApi(self.kubeconfig)
        base_env = {name: os.environ[name] for name in PASSED_THROUGH_ENV if name in os.environ}
        base_env.update(self._extra_env)
        self._ctx = WorkerContext(
            api=self._api,
            processes=self._processes,
            runtimes=runtimes,
            kubeconfig=self.kubeconfig,
            log_dir=self.log_dir,
            work_root=self._work_root,
            stopping=self._stopping,
            base_env=base_env,
            image_pull_backoff=self._image_pull_backoff,
            restart_backoff=self._restart_backoff,
        )
        self._thread = threading.Thread(target=self._watch_loop, daemon=True, name="kubelet-watch")
        self._thread.start()

    def wait_ready(self, timeout: float) -> bool:
        """Whether the first pod list succeeded within ``timeout`` seconds."""
        return self._ready.wait(timeout)

    def stop(self) -> None:
        """Stop watching, kill and reap every process started; prompt."""
        self._stopping.set()
        if self._api is not None:
            self._api.shutdown()
        self._processes.kill_all()
        with self._lock:
            workers = list(self._workers.values())
        for worker in workers:
            worker.forget()
        deadline = time.monotonic() + 2.0
        for worker in workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._api is not None:
            self._api.close()
        if self._work_root is not None:
            shutil.rmtree(self._work_root, ignore_errors=True)

    def __enter__(self) -> Kubelet:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def log_path(self, namespace: str, pod: str, container: str) -> Path:
        """Where a container's output is written."""
        return self.log_dir / namespace / pod / f"{container}.log"

    # ---- list and watch -------------------------------------------------------------------

    def _watch_loop(self) -> None:
        assert self._api is not None
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                items, resource_version = self._api.list_pods(self.namespace)
                self._reconcile(items)
                self._ready.set()
                backoff = 0.1
                while not self._stopping.is_set():
                    for event in self._api.watch_pods(
                        self.namespace, resource_version, WATCH_TIMEOUT_SECONDS
                    ):
                        if self._stopping.is_set():
                            return
                        resource_version = self._handle(event) or resource_version
            except ApiException as error:
                if error.status == 410:
                    LOG.info("pod watch expired (%s); re-listing", error.reason)
                    continue
                LOG.warning("pod list/watch failed: %s", error)
            except (*TRANSPORT_ERRORS, ValueError, KeyError) as error:
                if self._stopping.is_set():
                    return
                LOG.warning("pod list/watch failed: %r", error)
            if self._stopping.wait(backoff):
                return
            backoff = min(backoff * 2, 5.0)

    def _reconcile(self, pods: list[dict[str, Any]]) -> None:
        """After a (re-)list: forget pods that went away unseen, then observe every pod."""
        present = {pod["metadata"]["uid"] for pod in pods}
        with self._lock:
            vanished = [uid for uid in self._workers if uid not in present]
        for uid in vanished:
            self._forget(uid)
        for pod in pods:
            self._observe(pod)

    def _handle(self, event: dict[str, Any]) -> str | None:
        """Apply one watch event; returns its resourceVersion."""
        pod = event.get("object") or {}
        metadata = pod.get("metadata") or {}
        kind = event.get("type")
        if kind == "DELETED":
            self._forget(str(metadata.get("uid")))
        elif kind in ("ADDED", "MODIFIED"):
            self._observe(pod)
        version = metadata.get("resourceVersion")
        return None if version is None else str(version)

    def _forget(self, uid: str) -> None:
        with self._lock:
            worker = self._workers.pop(uid, None)
            self._finalising.discard(uid)
        if worker is not None:
            worker.forget()

    def _observe(self, pod: dict[str, Any]) -> None:
        if self._stopping.is_set():
            return
        metadata = pod["metadata"]
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node:
            if self.bind_unscheduled and not metadata.get("deletionTimestamp"):
                self._bind(pod)
            return
        if node != self.node_name:
            return
        uid = str(metadata["uid"])
        with self._lock:
            worker = self._workers.get(uid)
        if worker is not None:
            worker.observe(pod)
            if worker.finished.is_set() and metadata.get("deletionTimestamp"):
                self._finalise_later(pod)
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in TERMINAL_PHASES or metadata.get("deletionTimestamp"):
            if metadata.get("deletionTimestamp"):
                self._finalise_later(pod)
            return
        assert self._ctx is not None
        worker = PodWorker(pod, self._ctx, recovered=_was_started(pod))
        with self._lock:  # registered and started together: stop() joins only started workers
            if self._stopping.is_set():
                return
            self._workers[uid] = worker
            worker.start()

    def _bind(self, pod: dict[str, Any]) -> None:
        assert self._api is not None
        metadata = pod["metadata"]
        try:
            self._api.bind(metadata["namespace"], metadata["name"], self.node_name)
        except (ApiException, *TRANSPORT_ERRORS) as error:
            LOG.warning(
                "binding pod %s/%s failed: %s", metadata["namespace"], metadata["name"], error
            )

    def _finalise_later(self, pod: dict[str, Any]) -> None:
        """Confirm the graceful deletion of a pod with nothing (left) running, off-thread."""
        metadata = pod["metadata"]
        uid = str(metadata["uid"])
        with self._lock:
            if uid in self._finalising:
                return
            self._finalising.add(uid)
        api = self._api
        assert api is not None

        def finalise() -> None:
            try:
                api.finalise_deletion(metadata["namespace"], metadata["name"], uid, self._stopping)
            except Exception as error:
                LOG.warning(
                    "finalising pod %s/%s failed: %s",
                    metadata["namespace"],
                    metadata["name"],
                    error,
                )
                with self._lock:
                    self._finalising.discard(uid)

        threading.Thread(target=finalise, daemon=True, name=f"finalise-{uid[:8]}").start()


def _was_started(pod: dict[str, Any]) -> bool:
    """Whether a (previous) kubelet already started this pod's containers."""
    status = pod.get("status") or {}
    if status.get("phase") == "Running":
        return True
    return any(
        "running" in (c.get("state") or {}) or "terminated" in (c.get("state") or {})
        for c in status.get("containerStatuses") or []
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.kube.kubelet",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--kubeconfig", required=True, type=Path)
    parser.add_argument("--image", action="append", default=[], metavar="NAME=PYTHON")
    parser.add_argument("--log-dir", type=Path)
    parser.add_argument("--namespace")
    parser.add_argument("--node-name", default="wharf-kubelet")
    parser.add_argument("--no-bind", action="store_true", help="leave unscheduled pods alone")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="the image's own environment, given to every container before the pod's env",
    )
    options = parser.parse_args(argv)
    images: dict[str, str] = {}
    for item in options.image:
        name, separator, python = item.partition("=")
        if not separator or not name or not python:
            parser.error(f"--image wants NAME=PYTHON, got {item!r}")
        images[name] = python
    extra_env: dict[str, str] = {}
    for item in options.env:
        name, separator, value = item.partition("=")
        if not separator or not name:
            parser.error(f"--env wants NAME=VALUE, got {item!r}")
        extra_env[name] = value
    logging.basicConfig(level=logging.INFO, format="%(asctime)s kubelet %(levelname)s %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    kubelet = Kubelet(
        options.kubeconfig,
        node_name=options.node_name,
        images=images,
        log_dir=options.log_dir,
        namespace=options.namespace,
        bind_unscheduled=not options.no_bind,
        extra_env=extra_env,
    )
    with kubelet:
        LOG.info(
            "node %s watching pods (%s)", options.node_name, options.namespace or "all namespaces"
        )
        stop.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
