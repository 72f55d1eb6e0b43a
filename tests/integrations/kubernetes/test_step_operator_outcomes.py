"""The ``kubernetes`` step operator's outcomes, end to end on its bed
(:mod:`.step_operator_bed`): a crashing step fails its run with its exit code, each attempt of
a retried step is a Job of its own, a step asking for a GPU gets its allocation in its pod, and
a stopped run ends its operator step's pod and starts no further step."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID

import pytest

from tests.integrations.kubernetes.step_operator_bed import (
    CLEANUP,
    bed,
    step_jobs,
    submit,
    wait_for_running_step,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    nothing_left,
    run_script,
    start_script,
    steps_of,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.integrations.kubernetes.allocation import REQUEST_ID_ANNOTATION
from wharf.integrations.kubernetes.labels import STEP_KEY, STEP_RUN_ID_KEY
from wharf.resource_manager.contract.models import CapacityClassSpec, PoolUpdate
from wharf.sdk.pools import ensure_pool
from wharf.store.models import StepRunFilter

__all__ = ["bed"]  # the fixture


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
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"


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
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"


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
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"


@pytest.mark.parametrize("force", [False, True], ids=["graceful", "forced"])
def test_a_stopped_run_ends_its_operator_step_pod_and_starts_no_further_step(
    bed: Bed, tmp_path: Path, force: bool
) -> None:
    release = tmp_path / "release"  # never created: the step waits until it is stopped
    script = start_script(bed, "stoppable", "operated", path=str(release))
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
    assert wait_until(lambda: nothing_left(bed.emulator), CLEANUP), "a Job or Secret is left"
