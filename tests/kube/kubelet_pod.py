"""One pod run by the process kubelet: a `PodWorker` thread per pod uid.

The worker owns the pod's lifecycle from the moment the kubelet sees it bound to its node:
report ``Pending``/``ContainerCreating``; resolve images (an unknown image waits in
``ErrImagePull``/``ImagePullBackOff`` forever, never runs); resolve each container's environment
(a missing secret/config map/key waits in ``CreateContainerConfigError``, retried); run init
containers one after the other, then the containers in parallel, each as a local process group;
report ``Running`` and, when they end, ``Succeeded``/``Failed`` with exit codes, restarting per
``restartPolicy`` (OnFailure/Always); a container whose processes hold more resident memory than
its ``limits.memory`` is SIGKILLed and reported ``OOMKilled`` (exit code 137). A graceful deletion (``deletionTimestamp``) sends SIGTERM to
every container, SIGKILL after ``deletionGracePeriodSeconds``, reports the terminated states and
finalises the deletion (delete with grace 0). A pod deleted outright, or the kubelet stopping,
kills its processes at once and reports nothing. Status writes happen only on this thread, in
order; the kubelet's watch thread only calls `observe`/`forget`.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Any

from tests.kube.kubelet_api import Aborted
from tests.kube.kubelet_env import ContainerConfigError, EnvironmentBuilder
from tests.kube.kubelet_launch import (
    ApiObjects,
    Launch,
    WorkerContext,
    container_run,
    launch_config,
)
from tests.kube.kubelet_process import (
    RuntimeClosed,
    exit_code_of,
    group_memory_bytes,
    lookup_image,
    process_memory_bytes,
    signal_group,
)
from tests.kube.kubelet_status import (
    ConditionBook,
    ContainerRun,
    pod_phase,
    render_status,
    timestamp,
)

LOG = logging.getLogger("tests.kube.kubelet")
START_ERROR_CODE = 128
LOST_CODE = 137
MEMORY_POLL_SECONDS = 0.1  # the main process's memory; the whole group's every 10th poll
GROUP_SCAN_EVERY = 10


class _Gone(Exception):
    """The pod was deleted outright or the kubelet is stopping: kill, report nothing."""


class _DeleteRequested(Exception):
    """The pod is being deleted gracefully: stop the containers, report, finalise."""


class PodWorker:
    """Runs one pod (one uid) on its own daemon thread."""

    def __init__(self, pod: dict[str, Any], ctx: WorkerContext, *, recovered: bool = False):
        metadata = pod["metadata"]
        self.namespace = str(metadata.get("namespace") or "default")
        self.name = str(metadata["name"])
        self.uid = str(metadata["uid"])
        self.finished = threading.Event()
        self._ctx = ctx
        self._pod = pod
        self._recovered = recovered
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._grace: int | None = None
        self._gone = False
        spec = pod.get("spec") or {}
        self._policy = str(spec.get("restartPolicy") or "Always")
        self._init = [container_run(c) for c in spec.get("initContainers") or []]
        self._main = [container_run(c) for c in spec.get("containers") or []]
        self._launched: set[str] = set()
        self._memory_polls = 0
        self._conditions = ConditionBook()
        self._start_time = (pod.get("status") or {}).get("startTime") or timestamp()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name=f"pod-{self.namespace}/{self.name}"
        )
        self.observe(pod)

    # ---- called from the kubelet's watch thread -------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def observe(self, pod: dict[str, Any]) -> None:
        """The pod as last seen; a deletionTimestamp starts the graceful stop."""
        metadata = pod.get("metadata") or {}
        with self._lock:
            self._pod = pod
            if metadata.get("deletionTimestamp") and self._grace is None:
                grace = metadata.get("deletionGracePeriodSeconds")
                if grace is None:
                    grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30)
                self._grace = max(0, int(grace))
        self._wake.set()

    def forget(self) -> None:
        """The pod is gone from the API server: kill its processes now, report nothing."""
        self._gone = True
        for run in [*self._init, *self._main]:
            if run.process is not None:
                signal_group(run.process, signal.SIGKILL)
        self._wake.set()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # ---- the worker thread ------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._execute()
            if self._grace is not None and not self._interrupted():
                self._finalise()
        except _DeleteRequested:
            self._terminate_gracefully()
        except (_Gone, Aborted, RuntimeClosed):
            pass
        except Exception:
            LOG.exception("pod %s/%s: the process kubelet failed running it", *self._key())
        finally:
            for run in [*self._init, *self._main]:
                if run.process is not None and run.process.poll() is None:
                    signal_group(run.process, signal.SIGKILL)
            self.finished.set()

    def _key(self) -> tuple[str, str]:
        return self.namespace, self.name

    def _interrupted(self) -> bool:
        return self._gone or self._ctx.stopping.is_set()

    def _check(self) -> None:
        if self._interrupted():
            raise _Gone
        if self._grace is not None:
            raise _DeleteRequested

    def _pause(self, seconds: float | None) -> None:
        self._wake.wait(seconds)
        self._wake.clear()
        self._check()

    def _report(self, phase: str | None = None) -> None:
        """Patch the pod's status (retried); a graceful deletion does not stop the report."""
        if self._interrupted():
            raise _Gone
        status = render_status(
            phase=phase or pod_phase(self._policy, self._init, self._main),
            start_time=self._start_time,
            conditions=self._conditions,
            init=self._init,
            main=self._main,
        )
        if not self._ctx.api.patch_status(self.namespace, self.name, status, self._ctx.stopping):
            self._gone = True
            raise _Gone

    def _execute(self) -> None:
        if not self._main:
            return
        for run in self._init:
            run.wait("PodInitializing")
        for run in self._main:
            run.wait("PodInitializing" if self._init else "ContainerCreating")
        if self._recovered and self._recover():
            return
        self._report("Pending")
        self._check()
        self._pull_images()
        launches = self._configure()
        for run in self._init:
            if not self._run_init_container(run, launches[run.name]):
                return
        self._run_containers(launches)

    def _recover(self) -> bool:
        """A pod a previous kubelet started: its processes are gone. Never -> Failed; otherwise
        run again, one restart more. True when the pod is finished."""
        previous = {
            status.get("name"): status
            for status in (self._pod.get("status") or {}).get("containerStatuses") or []
        }
        for run in self._main:
            run.restart_count = int((previous.get(run.name) or {}).get("restartCount") or 0)
        if self._policy != "Never":
            for run in [*self._init, *self._main]:
                self._launched.add(run.name)
            return False
        for run in self._main:
            state = (previous.get(run.name) or {}).get("state") or {}
            if "terminated" in state:
                run.state = {"terminated": state["terminated"]}
            else:
                run.finish(LOST_CODE, message="the process kubelet restarted; the process is gone")
        self._report("Failed")
        return True

    # ---- images and configuration -------------------------------------------------------------

    def _pull_images(self) -> None:
        runs = [*self._init, *self._main]
        missing: list[ContainerRun] = []
        for run in runs:
            runtime = lookup_image(self._ctx.runtimes, str(run.spec.get("image") or ""))
            if runtime is None:
                missing.append(run)
            else:
                run.image_id = runtime.image_id
        backoff = self._ctx.image_pull_backoff
        while missing:
            known = ", ".join(sorted(self._ctx.runtimes)) or "none"
            for run in missing:
                image = run.spec.get("image")
                run.wait(
                    "ErrImagePull",
                    f'failed to pull image "{image}": the process kubelet has no such image '
                    f"(configured images: {known})",
                )
            self._report("Pending")
            self._pause(self._ctx.image_pull_backoff / 2)
            for run in missing:
                run.wait("ImagePullBackOff", f'Back-off pulling image "{run.spec.get("image")}"')
            self._report("Pending")
            self._pause(backoff)
            backoff = min(backoff * 2, 30.0)

    def _configure(self) -> dict[str, Launch]:
        """Every container's command, environment and directory; waits out missing references."""
        while True:
            builder = EnvironmentBuilder(self._pod, ApiObjects(self._ctx.api, self._ctx.stopping))
            launches: dict[str, Launch] = {}
            failed = False
            for run in [*self._init, *self._main]:
                try:
                    launches[run.name] = launch_config(self._ctx, self._pod, run, builder)
                except ContainerConfigError as error:
                    run.wait("CreateContainerConfigError", str(error))
                    failed = True
            if not failed:
                return launches
            self._report("Pending")
            self._pause(self._ctx.config_retry)

    # ---- running containers -------------------------------------------------------------------

    def _launch(self, run: ContainerRun, launch: Launch) -> None:
        """Start the container's process (or record why it could not start)."""
        self._check()
        log_path = self._ctx.log_dir / self.namespace / self.name / f"{run.name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        previous_log = log_path.with_name(f"{run.name}.previous.log")
        if run.name in self._launched:
            run.restart_count += 1
            if log_path.exists():
                log_path.replace(previous_log)
        else:  # a new pod, perhaps under the name of an older one
            log_path.write_bytes(b"")
            previous_log.unlink(missing_ok=True)
        self._launched.add(run.name)
        if not launch.argv:
            run.finish(
                START_ERROR_CODE,
                reason="StartError",
                message="image entrypoint unknown: the container has neither command nor args",
            )
            return
        try:
            process = self._ctx.processes.spawn(
                launch.argv,
                env=launch.env,
                cwd=launch.cwd,
                log_path=log_path,
                on_exit=self._wake.set,
                nice=launch.nice,
            )
        except OSError as error:
            run.finish(
                START_ERROR_CODE,
                reason="StartError",
                message=f"failed to start {launch.argv[0]!r}: {error.strerror or error}",
            )
            return
        run.start(process)

    def _record_exit(self, run: ContainerRun) -> None:
        assert run.process is not None and run.process.returncode is not None
        if run.oom_killed:
            run.finish(LOST_CODE, reason="OOMKilled")
        else:
            run.finish(exit_code_of(run.process.returncode))

    def _enforce_memory_limits(self, runs: list[ContainerRun]) -> None:
        """SIGKILL a container whose processes hold more memory than its limit (an OOM kill)."""
        self._memory_polls += 1
        whole_group = self._memory_polls % GROUP_SCAN_EVERY == 0
        for run in runs:
            if run.memory_limit is None or not run.running or run.process is None:
                continue
            pid = run.process.pid
            used = group_memory_bytes(pid) if whole_group else process_memory_bytes(pid)
            if not run.oom_killed and used > run.memory_limit:
                run.oom_killed = True
                signal_group(run.process, signal.SIGKILL)

    def _pause_until(self, restart_at: list[float], runs: list[ContainerRun]) -> None:
        """Sleep until woken, the next restart is due, or the next memory check."""
        deadlines = list(restart_at)
        if any(run.memory_limit is not None and run.running for run in runs):
            deadlines.append(time.monotonic() + MEMORY_POLL_SECONDS)
        self._pause(max(0.0, min(deadlines) - time.monotonic()) if deadlines else None)
        self._enforce_memory_limits(runs)

    def _restarts(self, run: ContainerRun) -> bool:
        if self._policy == "Always":
            return True
        return self._policy == "OnFailure" and run.exit_code != 0

    def _schedule_restart(self, run: ContainerRun) -> None:
        delay = min(self._ctx.restart_backoff * 2 ** min(run.restart_count, 10), 10.0)
        run.last_state = run.state
        run.restart_at = time.monotonic() + delay
        run.wait(
            "CrashLoopBackOff",
            f"back-off {delay:.1f}s restarting failed container={run.name} pod={self.name}",
        )

    def _run_init_container(self, run: ContainerRun, launch: Launch) -> bool:
        """Run an init container until it succeeds; False when the pod failed instead."""
        while True:
            self._launch(run, launch)
            self._report()
            while run.process is not None and run.running and run.process.poll() is None:
                self._pause_until([], [run])
            if run.running:
                self._record_exit(run)
            if run.exit_code == 0:
                return True
            if self._policy == "Never":
                self._report("Failed")
                return False
            self._schedule_restart(run)
            self._report()
            assert run.restart_at is not None
            while time.monotonic() < run.restart_at:
                self._pause(run.restart_at - time.monotonic())

    def _run_containers(self, launches: dict[str, Launch]) -> None:
        for run in self._main:
            self._launch(run, launches[run.name])
            if run.terminated is not None and self._restarts(run):
                self._schedule_restart(run)
        self._report()
        while True:
            changed = False
            for run in self._main:
                if run.running and run.process is not None and run.process.poll() is not None:
                    self._record_exit(run)
                    changed = True
                    if self._restarts(run):
                        self._schedule_restart(run)
                if run.restart_at is not None and time.monotonic() >= run.restart_at:
                    self._launch(run, launches[run.name])
                    changed = True
                    if run.terminated is not None and self._restarts(run):
                        self._schedule_restart(run)
            phase = pod_phase(self._policy, self._init, self._main)
            if changed:
                self._report(phase)
            if phase in ("Succeeded", "Failed"):
                return
            pending = [run.restart_at for run in self._main if run.restart_at is not None]
            self._pause_until(pending, self._main)

    # ---- deletion -------------------------------------------------------------------------

    def _terminate_gracefully(self) -> None:
        """SIGTERM every container, SIGKILL after the grace period, report, finalise."""
        live = [
            run for run in [*self._init, *self._main] if run.running and run.process is not None
        ]
        for run in live:
            assert run.process is not None
            signal_group(run.process, signal.SIGTERM)
        deadline = time.monotonic() + (self._grace or 0)
        while not self._interrupted() and any(
            run.process is not None and run.process.poll() is None for run in live
        ):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._wake.wait(remaining)
            self._wake.clear()
        for run in live:
            assert run.process is not None
            if run.process.poll() is None:
                signal_group(run.process, signal.SIGKILL)
                run.process.wait()
        if self._interrupted():
            return
        try:
            if live:
                for run in live:
                    self._record_exit(run)
                for run in self._main:
                    run.restart_at = None
                succeeded = all(run.exit_code == 0 for run in self._main)
                self._report("Succeeded" if succeeded else "Failed")
            self._finalise()
        except (_Gone, Aborted):
            pass

    def _finalise(self) -> None:
        self._ctx.api.finalise_deletion(self.namespace, self.name, self.uid, self._ctx.stopping)
