"""A step pod deleted while its orchestrator is gone keeps its own log.

On the bed: the orchestrator pod's process is killed (SIGKILL) while a step pod runs, and its
Job retries no pod, so no pod takes the run over; then the step's Job is deleted as ``kubectl
delete job`` does: the step pod gets SIGTERM (or, once its run was swept as lost and the step
stopped itself, has ended) and is removed, its log with it. The step's process read its pod's log
before the signal (or its end) and stored it at its step run's ``logs_uri``: ``wharf steps logs``
prints what the step printed. Before, nothing copied it (the orchestrator that would have was
gone) and the log was lost.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.integrations.kubernetes.test_orchestrator_e2e import SCRIPT, STEPS_MODULE
from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    NAMESPACE,
    Bed,
    BedFactory,
    register_kubernetes_stack,
    submit_script,
    wait_for_step,
    wharf_cli,
)
from tests.kube.emulator.resources import JOBS, PODS
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.sdk.client import Client


def pod_ended(bed: Bed, name: str) -> bool:
    """Whether pod ``name`` ended (or is gone)."""
    pods = bed.emulator.store.list(PODS, NAMESPACE)["items"]
    phases = [(p.get("status") or {}).get("phase") for p in pods if p["metadata"]["name"] == name]
    return phases in ([], ["Succeeded"], ["Failed"])


@pytest.mark.parametrize("when", ["running", "ended"])
def test_a_step_pod_deleted_while_its_orchestrator_is_gone_keeps_its_log(
    make_bed: BedFactory, tmp_path: Path, when: str
) -> None:
    """``running``: the step Job is deleted while its pod runs (SIGTERM); ``ended``: once the
    step stopped itself, its run swept as its orchestrator was lost."""
    bed: Bed = make_bed({"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT}, active_stack="alone")
    config = {
        "image": IMAGE,
        "synchronous": False,
        "orchestrator_job_backoff_limit": 0,  # its pod killed: no other pod of its Job
        "pod_stop_grace_period": 20,
    }
    register_kubernetes_stack(bed.workspace, "alone", config)
    run, _ = submit_script(bed, "stoppable", "alone", path=str(tmp_path / "never"))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    assert wait_until(lambda: bed.seen.step_objects("Pod", run), BOUND), "no step pod"
    (pod,) = bed.seen.step_objects("Pod", run)
    pod_name = pod["metadata"]["name"]
    pod_log = bed.emulator.log_dir / NAMESPACE / pod_name / "main.log"
    assert wait_until(lambda: pod_log.exists() and "waiting for" in pod_log.read_text(), BOUND)

    orchestrator_pid = bed.workspace.store.runs.get(run.id).orchestrator_pid
    assert orchestrator_pid is not None
    os.kill(orchestrator_pid, signal.SIGKILL)
    if when == "ended":  # a reader sweeps the run (lost), the step then stops itself
        runs = bed.workspace.store.runs
        with Client(bed.workspace.config, bed.workspace.store) as client:
            assert wait_until(
                lambda: client.list_pipeline_runs() and runs.get(run.id).status.is_finished, BOUND
            ), "the run was not swept"
        steps = bed.workspace.store.steps
        assert wait_until(lambda: steps.get(waiting.id).status.is_finished, BOUND)
        assert wait_until(lambda: pod_ended(bed, pod_name), BOUND), "the step pod did not end"

    step_job = pod["metadata"]["labels"]["job-name"]
    bed.emulator.store.delete(JOBS, NAMESPACE, step_job, propagation_policy="Background")

    def pod_gone() -> bool:
        pods = bed.emulator.store.list(PODS, NAMESPACE)["items"]
        return all(p["metadata"]["name"] != pod_name for p in pods)

    assert wait_until(pod_gone, BOUND), f"step pod {pod_name} is left"
    assert bed.workspace.store.steps.get(waiting.id).logs_uri
    shown = wharf_cli(bed, "steps", "logs", run.name, "wait_for")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"waiting for {tmp_path / 'never'}" in shown.stdout, shown.stdout
