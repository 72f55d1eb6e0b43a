"""Allocation-aware step pods (issue 27 §3), end to end on the test bed: steps of pipelines on a
Kubernetes stack that ask for a licence, held and waited for across runs, reclaimed and lost.

Each run is submitted asynchronously by a script in a directory of its own (the steps reach the
pods through the run's code archive); the process kubelet runs the orchestrator pod and the step
pods as processes of this machine (for a lost node, the step operator's pod of a local run: the
kubelet is stopped, killing its processes, and nobody reports on its pods any more); artifacts lie on a real S3 server (moto); the metadata store
is the embedded SQLite file, and the embedded Resource Manager beside it is the one every pod
(orchestrator and step) asks, renews and releases through. What the emulator did to pods and
Jobs is recorded by a listener on its object store (created, last state, deleted), so objects
deleted after their step still count. The pod-spec side of allocations (requests/limits, node
selectors from target settings, the request id annotation) is tested by the step operator's GPU
test (``test_step_operator_outcomes.py``); here the request id annotation is checked on every pod."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from tests.integrations.kubernetes.allocations_bed import (
    GRACE,
    assert_request_annotated,
    bed,
    contended_pool,
    pod_of,
    request_of,
    submit,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    attempts,
    exit_code,
    wait_for_run_end,
    wait_for_step,
)
from tests.waiting import wait_until
from wharf.core.enums import (
    ExecutionStatus,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
)
from wharf.sdk.pools import ensure_pool

__all__ = ["bed"]  # the fixture


def test_a_step_waits_without_a_pod_for_a_licence_another_run_holds(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    rm = ws.resource_manager()
    ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
    release_a, started_a = tmp_path / "release-a", tmp_path / "started-a"
    run_a = submit(bed, "licensed", path=str(release_a), started=str(started_a))
    holding = wait_for_step(bed, run_a, "hold_licence", ExecutionStatus.RUNNING)
    assert wait_until(started_a.exists, BOUND), "run A's step never started in its pod"

    release_b = tmp_path / "release-b"
    release_b.write_text("go")  # B's step ends as soon as it runs
    run_b = submit(bed, "licensed", path=str(release_b))
    queued = wait_for_step(bed, run_b, "hold_licence", ExecutionStatus.QUEUED)
    assert queued.resource_request_id is not None
    # B's orchestrator pod is waiting: it renews its pending request, reporting it pending.
    assert wait_until(
        lambda: request_of(ws, queued).runtime_state is ResourceRequestRuntimeState.PENDING,
        BOUND,
    ), "run B's orchestrator never waited for its request"
    assert request_of(ws, queued).status is ResourceRequestStatus.PENDING
    assert bed.seen.step_objects("Job", run_b) == [], "B's step got a Job while A holds"
    assert bed.seen.step_objects("Pod", run_b) == []
    assert ws.store.steps.get(holding.id).status is ExecutionStatus.RUNNING

    release_a.write_text("go")
    ended_a, ended_b = wait_for_run_end(bed, run_a), wait_for_run_end(bed, run_b)
    assert ended_a.status is ExecutionStatus.COMPLETED, ended_a.status_reason
    assert ended_b.status is ExecutionStatus.COMPLETED, ended_b.status_reason
    (step_a,), (step_b,) = attempts(bed, run_a), attempts(bed, run_b)
    assert step_b.id == queued.id  # the queued step run is the one that ran
    assert step_a.end_time is not None and step_b.start_time is not None
    assert step_b.start_time >= step_a.end_time, "one licence: the steps never overlap"
    assert len(bed.seen.step_objects("Job", run_b)) == 1
    for step in (step_a, step_b):
        assert_request_annotated(bed, step)
        request = request_of(ws, step)
        assert request.status is ResourceRequestStatus.RELEASED, request.status_reason


def test_a_reclaimed_step_pod_stops_through_its_heartbeat_and_is_retried(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    contended_pool(ws)
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "cleanup"
    low = submit(bed, "low_pipe", path=str(release), started=str(started), marker=str(marker))
    first = wait_for_step(bed, low, "hold_reclaimable", ExecutionStatus.RUNNING)
    assert wait_until(started.exists, BOUND), "the low step never started in its pod"

    high_release = tmp_path / "high-release"
    high_release.write_text("go")
    high = submit(bed, "high_pipe", path=str(high_release))
    ended_high = wait_for_run_end(bed, high)
    assert ended_high.status is ExecutionStatus.COMPLETED, ended_high.status_reason
    release.write_text("go")  # the low step's retry may now finish
    ended_low = wait_for_run_end(bed, low)
    assert ended_low.status is ExecutionStatus.COMPLETED, ended_low.status_reason

    # As locally: the reclaimed attempt is cancelled through its heartbeat (its code ends
    # gracefully: the finally block ran) and retried with a fresh request, which completes.
    reclaimed, retried = attempts(bed, low)
    assert reclaimed.id == first.id
    assert (reclaimed.status, retried.status) == (
        ExecutionStatus.RETRYING,
        ExecutionStatus.COMPLETED,
    ), reclaimed.status_reason
    assert "resource request" in (reclaimed.status_reason or "")
    assert (reclaimed.status_reason or "").startswith("Cancelling: ")
    assert marker.read_text().count("cleanup") == 2  # interrupted gracefully, then rerun
    assert reclaimed.resource_request_id != retried.resource_request_id
    (high_step,) = attempts(bed, high)
    victim = request_of(ws, reclaimed)
    assert victim.status is ResourceRequestStatus.PREEMPTED, victim.status_reason
    assert victim.preemption_initiated_by_id == high_step.resource_request_id
    preemptor = request_of(ws, high_step)
    assert victim.released_at is not None and preemptor.allocated_at is not None
    # The step let go within the pod's grace period, and the licence went to the preemptor.
    assert victim.released_at - preemptor.created_at <= timedelta(seconds=GRACE)
    assert preemptor.allocated_at >= victim.released_at
    assert high_step.start_time is not None and high_step.start_time >= victim.released_at
    # Its pod ended by itself (exit code 1: the attempt did not complete; not killed by a
    # signal), and its Job and pod are gone; the retry is a pod of its own.
    reclaimed_pod, retried_pod = pod_of(bed, reclaimed), pod_of(bed, retried)
    assert reclaimed_pod["metadata"]["name"] != retried_pod["metadata"]["name"]
    assert exit_code(bed.seen.last_state(reclaimed_pod)) == 1
    assert wait_until(lambda: bed.seen.gone("Pod", reclaimed_pod), 60), "the pod is left"
    for step in (reclaimed, retried, high_step):
        assert_request_annotated(bed, step)
    assert request_of(ws, retried).status is ResourceRequestStatus.RELEASED
