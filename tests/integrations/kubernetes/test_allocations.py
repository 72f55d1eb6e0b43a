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
test (``test_step_operator_outcomes.py``); here the request id annotation is checked on every pod.

One scenario here, on the contended pool of one licence: a low-priority run's step holds it, a
high-priority run reclaims it (the low step stops through its heartbeat and is retried), and the
retry waits, queued and without a Job or pod, while the high run's step holds the licence, then
runs once that step let it go."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from tests.integrations.kubernetes.allocations_bed import (
    GRACE,
    assert_request_annotated,
    bed,
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
from tests.resource_beds import contended_pool
from tests.waiting import wait_until
from wharf.core.enums import (
    ExecutionStatus,
    ResourceRequestRuntimeState,
    ResourceRequestStatus,
)
from wharf.integrations.kubernetes.labels import STEP_RUN_ID_KEY
from wharf.store.models import PipelineRunRecord, StepRunRecord

__all__ = ["bed"]  # the fixture


def objects_of(
    bed: Bed, kind: str, run: PipelineRunRecord, step: StepRunRecord
) -> list[dict[str, Any]]:
    """The Jobs or pods created for the step run ``step`` of ``run``."""
    return [
        o
        for o in bed.seen.step_objects(kind, run)
        if o["metadata"]["labels"].get(STEP_RUN_ID_KEY) == str(step.id)
    ]


def test_a_reclaimed_step_pod_stops_through_its_heartbeat_and_its_retry_waits_without_a_pod(
    bed: Bed, tmp_path: Path
) -> None:
    ws = bed.workspace
    contended_pool(ws)
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "cleanup"
    low = submit(bed, "low_pipe", path=str(release), started=str(started), marker=str(marker))
    first = wait_for_step(bed, low, "hold_reclaimable", ExecutionStatus.RUNNING)
    assert wait_until(started.exists, BOUND), "the low step never started in its pod"

    high_release = tmp_path / "high-release"
    high = submit(bed, "high_pipe", path=str(high_release))
    holding = wait_for_step(bed, high, "hold_licence", ExecutionStatus.RUNNING)
    # The reclaimed attempt's retry asks for the licence again and waits for it while the high
    # run's step holds it: low's orchestrator pod renews its pending request, reporting it
    # pending, and the retry gets no Job nor pod.
    queued = wait_for_step(bed, low, "hold_reclaimable", ExecutionStatus.QUEUED)
    assert queued.id != first.id and queued.resource_request_id is not None
    assert wait_until(
        lambda: request_of(ws, queued).runtime_state is ResourceRequestRuntimeState.PENDING,
        BOUND,
    ), "run low's orchestrator never waited for its retry's request"
    assert request_of(ws, queued).status is ResourceRequestStatus.PENDING
    assert objects_of(bed, "Job", low, queued) == [], "the retry got a Job while high holds"
    assert objects_of(bed, "Pod", low, queued) == []
    assert ws.store.steps.get(holding.id).status is ExecutionStatus.RUNNING

    release.write_text("go")  # the low step's retry may finish once it runs
    high_release.write_text("go")
    ended_high = wait_for_run_end(bed, high)
    assert ended_high.status is ExecutionStatus.COMPLETED, ended_high.status_reason
    ended_low = wait_for_run_end(bed, low)
    assert ended_low.status is ExecutionStatus.COMPLETED, ended_low.status_reason

    # As locally: the reclaimed attempt is cancelled through its heartbeat (its code ends
    # gracefully: the finally block ran) and retried with a fresh request, which completes.
    reclaimed, retried = attempts(bed, low)
    assert (reclaimed.id, retried.id) == (first.id, queued.id)  # the queued retry is what ran
    assert (reclaimed.status, retried.status) == (
        ExecutionStatus.RETRYING,
        ExecutionStatus.COMPLETED,
    ), reclaimed.status_reason
    assert "resource request" in (reclaimed.status_reason or "")
    assert (reclaimed.status_reason or "").startswith("Cancelling: ")
    assert marker.read_text().count("cleanup") == 2  # interrupted gracefully, then rerun
    assert reclaimed.resource_request_id != retried.resource_request_id
    (high_step,) = attempts(bed, high)
    assert high_step.id == holding.id
    victim = request_of(ws, reclaimed)
    assert victim.status is ResourceRequestStatus.PREEMPTED, victim.status_reason
    assert victim.preemption_initiated_by_id == high_step.resource_request_id
    preemptor = request_of(ws, high_step)
    assert victim.released_at is not None and preemptor.allocated_at is not None
    # The step let go within the pod's grace period, and the licence went to the preemptor.
    assert victim.released_at - preemptor.created_at <= timedelta(seconds=GRACE)
    assert preemptor.allocated_at >= victim.released_at
    assert high_step.start_time is not None and high_step.start_time >= victim.released_at
    # One licence: the retry ran only once the high step let it go.
    assert high_step.end_time is not None and retried.start_time is not None
    assert retried.start_time >= high_step.end_time, "one licence: the steps never overlap"
    # Its pod ended by itself (exit code 1: the attempt did not complete; not killed by a
    # signal), and its Job and pod are gone; the retry is a pod (and a Job) of its own.
    reclaimed_pod, retried_pod = pod_of(bed, reclaimed), pod_of(bed, retried)
    assert reclaimed_pod["metadata"]["name"] != retried_pod["metadata"]["name"]
    assert len(objects_of(bed, "Job", low, retried)) == 1
    assert exit_code(bed.seen.last_state(reclaimed_pod)) == 1
    assert wait_until(lambda: bed.seen.gone("Pod", reclaimed_pod), 60), "the pod is left"
    for step in (reclaimed, retried, high_step):
        assert_request_annotated(bed, step)
    for step in (retried, high_step):
        request = request_of(ws, step)
        assert request.status is ResourceRequestStatus.RELEASED, request.status_reason
