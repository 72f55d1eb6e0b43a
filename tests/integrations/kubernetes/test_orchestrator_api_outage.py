"""A run rides out a short outage of the Kubernetes API: while its orchestrator pod runs, the
API answers some step Job creates and deletes and some pod log reads with 503, 500 and 429
(the emulator's injected faults), or is gone altogether for 20 seconds (nothing listens; the
process kubelet and the watches meet refused connections too) while a step pod ends; every
step still runs once, in one pod, and the run completes."""

from __future__ import annotations

import time
from pathlib import Path

from tests.integrations.kubernetes.test_orchestrator_e2e import Bed, bed, submit
from tests.integrations.kubernetes.testbed import (
    BOUND,
    step_statuses,
    wait_for_run_end,
    wait_for_step,
)
from tests.waiting import wait_until
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY

__all__ = ["bed"]

OUTAGE_SECONDS = 20.0


def test_a_run_rides_out_failed_api_requests_and_runs_each_step_once(bed: Bed) -> None:
    run, _ = submit(bed, stack="k8s-async")  # it returns once the orchestrator Job exists
    faults = bed.emulator.faults  # only the orchestrator pod creates and deletes step Jobs
    faults.fail_next("create", "jobs", code=503, times=2)
    faults.fail_next("create", "jobs", code=429)
    faults.fail_next("delete", "jobs", code=500, times=2)
    faults.fail_next("get", "pods/log", code=503)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    assert set(step_statuses(bed, ended).values()) == {ExecutionStatus.COMPLETED}
    pods = bed.seen.step_objects("Pod", run)
    assert sorted(p["metadata"]["labels"][STEP_KEY] for p in pods) == ["add", "double", "make"]
    assert faults.pending_failures() == 0
    with Client(bed.workspace.config, bed.workspace.store) as client:
        assert "making 3" in client.step_logs("make", run=run.id)


def test_a_run_outlives_the_api_server_gone_for_20_seconds(bed: Bed, tmp_path: Path) -> None:
    release = tmp_path / "release"
    run, _ = submit(bed, "stoppable", stack="k8s-async", path=str(release))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    steps = bed.workspace.store.steps
    assert wait_until(
        lambda: steps.get(waiting.id).pid is not None, BOUND
    )  # its pod's process runs
    went_down = time.monotonic()
    bed.emulator.go_down()
    try:
        release.touch()  # the step ends while nobody can report its pod's end
        assert wait_until(lambda: steps.get(waiting.id).status is ExecutionStatus.COMPLETED, BOUND)
        time.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - went_down)))  # the outage
    finally:
        bed.emulator.come_back()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    pods = bed.seen.step_objects("Pod", run)
    assert [p["metadata"]["labels"][STEP_KEY] for p in pods] == ["wait_for", "double"]
