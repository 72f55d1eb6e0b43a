"""A run rides out a short outage of the Kubernetes API: while its orchestrator pod runs, the
API answers some step Job creates and deletes and some pod log reads with 503, 500 and 429
(the emulator's injected faults); every step still runs once, in one pod, and its log is kept."""

from __future__ import annotations

from tests.integrations.kubernetes.test_orchestrator_e2e import Bed, bed, submit
from tests.integrations.kubernetes.testbed import step_statuses, wait_for_run_end
from wharf import Client
from wharf.core.enums import ExecutionStatus
from wharf.integrations.kubernetes.labels import STEP_KEY

__all__ = ["bed"]


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
