"""A restarted orchestrator pod resumes its run, end to end on the test bed.

The orchestrator pod's process is killed (SIGKILL) while a step pod runs; its Job starts
another pod, which takes the run over (same orchestrator run id): the finished step is not run
again, the running step's Job is adopted (no second Job, no second process) and the last step
runs as usual. Each step appends its name to a file when its process runs, so a step that ran
twice would show. Without a kubelet: a pod restarted after its run ended leaves it as it is,
and a step run left running without a Job (its pod lost with the earlier orchestrator pod) is
failed with a reason, never started again."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tests.artifacts.s3_server as s3
from tests.integrations.kubernetes.test_orchestrator_e2e import (
    BOUND,
    IMAGE,
    Bed,
    bed,
    wait_for_step,
)
from tests.integrations.kubernetes.testbed import (
    kill_orchestrator_pod,
    orchestrator_logs,
    orchestrator_pods,
    reported_run_id,
)
from tests.kube.emulator import Emulator
from tests.waiting import wait_until
from wharf import pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus, StepRuntime
from wharf.execution.run_lifecycle import start_run
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator_launch import OrchestratorArgs
from wharf.integrations.kubernetes.orchestrator_main import run_orchestrator
from wharf.sdk import stacks
from wharf.sdk.workspace import Workspace
from wharf.store.models import PipelineRunRecord, RunStart, StepRunCreate, StepRunFilter

__all__ = ["bed"]  # the test bed fixture, shared with the other end-to-end tests
s3_server = s3.s3_server
s3_bucket = s3.s3_bucket

RESTART_STEPS = """
from pathlib import Path
import time

from wharf import pipeline, step


def ran(log: str, name: str) -> None:
    with open(log, "a") as f:
        f.write(name + "\\n")


@step(enable_cache=False)
def first(log: str) -> int:
    ran(log, "first")
    return 1


@step(enable_cache=False)
def second(value: int, log: str, release: str) -> int:
    ran(log, "second")
    while not Path(release).exists():
        time.sleep(0.05)
    return value + 1


@step(enable_cache=False)
def third(value: int, log: str) -> int:
    ran(log, "third")
    return value + 1


@pipeline(enable_cache=False, raise_on_failure=False)
def restartable(log: str, release: str) -> None:
    third(second(first(log), log, release), log)
"""

RESTART_SCRIPT = """
import json
import sys

import restart_steps

if __name__ == "__main__":
    run = restart_steps.restartable(**json.loads(sys.argv[1]))
    print("RUN", run.id, run.status.value)
"""


def submit_restartable(bed: Bed, log: Path, release: Path) -> PipelineRunRecord:
    """Submit the restartable pipeline on the asynchronous stack; its run."""
    (bed.project / "restart_steps.py").write_text(RESTART_STEPS)
    (bed.project / "run_restart.py").write_text(RESTART_SCRIPT)
    done = subprocess.run(
        [sys.executable, "run_restart.py", json.dumps({"log": str(log), "release": str(release)})],
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**bed.env, "WHARF_ACTIVE_STACK": "k8s-async"},
        cwd=bed.project,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return bed.workspace.store.runs.get(reported_run_id(done))


def test_a_killed_orchestrator_pod_is_restarted_and_resumes_without_running_a_step_twice(
    bed: Bed, tmp_path: Path
) -> None:
    log, release = tmp_path / "ran.log", tmp_path / "release"
    run = submit_restartable(bed, log, release)
    wait_for_step(bed, run, "second", ExecutionStatus.RUNNING)
    assert wait_until(lambda: log.exists() and "second" in log.read_text().split(), BOUND)

    # Kill the orchestrator pod's process; the Job starts another pod, which takes over.
    started = kill_orchestrator_pod(bed, run)
    release.touch()

    runs = bed.workspace.store.runs
    assert wait_until(lambda: runs.get(run.id).status.is_finished, BOUND), orchestrator_logs(
        bed, run
    )
    ended = runs.get(run.id)
    assert ended.status is ExecutionStatus.COMPLETED, orchestrator_logs(bed, run)
    assert ended.orchestrator_run_id == started.orchestrator_run_id  # the same Job's run
    assert log.read_text().split() == ["first", "second", "third"]  # each step's process once
    steps = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert sorted((s.name, s.attempt, s.status) for s in steps) == [
        ("first", 1, ExecutionStatus.COMPLETED),
        ("second", 1, ExecutionStatus.COMPLETED),
        ("third", 1, ExecutionStatus.COMPLETED),
    ]
    step_jobs = [
        j for j in bed.seen.of_run("Job", str(run.id)) if STEP_KEY in j["metadata"]["labels"]
    ]
    assert sorted(j["metadata"]["labels"][STEP_KEY] for j in step_jobs) == [
        "first",
        "second",
        "third",
    ]
    assert len(orchestrator_pods(bed, run)) == 2


@step
def only() -> int:
    return 1


@pipeline(code_source="image")
def one_step() -> None:
    only()


def test_a_restarted_pod_leaves_an_ended_run_alone_and_fails_a_step_whose_pod_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(name, raising=False)
    with Emulator() as emulator:
        monkeypatch.setenv("KUBECONFIG", str(emulator.kubeconfig_path))  # as in a pod
        ws = Workspace.open(load_config())
        clients = kube_clients()
        try:
            stacks.register_component(
                ws, "k8s", ComponentType.ORCHESTRATOR, "kubernetes", {"image": IMAGE}
            )
            stacks.register_stack(ws, "k8s", orchestrator="k8s", artifact_store="default")
            stack = ws.store.stacks.get_stack_by_name("k8s")
            environ = {"WHARF_HOME": str(ws.config.home), "WHARF_STORE_URL": ws.config.store_url}

            def started_by_its_job(name: str) -> tuple[OrchestratorArgs, PipelineRunRecord]:
                """A run started by the orchestrator Job ``name`` (which runs no pod here)."""
                _, snapshot, run = ws.store.runs.record(
                    ws.project.id, "one_step", stack.id, one_step.compile(), RunStart(name=name)
                )
                body = {
                    "metadata": {"name": name},
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "main", "image": IMAGE}],
                            }
                        }
                    },
                }
                created: Any = clients.batch.create_namespaced_job("default", body)
                run = start_run(ws.store, run, f"kubernetes-{created.metadata.uid}")
                args = OrchestratorArgs(
                    snapshot_id=snapshot.id,
                    run_id=run.id,
                    namespace="default",
                    job_name=name,
                    settings_json="{}",
                    token_secret=None,
                )
                return args, run

            # The run completed before this pod started: it exits 0 and changes nothing.
            args, run = started_by_its_job("completed")
            completed = ws.store.runs.finish(run.id, ExecutionStatus.COMPLETED, None)
            assert run_orchestrator(args, environ) == 0
            assert ws.store.runs.get(run.id) == completed

            # A step run left running whose Job is gone: failed with a reason, not run again.
            args, run = started_by_its_job("lost")
            lost = ws.store.steps.create(
                StepRunCreate(
                    run_id=run.id,
                    name="only",
                    code_hash="h",
                    status=ExecutionStatus.RUNNING,
                    runtime=StepRuntime.ISOLATED,
                )
            )
            assert run_orchestrator(args, environ) == 1
            failed = ws.store.steps.get(lost.id)
            assert failed.status is ExecutionStatus.FAILED
            assert failed.status_reason == (
                "The step's process was lost with the run's earlier orchestrating process."
            )
            ended = ws.store.runs.get(run.id)
            assert ended.status is ExecutionStatus.FAILED
            assert [s.id for s in ws.store.steps.list(StepRunFilter(run_id=run.id)).items] == [
                lost.id
            ]
            jobs = clients.batch.list_namespaced_job("default").items
            assert sorted(j.metadata.name for j in jobs) == ["completed", "lost"]  # no step Job
        finally:
            clients.close()
            ws.close()
