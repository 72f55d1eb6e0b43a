"""Step pods and their heartbeat, end to end on the test bed (issue 27 §3 and §5): a reclaimed
step pod whose code ignores the stop is cut off after the pod's grace period
(``pod_stop_grace_period``, passed to the step's process: ``wharf.execution.stop_deadline``),
and a step operator's pod, allowed ``pod_startup_timeout`` to start, beats as its process
starts, so its allowance ends there.

The API emulator and the process kubelet run the pods as processes of this machine, artifacts
lie on a real S3 server (moto), the metadata store is the embedded SQLite file and the embedded
Resource Manager beside it is the one every pod asks, renews and releases through. Runs are
submitted by a script in a project directory of their own (the steps reach the pods through the
run's code archive)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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
from wharf.core.enums import ComponentType, ExecutionStatus, ResourceRequestStatus
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.resource_manager.contract.models import PolicyCreate
from wharf.resource_manager.domain import SubjectSelector, SubjectType
from wharf.sdk import stacks
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

IMAGE = "wharf/python:3.11"
BOUND = 240  # seconds: a hang fails the test instead of blocking it
GRACE = 8  # the step pods' pod_stop_grace_period
SLACK = 30  # seconds a cut-off may come after its grace on a loaded machine
HEARTBEAT = 3  # seconds between a step's heartbeats (a step pod is lost 16 s without one)
STARTUP = 600  # the step operator's pod_startup_timeout (the default)

STEPS_MODULE = """
import pathlib
import time

from wharf import ResourceSettings, get_step_context, pipeline, step


@step(
    enable_cache=False,
    retry={"max_retries": 1},
    settings={
        "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
    },
)
def ignores_the_stop(path: str, started: str, marker: str) -> int:
    pathlib.Path(started).write_text("started")
    deadline = time.monotonic() + 200
    try:
        while not pathlib.Path(path).exists() and time.monotonic() < deadline:
            try:
                time.sleep(0.05)
            except BaseException:  # the stop: ignored
                with open(marker, "a") as out:
                    out.write("interrupted\\n")
        return 1
    finally:
        with open(marker, "a") as out:
            out.write("left\\n")


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def quick() -> int:
    return 1


@pipeline(name="low_pipe", enable_cache=False, raise_on_failure=False)
def low_pipe(path: str, started: str, marker: str) -> None:
    ignores_the_stop(path, started, marker)


@pipeline(name="high_pipe", enable_cache=False, raise_on_failure=False)
def high_pipe() -> None:
    quick()


@step(step_operator="k8s-op", enable_cache=False)
def liveness_window(seen: str) -> int:
    # What the step's record says as its code starts: the window its last beat opened.
    from wharf.config.global_config import load_config
    from wharf.execution.services import open_store

    store = open_store(load_config())
    try:
        record = store.steps.get(get_step_context().step_run.id)
    finally:
        store.close()
    window = record.heartbeat_deadline - record.last_heartbeat
    pathlib.Path(seen).write_text(str(window.total_seconds()))
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def operated(seen: str) -> None:
    liveness_window(seen)
"""

SCRIPT = """
import json
import sys

import k8s_cutoff_steps

if __name__ == "__main__":
    run = getattr(k8s_cutoff_steps, sys.argv[1])(**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


@dataclass
class Pods:
    """Each step pod's last state, by its step run id, as the emulator saw it."""

    last: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: WatchEvent) -> None:
        if event.rtype is None or event.rtype.kind != "Pod":
            return
        step_run_id = event.object["metadata"].get("labels", {}).get(STEP_RUN_ID_KEY)
        if step_run_id is not None:
            with self.lock:
                self.last[step_run_id] = event.object

    def exit_code(self, step: StepRunRecord) -> int | None:
        with self.lock:
            pod = self.last.get(str(step.id), {})
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            terminated = (status.get("state") or {}).get("terminated")
            if terminated:
                return int(terminated["exitCode"])
        return None


@dataclass
class Bed:
    pods: Pods
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
    (project / "k8s_cutoff_steps.py").write_text(STEPS_MODULE)
    (project / "run.py").write_text(SCRIPT)
    with Emulator() as emulator:
        pods = Pods()
        emulator.store.subscribe(pods)
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
                yield Bed(pods, ws, project, env)
            finally:
                ws.close()


def run_script(bed: Bed, pipeline: str, env: dict[str, str], **parameters: Any) -> UUID:
    """Run ``pipeline`` through the project's script (on an asynchronous stack it returns once
    the orchestrator Job exists); its run's id."""
    done = subprocess.run(
        [sys.executable, "run.py", pipeline, json.dumps(parameters)],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env=env,
        cwd=bed.project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run_id = next(line for line in done.stdout.splitlines() if line.startswith("RUN ")).split()[1]
    return UUID(run_id)


def wait_until(condition: Callable[[], bool], timeout: float = BOUND) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a condition, with a deadline
    return True


def attempts(bed: Bed, run_id: UUID) -> list[StepRunRecord]:
    page = PageRequest(sort="asc", size=100)
    return list(bed.workspace.store.steps.list(StepRunFilter(run_id=run_id), page).items)


def wait_for_run_end(bed: Bed, run_id: UUID) -> PipelineRunRecord:
    store = bed.workspace.store
    assert wait_until(lambda: store.runs.get(run_id).status.is_finished), (
        f"run {run_id} did not end within {BOUND} s"
    )
    return store.runs.get(run_id)


def contended_pool(workspace: Workspace) -> None:
    """One reclaimable licence; pipeline ``high_pipe``'s policy outranks ``low_pipe``'s."""
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


def test_a_reclaimed_step_pod_that_ignores_the_stop_is_cut_off_after_its_grace(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    contended_pool(ws)
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "marker"
    low = run_script(
        bed, "low_pipe", bed.env, path=str(release), started=str(started), marker=str(marker)
    )
    assert wait_until(started.exists), "the low step never started in its pod"
    high = run_script(bed, "high_pipe", bed.env)
    ended_high = wait_for_run_end(bed, high)
    assert ended_high.status is ExecutionStatus.COMPLETED, ended_high.status_reason
    release.write_text("go")  # the low step's retry may now finish
    ended_low = wait_for_run_end(bed, low)
    assert ended_low.status is ExecutionStatus.COMPLETED, ended_low.status_reason

    reclaimed, retried = attempts(bed, low)
    assert (reclaimed.status, retried.status) == (
        ExecutionStatus.RETRYING,
        ExecutionStatus.COMPLETED,
    ), reclaimed.status_reason
    assert (reclaimed.status_reason or "").startswith("Cancelling: "), reclaimed.status_reason
    # The interrupt reached the code, which ignored it; the step's process then ended itself
    # (exit code 1, not a signal; its finally block never ran), so did its pod.
    lines = marker.read_text().splitlines()
    assert "interrupted" in lines
    assert lines.count("left") == 1 and lines[-1] == "left"  # the retry's
    assert wait_until(lambda: bed.pods.exit_code(reclaimed) is not None, 60)
    assert bed.pods.exit_code(reclaimed) == 1
    # The licence was released once the pod's grace period had passed, and went to the
    # preemptor.
    (high_step,) = attempts(bed, high)
    rm = ws.resource_manager()
    assert reclaimed.resource_request_id and high_step.resource_request_id
    victim = rm.requests.get(reclaimed.resource_request_id)
    preemptor = rm.requests.get(high_step.resource_request_id)
    assert victim.status is ResourceRequestStatus.PREEMPTED, victim.status_reason
    assert victim.released_at is not None and preemptor.allocated_at is not None
    held_on = (victim.released_at - preemptor.created_at).total_seconds()
    assert GRACE <= held_on <= GRACE + SLACK
    assert preemptor.allocated_at >= victim.released_at


def test_a_step_operator_pod_beats_as_its_process_starts(bed: Bed, tmp_path: Path) -> None:
    """With a heartbeat interval of 60 s no regular beat comes before the step's code reads its
    record: the window it sees is the usual one only because the process beat as it started
    (the engine's first beat allowed it the pod's startup timeout)."""
    interval = 60.0
    assert liveness_timeout_for(interval) < STARTUP
    seen = tmp_path / "seen"
    env = {
        **bed.env,
        "WHARF_ACTIVE_STACK": "operated",
        "WHARF_HEARTBEAT_INTERVAL": str(interval),
    }
    run_id = run_script(bed, "operated", env, seen=str(seen))  # synchronous: the local one
    run = bed.workspace.store.runs.get(run_id)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert float(seen.read_text()) == pytest.approx(liveness_timeout_for(interval), abs=1)
