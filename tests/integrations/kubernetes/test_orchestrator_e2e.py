"""A real static pipeline on a Kubernetes stack, end to end on the test bed.

The submitter is a script in a directory of its own (its steps reach the pods only through the
run's code archive); it creates the orchestrator Job on the API emulator; the process kubelet
runs the Job's pod, which runs the engine's run loop and each step as a Job/pod of its own.
Artifacts lie on a real S3 server (moto; the kubelet gives every container the S3 credentials,
as a cluster's node or service account would); the metadata store is the embedded SQLite file,
which the pods open directly because they are processes on this machine.

What the emulator saw is recorded by a listener on its object store (every pod and Job created),
so step Jobs deleted after their run still count as created."""

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

import pytest
from kubernetes import client

import tests.artifacts.s3_server as s3
from tests.artifacts.s3_server import CREDENTIALS, MotoServer
from tests.kube.conftest import api_client_for
from tests.kube.emulator import Emulator
from tests.kube.emulator.resources import JOBS
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus, MetadataResourceType
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY
from wharf.integrations.kubernetes.orchestrator import JOB_KEY, NAMESPACE_KEY
from wharf.integrations.kubernetes.orchestrator_main import (
    ORCHESTRATOR_RUN_ID_KEY,
    POD_KEY,
)
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    PageRequest,
    PipelineRunRecord,
    StepRunFilter,
    StepRunRecord,
)

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

IMAGE = "wharf/python:3.11"
MISSING_IMAGE = "registry.example/wharf-missing:1"
BOUND = 240  # seconds: a hang fails the test instead of blocking it

STEPS_MODULE = """
from wharf import pipeline, step


@step
def make(value: int) -> int:
    print("making", value)
    return value


@step
def double(value: int) -> int:
    return value * 2


@step
def add(a: int, b: int) -> int:
    return a + b


@pipeline
def on_kubernetes(value: int = 3) -> None:
    first = make(value)
    add(first, double(first))


@step
def explode(value: int) -> int:
    raise ValueError(f"no good: {value}")


@pipeline(raise_on_failure=False)
def failing_on_kubernetes() -> None:
    double(explode(make(1)))


@step(enable_cache=False)
def wait_for(path: str) -> int:
    import pathlib
    import time

    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    double(wait_for(path))
"""

SCRIPT = """
import json
import sys

import k8s_steps

if __name__ == "__main__":
    run = getattr(k8s_steps, sys.argv[1])(**json.loads(sys.argv[2]))
    print("RUN", run.id, run.status.value)
"""


@dataclass
class Seen:
    """Objects the emulator created, by kind (their state when created)."""

    created: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: WatchEvent) -> None:
        if event.type == "ADDED" and event.rtype is not None:
            with self.lock:
                self.created.setdefault(event.rtype.kind, []).append(event.object)

    def of_run(self, kind: str, run_id: str) -> list[dict[str, Any]]:
        with self.lock:
            objects = list(self.created.get(kind, []))
        return [o for o in objects if o["metadata"].get("labels", {}).get(RUN_ID_KEY) == run_id]


@dataclass
class Bed:
    emulator: Emulator
    seen: Seen
    workspace: Workspace
    project: Path
    env: dict[str, str]


@pytest.fixture
def bed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: MotoServer, s3_bucket: str
) -> Iterator[Bed]:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_SERVER_URL", "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "k8s")
    project = tmp_path / "project"
    project.mkdir()
    (project / "k8s_steps.py").write_text(STEPS_MODULE)
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
                    {"image": IMAGE, "namespace": "default", "job_monitoring_interval": 0.5},
                )
                stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="remote")
                stacks.register_component(
                    ws,
                    "k8s-async",
                    ComponentType.ORCHESTRATOR,
                    "kubernetes",
                    {"image": IMAGE, "synchronous": False, "pod_stop_grace_period": 5},
                )
                stacks.register_stack(
                    ws, "k8s-async", orchestrator="k8s-async", artifact_store="remote"
                )
                stacks.register_component(
                    ws,
                    "k8s-no-image",
                    ComponentType.ORCHESTRATOR,
                    "kubernetes",
                    {"image": MISSING_IMAGE, "job_monitoring_interval": 0.5},
                )
                stacks.register_stack(
                    ws, "k8s-no-image", orchestrator="k8s-no-image", artifact_store="remote"
                )
                env = {**os.environ, "WHARF_HEARTBEAT_INTERVAL": "2"}
                yield Bed(emulator, seen, ws, project, env)
            finally:
                ws.close()


def run_script(
    bed: Bed, pipeline: str, stack: str, **parameters: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``pipeline`` with ``parameters`` through the project's script (a fresh process, as
    a user would) on ``stack``."""
    return subprocess.run(
        [sys.executable, "run.py", pipeline, json.dumps(parameters)],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**bed.env, "WHARF_ACTIVE_STACK": stack},
        cwd=bed.project,
    )


def submit(
    bed: Bed, pipeline: str = "on_kubernetes", stack: str = "k8s", **parameters: Any
) -> tuple[PipelineRunRecord, str]:
    """:func:`run_script`, which must succeed; its run (as the store has it when the script
    ended) and output."""
    done = run_script(bed, pipeline, stack, **parameters)
    assert done.returncode == 0, done.stdout + done.stderr
    run_lines = [line for line in done.stdout.splitlines() if line.startswith("RUN ")]
    assert run_lines, done.stdout + done.stderr
    run_id = run_lines[-1].split()[1]
    runs = bed.workspace.store.runs.list(page=PageRequest(size=10)).items
    run = next(r for r in runs if str(r.id) == run_id)
    return run, done.stdout + done.stderr


def remaining_secrets(bed: Bed) -> list[str]:
    """The names of the Secrets that exist now."""
    api_client = api_client_for(str(bed.emulator.kubeconfig_path))
    try:
        listing = client.CoreV1Api(api_client).list_namespaced_secret("default")
        return [item.metadata.name for item in listing.items]
    finally:
        api_client.close()


def step_statuses(workspace: Workspace, run: PipelineRunRecord) -> dict[str, ExecutionStatus]:
    steps = workspace.store.steps.list(page=PageRequest(size=100)).items
    return {s.name: s.status for s in steps if s.run_id == run.id}


def test_a_static_pipeline_runs_each_step_in_its_own_pod_and_a_rerun_is_cached(
    bed: Bed,
) -> None:
    run, output = submit(bed)
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert run.orchestrator_run_id is not None
    assert run.orchestrator_run_id.startswith("kubernetes-")
    assert step_statuses(bed.workspace, run) == {
        "make": ExecutionStatus.COMPLETED,
        "double": ExecutionStatus.COMPLETED,
        "add": ExecutionStatus.COMPLETED,
    }
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "make") == 3
        assert client.load_step_output(run.id, "double") == 6
        assert client.load_step_output(run.id, "add") == 9
        assert "making 3" in client.step_logs("make", run=run.id)  # `wharf runs logs` has it

    # The orchestrator Job, recorded in the run's metadata; its pod's log reached the user.
    metadata = {
        m.key: m.value
        for m in bed.workspace.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    }
    jobs = bed.seen.of_run("Job", str(run.id))
    orchestrator_jobs = [j for j in jobs if STEP_KEY not in j["metadata"]["labels"]]
    assert [j["metadata"]["name"] for j in orchestrator_jobs] == [metadata[JOB_KEY]]
    assert metadata[NAMESPACE_KEY] == "default"
    assert "on_kubernetes" in output and "add" in output

    # Every step ran in a pod of its own, labelled with the run and the step.
    step_pods = [
        p for p in bed.seen.of_run("Pod", str(run.id)) if STEP_KEY in p["metadata"]["labels"]
    ]
    assert sorted(p["metadata"]["labels"][STEP_KEY] for p in step_pods) == ["add", "double", "make"]
    step_jobs = [j for j in jobs if STEP_KEY in j["metadata"]["labels"]]
    owners = {o["name"] for j in step_jobs for o in j["metadata"].get("ownerReferences", [])}
    assert owners == {metadata[JOB_KEY]}  # collected with the orchestrator Job
    orchestrator_pods = [
        p for p in bed.seen.of_run("Pod", str(run.id)) if STEP_KEY not in p["metadata"]["labels"]
    ]
    assert [p["metadata"]["name"] for p in orchestrator_pods] == [metadata[POD_KEY]]
    assert metadata[ORCHESTRATOR_RUN_ID_KEY] == run.orchestrator_run_id
    assert sorted(j["metadata"]["labels"][STEP_KEY] for j in step_jobs) == ["add", "double", "make"]
    # The embedded store needs no run token; the step pods' Secret is gone with the run.
    secrets = bed.seen.created.get("Secret", [])
    assert not [s for s in secrets if s["metadata"]["name"].startswith("wharf-run-token")]
    assert remaining_secrets(bed) == []

    # The same run again: every step is cached; the orchestrator pod starts no step pod.
    again, _ = submit(bed)
    assert again.status is ExecutionStatus.COMPLETED, again.status_reason
    assert set(step_statuses(bed.workspace, again).values()) == {ExecutionStatus.CACHED}
    assert [
        p for p in bed.seen.of_run("Pod", str(again.id)) if STEP_KEY in p["metadata"]["labels"]
    ] == []
    assert len(bed.seen.of_run("Pod", str(again.id))) == 1  # its orchestrator pod
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(again.id, "add") == 9


def test_a_failing_step_fails_the_run_and_the_orchestrator_job_without_a_second_pod(
    bed: Bed,
) -> None:
    run, output = submit(bed, "failing_on_kubernetes")
    assert run.status is ExecutionStatus.FAILED
    steps = {s.name: s for s in bed.workspace.store.steps.list(page=PageRequest(size=100)).items}
    assert steps["make"].status is ExecutionStatus.COMPLETED
    assert steps["explode"].status is ExecutionStatus.FAILED
    assert "no good: 1" in (steps["explode"].status_reason or "")
    assert "double" not in steps or steps["double"].status is not ExecutionStatus.COMPLETED
    assert "RUN" in output and "failed" in output
    # The orchestrator pod exited 1 (the run ended failed): the Job failed at once, no retry.
    pods = bed.seen.of_run("Pod", str(run.id))
    assert len([p for p in pods if STEP_KEY not in p["metadata"]["labels"]]) == 1
    job = current_job(bed, run)
    assert any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"]["conditions"])


def test_an_asynchronous_run_returns_at_once_and_says_how_to_follow_it(bed: Bed) -> None:
    run, output = submit(bed, stack="k8s-async")
    assert not run.status.is_finished  # submitted, not waited for
    job_name = metadata_of(bed, run)[JOB_KEY]
    assert f"wharf runs logs {run.name} --follow" in output
    assert f"kubectl -n default logs -f job/{job_name}" in output
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    assert set(step_statuses(bed.workspace, ended).values()) == {ExecutionStatus.COMPLETED}


def test_an_orchestrator_image_that_cannot_be_pulled_fails_the_submission_and_leaves_nothing(
    bed: Bed,
) -> None:
    done = run_script(bed, "on_kubernetes", "k8s-no-image")
    assert done.returncode != 0
    error = done.stderr.strip().splitlines()[-1]
    assert "The orchestrator Job default/" in error and MISSING_IMAGE in error, done.stderr
    assert "ErrImagePull" in error or "ImagePullBackOff" in error
    assert "did not start (nothing ran)" in error
    assert bed.workspace.store.runs.list().items == []  # the placeholder was taken away
    (created,) = bed.seen.created["Job"]
    name = created["metadata"]["name"]
    assert wait_until(lambda: not job_exists(bed, name)), f"orchestrator Job {name} is left"


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stopped_run_starts_no_further_step_pod_and_ends_stopped(
    bed: Bed, tmp_path: Path, force: bool
) -> None:
    release = tmp_path / "release"
    run, _ = submit(bed, "stoppable", stack="k8s-async", path=str(release))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    with Client(bed.workspace.config, bed.workspace.store) as client:
        client.stop_run(run.id, force=force)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.STOPPED, ended.status_reason
    stopped = bed.workspace.store.steps.get(waiting.id)
    assert stopped.status is ExecutionStatus.STOPPED, stopped.status_reason
    step_pods = [
        p for p in bed.seen.of_run("Pod", str(run.id)) if STEP_KEY in p["metadata"]["labels"]
    ]
    assert [p["metadata"]["labels"][STEP_KEY] for p in step_pods] == ["wait_for"]
    assert "double" not in step_statuses(bed.workspace, ended)
    # The stopped step's Job is gone (deleted by the stop, or cleaned up after it ended).
    name = step_pods[0]["metadata"]["labels"]["job-name"]
    assert wait_until(lambda: not job_exists(bed, name)), f"step Job {name} is left"


def wait_for_step(
    bed: Bed, run: PipelineRunRecord, name: str, status: ExecutionStatus
) -> StepRunRecord:
    """The step run ``name`` of ``run`` once it has ``status``, read until a deadline."""
    found: list[StepRunRecord] = []

    def reached() -> bool:
        steps = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
        found[:] = [s for s in steps if s.name == name and s.status is status]
        return bool(found)

    assert wait_until(reached), f"step {name} of run {run.name} never was {status.value}"
    return found[0]


def job_exists(bed: Bed, name: str) -> bool:
    try:
        bed.emulator.store.get(JOBS, "default", name)
    except Exception:  # the emulator's NotFound
        return False
    return True


def wait_until(condition: Callable[[], bool], timeout: float = BOUND) -> bool:
    """Whether ``condition`` became true before ``timeout`` seconds (checked every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a condition, with a deadline
    return True


def metadata_of(bed: Bed, run: PipelineRunRecord) -> dict[str, Any]:
    records = bed.workspace.store.run_metadata.list(MetadataResourceType.PIPELINE_RUN, run.id)
    return {m.key: m.value for m in records}


def current_job(bed: Bed, run: PipelineRunRecord) -> dict[str, Any]:
    """The run's orchestrator Job as the API has it now."""
    name = metadata_of(bed, run)[JOB_KEY]
    job: dict[str, Any] = bed.emulator.store.get(JOBS, "default", name)
    return job


def wait_for_run_end(bed: Bed, run: PipelineRunRecord) -> PipelineRunRecord:
    """The run once it ended, read from the store until a deadline."""
    assert wait_until(lambda: bed.workspace.store.runs.get(run.id).status.is_finished), (
        f"run {run.name} did not end within {BOUND} s"
    )
    return bed.workspace.store.runs.get(run.id)
