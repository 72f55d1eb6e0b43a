"""The ``kubernetes`` step operator, end to end on the test bed: pipelines on the *local*
orchestrator whose steps that name the operator run as Jobs/pods while the others run inline.

The submitter is a script in a directory of its own (the operator's steps reach their pods only
through the run's code archive); the process kubelet runs the step Jobs' pods as processes of
this machine. Artifacts lie on a real S3 server (moto; the kubelet gives every container the S3
credentials); the metadata store is the embedded SQLite file, which the pods open directly.
What the emulator created is recorded by a listener on its object store, so Jobs deleted after
their step still count."""

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
from tests.kube.emulator.resources import JOBS, SECRETS
from tests.kube.emulator.watchers import WatchEvent
from tests.kube.kubelet import Kubelet
from wharf import Client
from wharf.config.global_config import SERVER_URL_ENV, load_config
from wharf.core.enums import ComponentType, ExecutionStatus, ResourceRequestStatus
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.labels import RUN_ID_KEY, STEP_KEY, STEP_RUN_ID_KEY
from wharf.integrations.kubernetes.step_operator import STEP_OPERATOR_KEY
from wharf.resource_manager.contract.models import CapacityClassSpec, PoolUpdate
from wharf.sdk import stacks
from wharf.sdk.pools import ensure_pool
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, StepRunFilter, StepRunRecord

s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

IMAGE = "wharf/python:3.11"
OPERATOR = "k8s-op"
STACKS = (  # name, orchestrator, artifact store; each with the step operator
    ("operated", "default", "remote"),  # the local orchestrator
    ("operated-locally", "default", "default"),  # a local artifact store: pods cannot read it
    ("k8s-operated", "k8s", "remote"),
)
BOUND = 240  # seconds: a hang fails the test instead of blocking it

STEPS_MODULE = f"""
import os

from wharf import pipeline, step


@step
def prepare(value: int) -> int:
    return value + 1


@step(step_operator="{OPERATOR}")
def train(value: int) -> dict:
    print("training on", value, flush=True)
    return {{"value": value * 10, "pid": os.getpid(), "pod": os.environ.get("HOSTNAME")}}


@step
def report(result: dict) -> int:
    return os.getpid()


@pipeline(dynamic=True, enable_cache=False)
def dynamic_training(value: int = 1) -> None:
    result = train(prepare(value))
    assert result.load()["value"] == (value + 1) * 10  # loaded in the submitting process
    report(result)


@pipeline(enable_cache=False)
def static_training(value: int = 1) -> None:
    report(train(prepare(value)))


@step(step_operator="{OPERATOR}")
def crash(value: int) -> int:
    print("crashing with", value, flush=True)
    os._exit(7)


@pipeline(enable_cache=False, raise_on_failure=False)
def crashing() -> None:
    report(crash(prepare(1)))


@step(step_operator="{OPERATOR}", retry={{"max_retries": 1}})
def flaky(path: str) -> int:
    import pathlib

    marker = pathlib.Path(path)
    if not marker.exists():  # the first attempt dies; the retry finds the marker
        marker.write_text("tried")
        raise RuntimeError("first attempt fails")
    return 5


@pipeline(enable_cache=False)
def retried(path: str) -> None:
    prepare(flaky(path))


@step(step_operator="{OPERATOR}", settings={{"resources": {{"gpu_count": 1, "gpu_class": "h200"}}}})
def on_a_gpu() -> str:
    return os.environ.get("WHARF_KUBELET_LIMIT_NVIDIA_COM_GPU", "none")


@pipeline(enable_cache=False)
def on_gpus() -> None:
    on_a_gpu()


@step(step_operator="{OPERATOR}")
def wait_for(path: str) -> int:
    import pathlib
    import time

    print("waiting for", path, flush=True)
    while not pathlib.Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def stoppable(path: str) -> None:
    prepare(wait_for(path))
"""

SCRIPT = """
import json
import os
import sys

import k8s_op_steps
from wharf import Client

if __name__ == "__main__":
    run = getattr(k8s_op_steps, sys.argv[1])(**json.loads(sys.argv[2]))
    outputs = {}
    if run.status.value == "completed" and sys.argv[1].endswith("_training"):
        with Client() as client:
            outputs = {name: client.load_step_output(run.id, name) for name in ("train", "report")}
    print("RUN", run.id, run.status.value)
    print("OUTPUTS", json.dumps({"submitter": os.getpid(), **outputs}))
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

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.created.get(kind, []))


@dataclass
class Bed:
    emulator: Emulator
    seen: Seen
    workspace: Workspace
    project: Path
    env: dict[str, str]


@dataclass
class Submitted:
    run: PipelineRunRecord
    outputs: dict[str, Any]
    output: str


def clean_environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("WHARF_HOME", str(home))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", SERVER_URL_ENV, "PYTHONPATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "operated")


@pytest.fixture
def bed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: MotoServer, s3_bucket: str
) -> Iterator[Bed]:
    clean_environment(monkeypatch, tmp_path / "home")
    monkeypatch.delenv("KUBECONFIG", raising=False)  # the operator names its kubeconfig
    project = tmp_path / "project"
    project.mkdir()
    (project / "k8s_op_steps.py").write_text(STEPS_MODULE)
    (project / "run.py").write_text(SCRIPT)
    with Emulator() as emulator:
        seen = Seen()
        emulator.store.subscribe(seen)
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
                    OPERATOR,
                    ComponentType.STEP_OPERATOR,
                    "kubernetes",
                    {
                        "namespace": "default",
                        "image": IMAGE,
                        "kubeconfig": str(emulator.kubeconfig_path),
                        "pod_settings": '{"labels": {"team": "vision"}}',
                    },
                )
                stacks.register_component(
                    ws,
                    "k8s",
                    ComponentType.ORCHESTRATOR,
                    "kubernetes",
                    {
                        "image": IMAGE,
                        "kubeconfig": str(emulator.kubeconfig_path),
                        "job_monitoring_interval": 0.5,
                    },
                )
                for stack, orchestrator, artifact_store in STACKS:
                    stacks.register_stack(
                        ws,
                        stack,
                        orchestrator=orchestrator,
                        artifact_store=artifact_store,
                        step_operator=OPERATOR,
                    )
                env = {**os.environ, "WHARF_HEARTBEAT_INTERVAL": "2"}
                yield Bed(emulator, seen, ws, project, env)
            finally:
                ws.close()


def run_script(
    bed: Bed, pipeline: str, stack: str, **parameters: Any
) -> subprocess.CompletedProcess[str]:
    """Run ``pipeline`` through the project's script (a fresh process, as a user would)."""
    return subprocess.run(
        [sys.executable, "run.py", pipeline, json.dumps(parameters)],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**bed.env, "WHARF_ACTIVE_STACK": stack},
        cwd=bed.project,
    )


def submit(bed: Bed, pipeline: str, stack: str = "operated", **parameters: Any) -> Submitted:
    """:func:`run_script`, which must succeed: its run, the outputs it loaded, its output."""
    done = run_script(bed, pipeline, stack, **parameters)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    lines = done.stdout.splitlines()
    run_id = next(line for line in lines if line.startswith("RUN ")).split()[1]
    outputs = json.loads(next(line for line in lines if line.startswith("OUTPUTS "))[8:])
    run = next(r for r in bed.workspace.store.runs.list().items if str(r.id) == run_id)
    return Submitted(run, outputs, output)


def steps_of(bed: Bed, run: PipelineRunRecord) -> dict[str, StepRunRecord]:
    listed = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    return {s.name: s for s in listed}


def step_jobs(bed: Bed, run: PipelineRunRecord) -> list[dict[str, Any]]:
    """The Jobs created for ``run``'s steps."""
    return [
        job
        for job in bed.seen.of_kind("Job")
        if job["metadata"].get("labels", {}).get(RUN_ID_KEY) == str(run.id)
    ]


def nothing_left(bed: Bed) -> bool:
    """No Job and no Secret is left in the namespace."""
    store = bed.emulator.store
    return not store.list(JOBS, "default")["items"] and not store.list(SECRETS, "default")["items"]


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> bool:
    """Whether ``condition`` became true before ``timeout`` seconds (checked every 0.1 s)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # polling a condition, with a deadline
    return True


def assert_ran_as_one_job(bed: Bed, submitted: Submitted) -> None:
    """``train`` ran in a pod of one Job labelled with the operator, run and step; the other
    steps ran in the submitting process; the step's log reached the artifact store."""
    run, outputs = submitted.run, submitted.outputs
    assert run.status is ExecutionStatus.COMPLETED, submitted.output
    assert set(steps_of(bed, run)) == {"prepare", "train", "report"}
    (job,) = step_jobs(bed, run)
    labels = job["metadata"]["labels"]
    assert labels[STEP_OPERATOR_KEY] == OPERATOR
    assert labels[STEP_KEY] == "train"
    assert "ownerReferences" not in job["metadata"]  # the submitting orchestrator is local
    template = job["spec"]["template"]
    assert template["metadata"]["labels"]["team"] == "vision"  # the component's pod settings
    assert template["spec"]["containers"][0]["image"] == IMAGE
    (pod,) = [
        p
        for p in bed.seen.of_kind("Pod")
        if p["metadata"].get("labels", {}).get(STEP_KEY) == "train"
    ]
    assert outputs["train"]["value"] == 20  # loaded in the submitting process
    assert outputs["train"]["pod"] == pod["metadata"]["name"]
    assert outputs["train"]["pid"] != outputs["submitter"]
    assert outputs["report"] == outputs["submitter"]  # inline
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "training on 2" in client.step_logs("train", run=run.id)
    # The Job is cleaned up with its step, the credentials' Secret once the run's last
    # operator step ended.
    assert wait_until(lambda: nothing_left(bed)), "a Job or Secret is left"
    secrets = bed.seen.of_kind("Secret")
    assert [s["metadata"]["labels"][RUN_ID_KEY] for s in secrets] == [str(run.id)]


def test_a_local_dynamic_pipeline_runs_its_operator_step_as_a_job(bed: Bed) -> None:
    assert_ran_as_one_job(bed, submit(bed, "dynamic_training"))


def test_a_static_pipeline_on_the_local_orchestrator_runs_its_operator_step_as_a_job(
    bed: Bed,
) -> None:
    submitted = submit(bed, "static_training")
    assert_ran_as_one_job(bed, submitted)


def test_the_kubernetes_orchestrator_runs_an_operator_step_through_the_operator(
    bed: Bed,
) -> None:
    submitted = submit(bed, "static_training", stack="k8s-operated")
    run = submitted.run
    assert run.status is ExecutionStatus.COMPLETED, submitted.output
    assert submitted.outputs["train"]["value"] == 20
    jobs = {j["metadata"]["labels"].get(STEP_KEY): j for j in step_jobs(bed, run)}
    assert set(jobs) == {None, "prepare", "train", "report"}  # None: the orchestrator Job
    assert jobs["train"]["metadata"]["labels"][STEP_OPERATOR_KEY] == OPERATOR
    assert "ownerReferences" not in jobs["train"]["metadata"]
    for own in ("prepare", "report"):  # the orchestrator's own step Jobs, owned by its Job
        assert STEP_OPERATOR_KEY not in jobs[own]["metadata"]["labels"]
        assert jobs[own]["metadata"]["ownerReferences"]
    assert wait_until(lambda: not bed.emulator.store.list(SECRETS, "default")["items"])


def test_a_crashing_operator_step_fails_the_run_with_its_exit_code(bed: Bed) -> None:
    submitted = submit(bed, "crashing")
    run = submitted.run
    assert run.status is ExecutionStatus.FAILED, submitted.output
    steps = steps_of(bed, run)
    assert steps["crash"].status is ExecutionStatus.FAILED
    assert "exited with code 7" in (steps["crash"].status_reason or "")
    assert "crash" in (run.status_reason or ""), run.status_reason  # the run names the step
    assert "report" not in steps
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "crashing with 2" in client.step_logs("crash", run=run.id)
    assert wait_until(lambda: nothing_left(bed)), "a Job or Secret is left"


def test_a_local_artifact_store_is_refused_and_no_job_is_created(bed: Bed) -> None:
    done = run_script(bed, "static_training", "operated-locally")
    assert done.returncode == 1
    assert "RunFailedError" in done.stderr and "cannot read the local artifact store" in done.stderr
    (run,) = bed.workspace.store.runs.list().items
    assert run.status is ExecutionStatus.FAILED
    reason = steps_of(bed, run)["train"].status_reason or ""
    assert f"Step operator '{OPERATOR}' runs steps in Kubernetes pods" in reason
    assert "cannot read the local artifact store" in reason
    assert "-c mounts_artifact_store=true" in reason
    assert bed.seen.of_kind("Job") == []


def test_each_attempt_of_a_retried_operator_step_is_a_job_of_its_own(
    bed: Bed, tmp_path: Path
) -> None:
    done = run_script(bed, "retried", "operated", path=str(tmp_path / "tried"))
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = bed.workspace.store.runs.list().items
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    attempts = [
        s
        for s in bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
        if s.name == "flaky"
    ]
    assert sorted((s.attempt, s.status) for s in attempts) == [
        (1, ExecutionStatus.RETRYING),
        (2, ExecutionStatus.COMPLETED),
    ]
    failed = next(s for s in attempts if s.attempt == 1)
    assert "first attempt fails" in (failed.status_reason or "")
    jobs = step_jobs(bed, run)
    assert sorted(j["metadata"]["annotations"][STEP_RUN_ID_KEY] for j in jobs) == sorted(
        str(s.id) for s in attempts
    )
    assert wait_until(lambda: nothing_left(bed)), "a Job or Secret is left"


def test_an_operator_step_that_asks_for_a_gpu_gets_its_allocation_in_the_pod(bed: Bed) -> None:
    rm = bed.workspace.resource_manager()
    ensure_pool(rm, "gpus", {"GPU": 2}, account=bed.workspace.user.name)
    h200 = CapacityClassSpec(
        name="h200",
        capacity={"GPU": 2},
        target_settings={"node_selectors": {"accelerator": "h200"}},
    )
    rm.pools.update("gpus", PoolUpdate(classes=(h200,)))
    done = run_script(bed, "on_gpus", "operated")
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = bed.workspace.store.runs.list().items
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert client.load_step_output(run.id, "on_a_gpu") == "1"  # the container's limit
    (job,) = step_jobs(bed, run)
    template = job["spec"]["template"]
    (container,) = template["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    assert template["spec"]["nodeSelector"] == {"accelerator": "h200"}  # the class's
    assert template["metadata"]["labels"]["team"] == "vision"  # the component's, kept
    request_id = template["metadata"]["annotations"][REQUEST_ID_ANNOTATION]
    assert rm.requests.get(UUID(request_id)).status is ResourceRequestStatus.RELEASED
    assert wait_until(lambda: nothing_left(bed)), "a Job or Secret is left"


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stopped_run_ends_its_operator_step_pod_and_starts_no_further_step(
    bed: Bed, tmp_path: Path, force: bool
) -> None:
    release = tmp_path / "release"  # never created: the step waits until it is stopped
    script = subprocess.Popen(
        [sys.executable, "run.py", "stoppable", json.dumps({"path": str(release)})],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "operated"},
        cwd=bed.project,
    )
    try:
        running = wait_for_running_step(bed, "wait_for")
        with Client(bed.workspace.config, bed.workspace.store) as client:
            client.stop_run(running.run_id, force=force)
        output, _ = script.communicate(timeout=BOUND)
    finally:
        script.kill()
    run = bed.workspace.store.runs.get(running.run_id)
    assert run.status is ExecutionStatus.STOPPED, output
    steps = steps_of(bed, run)
    assert steps["wait_for"].status is ExecutionStatus.STOPPED, steps["wait_for"].status_reason
    assert "prepare" not in steps
    (job,) = step_jobs(bed, run)
    assert job["metadata"]["labels"][STEP_KEY] == "wait_for"
    assert wait_until(lambda: nothing_left(bed)), "a Job or Secret is left"


def wait_for_running_step(bed: Bed, name: str) -> StepRunRecord:
    """The step run ``name`` once it runs (and its pod has started), read until a deadline."""
    found: list[StepRunRecord] = []

    def running() -> bool:
        steps = bed.workspace.store.steps.list(StepRunFilter(names=(name,))).items
        found[:] = [s for s in steps if s.status is ExecutionStatus.RUNNING]
        return bool(found) and any(
            p["metadata"].get("labels", {}).get(STEP_KEY) == name for p in bed.seen.of_kind("Pod")
        )

    assert wait_until(running, BOUND), f"step {name} never ran"
    return found[0]
