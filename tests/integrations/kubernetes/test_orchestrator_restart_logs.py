"""A step Job that finished while no orchestrator pod was alive keeps its log and is deleted.

End to end on the test bed: the orchestrator pod's process is killed (SIGKILL) while a step pod
runs; the next pod of its Job is held back (the kubelet cannot bind it while the emulator fails
its bindings) until the step pod has finished and its step run recorded its own end. The pod
that then takes the run over does not adopt that step's Job (it finished): it copies the pod's
log to the step run's ``logs_uri`` (``wharf steps logs`` prints it), deletes the Job and runs
the last step as usual. Each step appends its name to a file when its process runs, so a step
that ran twice would show."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from tests.integrations.kubernetes.test_orchestrator_e2e import BOUND, Bed, bed, wait_for_step
from tests.integrations.kubernetes.testbed import (
    NAMESPACE,
    job_exists,
    orchestrator_logs,
    orchestrator_pods,
    reported_run_id,
    run_in_project,
    runner_script,
    wait_for_run_end,
    wharf_cli,
)
from tests.kube.emulator.resources import JOBS, PODS
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.store.models import PipelineRunRecord, StepRunFilter

__all__ = ["bed"]  # the test bed fixture, shared with the other end-to-end tests

LEFT_STEPS = """
from pathlib import Path
import time

from wharf import pipeline, step


def ran(log: str, name: str) -> None:
    with open(log, "a") as f:
        f.write(name + "\\n")


@step(enable_cache=False)
def waits(log: str, release: str) -> int:
    ran(log, "waits")
    print("waits: waiting for its release", flush=True)
    while not Path(release).exists():
        time.sleep(0.05)
    print("waits: released, done", flush=True)
    return 1


@step(enable_cache=False)
def after(value: int, log: str) -> int:
    ran(log, "after")
    return value + 1


@pipeline(enable_cache=False, raise_on_failure=False)
def left_behind(log: str, release: str) -> None:
    after(waits(log, release), log)
"""

HELD_BINDINGS = 10_000
"""Bindings the emulator fails while the next orchestrator pod is held back (none else binds)."""


def submit_left_behind(bed: Bed, log: Path, release: Path) -> PipelineRunRecord:
    """Submit ``left_behind`` on the asynchronous stack; its run."""
    (bed.project / "left_steps.py").write_text(LEFT_STEPS)
    (bed.project / "run_left.py").write_text(runner_script("left_steps"))
    parameters = json.dumps({"log": str(log), "release": str(release)})
    done = run_in_project(
        bed,
        sys.executable,
        "run_left.py",
        "left_behind",
        parameters,
        WHARF_ACTIVE_STACK="k8s-async",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return bed.workspace.store.runs.get(reported_run_id(done))


def job_finished(bed: Bed, name: str) -> bool:
    job: dict[str, Any] = bed.emulator.store.get(JOBS, NAMESPACE, name)
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def test_a_step_job_that_finished_with_no_orchestrator_pod_alive_keeps_its_log_and_is_deleted(
    bed: Bed, tmp_path: Path
) -> None:
    log, release = tmp_path / "ran.log", tmp_path / "release"
    run = submit_left_behind(bed, log, release)
    wait_for_step(bed, run, "waits", ExecutionStatus.RUNNING)
    assert wait_until(lambda: log.exists() and "waits" in log.read_text().split(), BOUND)
    (step_job,) = bed.seen.step_objects("Job", run)
    job_name = step_job["metadata"]["name"]

    # Kill the orchestrator pod's process, holding its Job's next pod back (unbound).
    faults = bed.emulator.faults
    faults.fail_next("create", "pods/binding", times=HELD_BINDINGS)
    started = bed.workspace.store.runs.get(run.id)
    assert started.orchestrator_pid is not None
    os.kill(started.orchestrator_pid, signal.SIGKILL)
    assert wait_until(lambda: len(orchestrator_pods(bed, run)) == 2, BOUND)
    held = orchestrator_pods(bed, run)[1]["metadata"]["name"]

    # The step ends meanwhile: it records its own end and its Job completes.
    release.touch()
    wait_for_step(bed, run, "waits", ExecutionStatus.COMPLETED)
    assert wait_until(lambda: job_finished(bed, job_name), BOUND)
    assert not bed.emulator.store.get(PODS, NAMESPACE, held)["spec"].get("nodeName")  # held
    assert bed.workspace.store.runs.get(run.id).orchestrator_pid == started.orchestrator_pid

    # Let the held pod start: bindings succeed again, and a change of the pod has the kubelet
    # bind it.
    faults.reset()
    annotation = {"metadata": {"annotations": {"test.wharf.io/release": "1"}}}
    bed.emulator.store.patch(PODS, NAMESPACE, held, annotation, "application/merge-patch+json")

    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, orchestrator_logs(bed, run)
    assert log.read_text().split() == ["waits", "after"]  # each step's process once
    steps = bed.workspace.store.steps.list(StepRunFilter(run_id=run.id)).items
    assert sorted((s.name, s.attempt, s.status) for s in steps) == [
        ("after", 1, ExecutionStatus.COMPLETED),
        ("waits", 1, ExecutionStatus.COMPLETED),
    ]
    assert [j["metadata"]["labels"][STEP_KEY] for j in bed.seen.step_objects("Job", run)] == [
        "waits",
        "after",
    ]  # no second Job for the step that ended meanwhile
    assert not job_exists(bed.emulator, job_name), orchestrator_logs(bed, run)

    shown = wharf_cli(bed, "steps", "logs", run.name, "waits")
    assert shown.returncode == 0, shown.stderr
    assert "waits: waiting for its release" in shown.stdout
    assert "waits: released, done" in shown.stdout
