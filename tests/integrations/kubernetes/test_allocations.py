"""Allocation-aware step pods (issue 27 §3), end to end on the test bed: steps of pipelines on a
Kubernetes stack that ask for a licence, held and waited for across runs, reclaimed and lost.

Each run is submitted asynchronously by a script in a directory of its own (the steps reach the
pods through the run's code archive); the process kubelet runs the orchestrator pod and the step
pods as processes of this machine (for a lost node, the step operator's pod of a local run: the
kubelet is stopped, killing its processes, and nobody reports on its pods any more); artifacts lie on a real S3 server (moto); the metadata store
is the embedded SQLite file, and the embedded Resource Manager beside it is the one every pod
(orchestrator and step) asks, renews and releases through. What the emulator did to pods and
Jobs is recorded by a listener on its object store (created, last state, deleted), so objects
deleted after their step still count. The pod-spec side of allocations (requests/limits, node
selectors from target settings, the request id annotation) is tested by the step operator's GPU
test (``test_step_operator.py``); here the request id annotation is checked on every pod."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.emulator import Emulator
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from wharf.config.global_config import load_config
from wharf.core.enums import (
    ComponentType,
    ExecutionStatus,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
)
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY, STEP_RUN_ID_KEY
from wharf.resource_manager.contract.models import PolicyCreate, ResourceRequestInfo
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.sdk import stacks
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

IMAGE = "wharf/python:3.11"
BOUND = 240  # seconds: a hang fails the test instead of blocking it
GRACE = 30  # the step pods' pod_stop_grace_period (the default)
HEARTBEAT = 3  # seconds between a step's heartbeats (a step pod is lost 16 s without one)

STEPS_MODULE = """
import os
import pathlib
import time

from wharf import ResourceSettings, pipeline, step


def _hold(path: str, started: str, marker: str) -> str:
    if started:
        pathlib.Path(started).write_text(os.environ.get("HOSTNAME", ""))
    try:
        deadline = time.monotonic() + 200
        while not pathlib.Path(path).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        return os.environ.get("HOSTNAME", "")
    finally:
        if marker:
            with open(marker, "a") as out:
                out.write("cleanup\\n")


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def hold_licence(path: str, started: str = "", marker: str = "") -> str:
    return _hold(path, started, marker)


@pipeline(enable_cache=False, raise_on_failure=False)
def licensed(path: str, started: str = "", marker: str = "") -> None:
    hold_licence(path, started, marker)


@step(
    enable_cache=False,
    retry={"max_retries": 1},
    settings={
        "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
    },
)
def hold_reclaimable(path: str, started: str = "", marker: str = "") -> str:
    return _hold(path, started, marker)


@pipeline(name="low_pipe", enable_cache=False, raise_on_failure=False)
def low_pipe(path: str, started: str, marker: str) -> None:
    hold_reclaimable(path, started, marker)


@pipeline(name="high_pipe", enable_cache=False, raise_on_failure=False)
def high_pipe(path: str) -> None:
    hold_licence(path)


@step(
    step_operator="k8s-op",
    enable_cache=False,
    settings={"resources": ResourceSettings(resources={"license": 1})},
)
def hold_on_operator(path: str, started: str = "") -> str:
    return _hold(path, started, "")


@pipeline(enable_cache=False, raise_on_failure=False)
def operated(path: str, started: str = "") -> None:
    hold_on_operator(path, started)
"""

SCRIPT = """
import json
import sys

import k8s_alloc_steps

if __name__ == "__main__":
    run = getattr(k8s_alloc_steps, sys.argv[1])(**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


@dataclass
class Seen:
    """What the emulator did to pods and Jobs: each as created, each pod's last state, the
    names of the deleted ones."""

    created: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    last: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod name -> last state
    deleted: set[tuple[str, str]] = field(default_factory=set)  # (kind, name)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: WatchEvent) -> None:
        if event.rtype is None or event.rtype.kind not in ("Pod", "Job"):
            return
        kind, name = event.rtype.kind, str(event.object["metadata"]["name"])
        with self.lock:
            if event.type == "ADDED":
                self.created.setdefault(kind, []).append(event.object)
            if kind == "Pod":
                self.last[name] = event.object
            if event.type == "DELETED":
                self.deleted.add((kind, name))

    def step_objects(self, kind: str, run: PipelineRunRecord) -> list[dict[str, Any]]:
        """The step Jobs or pods (not the orchestrator's) created for ``run``, as created."""
        with self.lock:
            objects = list(self.created.get(kind, []))
        return [
            o
            for o in objects
            if o["metadata"].get("labels", {}).get(RUN_ID_KEY) == str(run.id)
            and STEP_KEY in o["metadata"]["labels"]
        ]

    def last_state(self, pod: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            return self.last[pod["metadata"]["name"]]

    def gone(self, kind: str, obj: dict[str, Any]) -> bool:
        with self.lock:
            return (kind, obj["metadata"]["name"]) in self.deleted


@dataclass
class Bed:
    emulator: Emulator
    kubelet: Kubelet
    seen: Seen
    workspace: Workspace
    project: Path
    env: dict[str, str]


@pytest.fixture
def bed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: MotoServer, s3_bucket: str
) -> Iterator[Bed]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_SERVER_URL", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    project = tmp_path / "project"
    project.mkdir()
    (project / "k8s_alloc_steps.py").write_text(STEPS_MODULE)
    (project / "run.py").write_text(SCRIPT)
    with Emulator() as emulator:
        seen = Seen()
        emulator.store.subscribe(seen)
        monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))  # the user's cluster
        with Kubelet(
            emulator.kubeconfig_path,
            images={IMAGE: sys.executable},
            log_dir=emulator.log_dir,
            extra_env={**CREDENTIALS, "WHARF_HOME": str(tmp_path / "pod-home")},  # the image's
        ) as kubelet:
            assert kubelet.wait_ready(10)
            ws = Workspace.open(load_config())
            try:
                stacks.register_component(
                    ws,
                    "remote",
                    ComponentType.ARTIFACT_STORE,
                    "fsspec",
                    {"path": f"s3://{s3_bucket}/wharf", "endpoint_url": s3_server.endpoint},
                )
                stacks.register_component(
                    ws,
                    "k8s",
                    ComponentType.ORCHESTRATOR,
                    "kubernetes",
                    {
                        "image": IMAGE,
                        "namespace": "default",
                        "synchronous": False,
                        "job_monitoring_interval": 0.5,
                        "pod_stop_grace_period": GRACE,
                    },
                )
                stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="remote")
                stacks.register_component(
                    ws,
                    "k8s-op",
                    ComponentType.STEP_OPERATOR,
                    "kubernetes",
                    {"image": IMAGE, "kubeconfig": str(emulator.kubeconfig_path)},
                )
                stacks.register_stack(
                    ws,
                    "operated",
                    orchestrator="default",
                    artifact_store="remote",
                    step_operator="k8s-op",
                )
                env = {**os.environ, "WHARF_HEARTBEAT_INTERVAL": str(HEARTBEAT)}
                yield Bed(emulator, kubelet, seen, ws, project, env)
            finally:
                ws.close()


def submit(bed: Bed, pipeline: str, **parameters: Any) -> PipelineRunRecord:
    """Submit ``pipeline`` through the project's script (returns once the orchestrator Job
    exists: the stack is asynchronous); its run."""
    done = subprocess.run(
        [sys.executable, "run.py", pipeline, json.dumps(parameters)],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=bed.env,
        cwd=bed.project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = next(line for line in done.stdout.splitlines() if line.startswith("RUN ")).split()[1]
    return bed.workspace.store.runs.get(UUID(run_id))


def wait_until(condition: Callable[[], bool], timeout: float = BOUND) -> bool:
    """Whether ``condition`` became true before ``timeout`` seconds (checked every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a condition, with a deadline
    return True


def attempts(bed: Bed, run: PipelineRunRecord) -> list[StepRunRecord]:
    """The step runs of ``run``, oldest first."""
    page = PageRequest(sort="asc", size=100)
    return list(bed.workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items)


def wait_for_step(bed: Bed, run: PipelineRunRecord, status: ExecutionStatus) -> StepRunRecord:
    """The (latest) step run of ``run`` once it has ``status``."""
    found: list[StepRunRecord] = []

    def reached() -> bool:
        found[:] = [s for s in attempts(bed, run) if s.status is status]
        return bool(found)

    assert wait_until(reached), f"no step of run {run.name} was ever {status.value}"
    return found[-1]


def wait_for_run_end(bed: Bed, run: PipelineRunRecord) -> PipelineRunRecord:
    store = bed.workspace.store
    assert wait_until(lambda: store.runs.get(run.id).status.is_finished), (
        f"run {run.name} did not end within {BOUND} s"
    )
    return store.runs.get(run.id)


def pod_of(bed: Bed, step: StepRunRecord) -> dict[str, Any]:
    """The (first) pod of a step run's Job, as created."""
    pods = [
        p
        for p in bed.seen.step_objects("Pod", bed.workspace.store.runs.get(step.run_id))
        if p["metadata"]["labels"].get(STEP_RUN_ID_KEY) == str(step.id)
    ]
    assert pods, f"step run {step.id} has no pod"
    return pods[0]


def assert_request_annotated(bed: Bed, step: StepRunRecord) -> None:
    """The step's pod carries the id of the step's own resource request."""
    annotations = pod_of(bed, step)["metadata"]["annotations"]
    assert annotations[REQUEST_ID_ANNOTATION] == str(step.resource_request_id)


def request_of(workspace: Workspace, step: StepRunRecord) -> ResourceRequestInfo:
    """The resource request of ``step`` (which must have one), as the RM has it now."""
    assert step.resource_request_id is not None, f"step run {step.id} has no request"
    return workspace.resource_manager().requests.get(step.resource_request_id)


def exit_code(pod: dict[str, Any]) -> int | None:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (status.get("state") or {}).get("terminated")
        if terminated:
            return int(terminated["exitCode"])
    return None


# ----------------------------------------------------------------------------- the tests


def test_a_step_waits_without_a_pod_for_a_licence_another_run_holds(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    rm = ws.resource_manager()
    ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
    release_a, started_a = tmp_path / "release-a", tmp_path / "started-a"
    run_a = submit(bed, "licensed", path=str(release_a), started=str(started_a))
    holding = wait_for_step(bed, run_a, ExecutionStatus.RUNNING)
    assert wait_until(started_a.exists), "run A's step never started in its pod"

    release_b = tmp_path / "release-b"
    release_b.write_text("go")  # B's step ends as soon as it runs
    run_b = submit(bed, "licensed", path=str(release_b))
    queued = wait_for_step(bed, run_b, ExecutionStatus.QUEUED)
    assert queued.resource_request_id is not None
    # B's orchestrator pod is waiting: it renews its pending request, reporting it pending.
    assert wait_until(
        lambda: request_of(ws, queued).runtime_state is ResourceRequestRuntimeState.PENDING
    ), "run B's orchestrator never waited for its request"
    assert request_of(ws, queued).status is ResourceRequestStatus.PENDING
    assert bed.seen.step_objects("Job", run_b) == [], "B's step got a Job while A holds"
    assert bed.seen.step_objects("Pod", run_b) == []
    assert ws.store.steps.get(holding.id).status is ExecutionStatus.RUNNING

    release_a.write_text("go")
    ended_a, ended_b = wait_for_run_end(bed, run_a), wait_for_run_end(bed, run_b)
    assert ended_a.status is ExecutionStatus.COMPLETED, ended_a.status_reason
    assert ended_b.status is ExecutionStatus.COMPLETED, ended_b.status_reason
    (step_a,), (step_b,) = attempts(bed, run_a), attempts(bed, run_b)
    assert step_b.id == queued.id  # the queued step run is the one that ran
    assert step_a.end_time is not None and step_b.start_time is not None
    assert step_b.start_time >= step_a.end_time, "one licence: the steps never overlap"
    assert len(bed.seen.step_objects("Job", run_b)) == 1
    for step in (step_a, step_b):
        assert_request_annotated(bed, step)
        request = request_of(ws, step)
        assert request.status is ResourceRequestStatus.RELEASED, request.status_reason


def contended_pool(workspace: Workspace) -> None:
    """One reclaimable licence; pipeline ``high_pipe``'s policy outranks ``low_pipe``'s (as
    the local reclaim test, ``tests/e2e/test_resources.py``)."""
    rm = workspace.resource_manager()
    ensure_pool(
        rm, "shared", {"license": 1}, account=workspace.user.name, reclaimable="coordinated"
    )
    rm.policies.delete(f"shared-{workspace.user.name}")  # ensure_pool's own policy
    for name, priority in (("low", 0), ("high", 10)):
        rm.policies.create(
            PolicyCreate(
                name=f"shared-{name}",
                pool="shared",
                priority=priority,
                subject_selector=SubjectSelector(
                    subject_type=SubjectType.PIPELINE, attributes={"name": f"{name}_pipe"}
                ),
            )
        )


def test_a_reclaimed_step_pod_stops_through_its_heartbeat_and_is_retried(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    contended_pool(ws)
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "cleanup"
    low = submit(bed, "low_pipe", path=str(release), started=str(started), marker=str(marker))
    first = wait_for_step(bed, low, ExecutionStatus.RUNNING)
    assert wait_until(started.exists), "the low step never started in its pod"

    high_release = tmp_path / "high-release"
    high_release.write_text("go")
    high = submit(bed, "high_pipe", path=str(high_release))
    ended_high = wait_for_run_end(bed, high)
    assert ended_high.status is ExecutionStatus.COMPLETED, ended_high.status_reason
    release.write_text("go")  # the low step's retry may now finish
    ended_low = wait_for_run_end(bed, low)
    assert ended_low.status is ExecutionStatus.COMPLETED, ended_low.status_reason

    # As locally: the reclaimed attempt is cancelled through its heartbeat (its code ends
    # gracefully: the finally block ran) and retried with a fresh request, which completes.
    reclaimed, retried = attempts(bed, low)
    assert reclaimed.id == first.id
    assert (reclaimed.status, retried.status) == (
        ExecutionStatus.RETRYING,
        ExecutionStatus.COMPLETED,
    ), reclaimed.status_reason
    assert "resource request" in (reclaimed.status_reason or "")
    assert (reclaimed.status_reason or "").startswith("Cancelling: ")
    assert marker.read_text().count("cleanup") == 2  # interrupted gracefully, then rerun
    assert reclaimed.resource_request_id != retried.resource_request_id
    (high_step,) = attempts(bed, high)
    victim = request_of(ws, reclaimed)
    assert victim.status is ResourceRequestStatus.PREEMPTED, victim.status_reason
    assert victim.preemption_initiated_by_id == high_step.resource_request_id
    preemptor = request_of(ws, high_step)
    assert victim.released_at is not None and preemptor.allocated_at is not None
    # The step let go within the pod's grace period, and the licence went to the preemptor.
    assert victim.released_at - preemptor.created_at <= timedelta(seconds=GRACE)
    assert preemptor.allocated_at >= victim.released_at
    assert high_step.start_time is not None and high_step.start_time >= victim.released_at
    # Its pod ended by itself (exit code 1: the attempt did not complete; not killed by a
    # signal), and its Job and pod are gone; the retry is a pod of its own.
    reclaimed_pod, retried_pod = pod_of(bed, reclaimed), pod_of(bed, retried)
    assert reclaimed_pod["metadata"]["name"] != retried_pod["metadata"]["name"]
    assert exit_code(bed.seen.last_state(reclaimed_pod)) == 1
    assert wait_until(lambda: bed.seen.gone("Pod", reclaimed_pod), 60), "the pod is left"
    for step in (reclaimed, retried, high_step):
        assert_request_annotated(bed, step)
    assert request_of(ws, retried).status is ResourceRequestStatus.RELEASED


def test_a_step_pod_deleted_from_outside_gives_its_licence_back(bed: Bed, tmp_path: Path) -> None:
    ws = bed.workspace
    rm = ws.resource_manager()
    ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
    release, started = tmp_path / "release", tmp_path / "started"
    run = submit(bed, "licensed", path=str(release), started=str(started))
    holding = wait_for_step(bed, run, ExecutionStatus.RUNNING)
    assert wait_until(started.exists), "the step never started in its pod"
    pod = pod_of(bed, holding)
    clients = kube_clients(kubeconfig=str(bed.emulator.kubeconfig_path))
    try:  # as `kubectl delete pod --grace-period=1` would
        clients.core.delete_namespaced_pod(
            pod["metadata"]["name"], "default", grace_period_seconds=1
        )
    finally:
        clients.close()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.FAILED, ended.status_reason
    steps = attempts(bed, run)
    assert [s.id for s in steps] == [holding.id], "the lost step ran again"
    (lost,) = steps
    assert lost.status is ExecutionStatus.FAILED, lost.status_reason
    assert (lost.status_reason or "").startswith("Heartbeat lost"), lost.status_reason
    request = request_of(ws, holding)
    assert request.status is ResourceRequestStatus.RELEASED, request.status_reason
    assert not release.exists()  # the step never finished by itself
    # The Job did not replace the pod (its failure counts: backoffLimit 0, no disruption).
    assert [p["metadata"]["name"] for p in bed.seen.step_objects("Pod", run)] == [
        pod["metadata"]["name"]
    ]
    assert exit_code(bed.seen.last_state(pod)) == 143  # SIGTERM, as a deleted pod gets


def test_a_step_pod_on_a_lost_node_gives_its_licence_back(bed: Bed, tmp_path: Path) -> None:
    """The step operator's pod (the orchestrator is this machine's) on a node that is lost:
    its process dies with the kubelet, and nobody reports on its pod any more."""
    ws = bed.workspace
    ensure_pool(ws.resource_manager(), "licenses", {"license": 1}, account=ws.user.name)
    release, started = tmp_path / "release", tmp_path / "started"
    script = subprocess.Popen(
        [
            sys.executable,
            "run.py",
            "operated",
            json.dumps({"path": str(release), "started": str(started)}),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "operated"},
        cwd=bed.project,
    )
    try:
        assert wait_until(started.exists), "the step never started in its pod"
        bed.kubelet.stop()  # the node is lost
        output, _ = script.communicate(timeout=BOUND)
    finally:
        script.kill()
    (run,) = ws.store.runs.list().items
    assert run.status is ExecutionStatus.FAILED, output
    (lost,) = attempts(bed, run)
    assert lost.status is ExecutionStatus.FAILED, lost.status_reason
    assert (lost.status_reason or "").startswith("Heartbeat lost"), lost.status_reason
    request = request_of(ws, lost)
    assert request.status is ResourceRequestStatus.RELEASED, request.status_reason
    # The cancelled attempt did not wait for ever for a pod nobody reports on: once its grace
    # period (and a margin) passed, the pod was force-deleted and its Job deleted.
    pod = pod_of(bed, lost)
    assert bed.seen.gone("Pod", pod), "the lost node's pod is left"
    (job,) = bed.seen.step_objects("Job", run)
    assert wait_until(lambda: bed.seen.gone("Job", job), 30), "the step's Job is left"
