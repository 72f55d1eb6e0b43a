"""The ``kubernetes`` step operator's outcomes, end to end on its bed
(:mod:`.step_operator_bed`): a crashing step fails its run with its exit code, each attempt of
a retried step is a Job of its own, a step asking for a GPU gets its allocation in its pod, and
a stopped run ends its operator step's pod and starts no further step. Each test's runs are
submitted one after the other by one process (``run_each.py``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from uuid import UUID

from tests.integrations.kubernetes.step_operator_bed import (
    CLEANUP,
    bed,
    step_jobs,
    submit_each,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    nothing_left,
    steps_of,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.labels import STEP_KEY, STEP_RUN_ID_KEY
from wharf.resource_manager.contract.models import CapacityClassSpec, PoolUpdate
from wharf.sdk.pools import ensure_pool
from wharf.store.models import StepRunFilter, StepRunRecord

__all__ = ["bed"]  # the fixture


def test_operator_steps_crash_retry_and_get_their_gpu_allocation(bed: Bed, tmp_path: Path) -> None:
    rm = bed.workspace.resource_manager()
    ensure_pool(rm, "gpus", {"GPU": 2}, account=bed.workspace.user.name)
    h200 = CapacityClassSpec(
        name="h200",
        capacity={"GPU": 2},
        target_settings={"node_selectors": {"accelerator": "h200"}},
    )
    rm.pools.update("gpus", PoolUpdate(classes=(h200,)))
    crashed, retried, on_gpus = submit_each(
        bed,
        ("crashing", {}),
        ("retried", {"path": str(tmp_path / "tried")}),
        ("on_gpus", {}),
    )

    # A crashing operator step fails the run with its exit code.
    run = crashed.run
    assert run.status is ExecutionStatus.FAILED, crashed.output
    steps = steps_of(bed, run)
    assert steps["crash"].status is ExecutionStatus.FAILED
    assert "exited with code 7" in (steps["crash"].status_reason or "")
    assert "crash" in (run.status_reason or ""), run.status_reason  # the run names the step
    assert "report" not in steps
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "crashing with 2" in client.step_logs("crash", run=run.id)

    # Each attempt of a retried operator step is a Job of its own.
    run = retried.run
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

    # An operator step that asks for a GPU gets its allocation in the pod.
    run = on_gpus.run
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
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"


def wait_for_running_pod(bed: Bed, name: str, others: set[UUID]) -> StepRunRecord:
    """The step run ``name`` of a run not in ``others`` once it runs and its run's pod has
    started, read until a deadline."""
    found: list[StepRunRecord] = []

    def running() -> bool:
        steps = bed.workspace.store.steps.list(StepRunFilter(names=(name,))).items
        found[:] = [
            s for s in steps if s.status is ExecutionStatus.RUNNING and s.run_id not in others
        ]
        return bool(found) and any(
            p["metadata"].get("labels", {}).get(STEP_KEY) == name
            for p in bed.seen.of_run("Pod", str(found[0].run_id))
        )

    assert wait_until(running, BOUND), f"step {name} never ran"
    return found[0]


def test_a_stopped_run_ends_its_operator_step_pod_and_starts_no_further_step(
    bed: Bed, tmp_path: Path
) -> None:
    """Stopped gracefully, then (the process's next run) by force."""
    release = str(tmp_path / "release")  # never created: the step waits until it is stopped
    script = subprocess.Popen(
        [sys.executable, "run_each.py", json.dumps([["stoppable", {"path": release}]] * 2)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**bed.env, "WHARF_ACTIVE_STACK": "operated"},
        cwd=bed.project,
    )
    stopped: set[UUID] = set()
    try:
        for force in (False, True):
            running = wait_for_running_pod(bed, "wait_for", stopped)
            with Client(bed.workspace.config, bed.workspace.store) as client:
                client.stop_run(running.run_id, force=force)
            stopped.add(running.run_id)
        output, _ = script.communicate(timeout=BOUND)
    finally:
        script.kill()
    assert script.returncode == 0, output
    for run_id in stopped:
        run = bed.workspace.store.runs.get(run_id)
        assert run.status is ExecutionStatus.STOPPED, output
        steps = steps_of(bed, run)
        assert steps["wait_for"].status is ExecutionStatus.STOPPED, steps["wait_for"].status_reason
        assert "prepare" not in steps
        (job,) = step_jobs(bed, run)
        assert job["metadata"]["labels"][STEP_KEY] == "wait_for"
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
