"""Allocation-aware step pods that are lost, end to end on the test bed
(:mod:`.allocations_bed`): a step pod deleted from outside, and the step operator's pod on a
node that is lost (the kubelet is stopped, killing its processes, and nobody reports on its
pods any more), each give their licence back; the lost attempt is failed, never run again,
and its Job and pod are cleaned up."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integrations.kubernetes.allocations_bed import (
    GRACE,
    SCRIPT,
    STEPS_MODULE,
    bed,
    pod_of,
    register_allocation_stacks,
    request_of,
    submit,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    BedFactory,
    attempts,
    exit_code,
    start_script,
    wait_for_run_end,
    wait_for_step,
)
from tests.waiting import wait_until
from wharf.core.enums import (
    ExecutionStatus,
    ResourceRequestStatus,
)
from wharf.integrations.kubernetes.clients import kube_clients
from wharf.integrations.kubernetes.step_backend_attempt import (
    UNREPORTED_END_MARGIN_ENV,
    UNREPORTED_END_MARGIN_SECONDS,
    unreported_end_margin,
)
from wharf.sdk.pools import ensure_pool

__all__ = ["bed"]  # the fixture

LOST_HEARTBEAT = 2  # s: a pod whose node is lost misses its beats for 11 s, not 16
LOST_MARGIN = 2  # s after its grace before a cancelled pod's node is taken as lost (not 30)


@pytest.fixture
def lost_bed(make_bed: BedFactory) -> Bed:
    """The allocations bed with a step heartbeat of ``LOST_HEARTBEAT`` s, whose scripts'
    step backends take a cancelled pod's node as lost ``LOST_MARGIN`` s after its grace."""
    made = make_bed(
        {"k8s_alloc_steps.py": STEPS_MODULE, "run.py": SCRIPT},
        active_stack="k8s",
        heartbeat_interval=LOST_HEARTBEAT,
    )
    register_allocation_stacks(made, GRACE)
    made.env[UNREPORTED_END_MARGIN_ENV] = str(LOST_MARGIN)
    return made


def test_a_step_pod_deleted_from_outside_gives_its_licence_back(bed: Bed, tmp_path: Path) -> None:
    ws = bed.workspace
    rm = ws.resource_manager()
    ensure_pool(rm, "licenses", {"license": 1}, account=ws.user.name)
    release, started = tmp_path / "release", tmp_path / "started"
    run = submit(bed, "licensed", path=str(release), started=str(started))
    holding = wait_for_step(bed, run, "hold_licence", ExecutionStatus.RUNNING)
    assert wait_until(started.exists, BOUND), "the step never started in its pod"
    pod = pod_of(bed, holding)
    clients = kube_clients(kubeconfig=str(bed.emulator.kubeconfig_path))
    try:  # as `kubectl delete pod` would: its grace (GRACE) outlasts keeping its log on SIGTERM
        clients.core.delete_namespaced_pod(pod["metadata"]["name"], "default")
    finally:
        clients.close()
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.FAILED, ended.status_reason
    steps = attempts(bed, run)
    assert [s.id for s in steps] == [holding.id], "the lost step ran again"
    (lost,) = steps
    assert lost.status is ExecutionStatus.FAILED, lost.status_reason
    # Its end was seen (its pod killed by SIGTERM, or its Job failed, whichever is read
    # first): not 'Heartbeat lost: …', no beat was missed.
    reason = lost.status_reason or ""
    assert reason.startswith("The step process "), reason
    assert reason.endswith(" before reporting its result."), reason
    request = request_of(ws, holding)
    assert request.status is ResourceRequestStatus.RELEASED, request.status_reason
    assert not release.exists()  # the step never finished by itself
    # The Job did not replace the pod (its failure counts: backoffLimit 0, no disruption).
    assert [p["metadata"]["name"] for p in bed.seen.step_objects("Pod", run)] == [
        pod["metadata"]["name"]
    ]
    assert exit_code(bed.seen.last_state(pod)) == 143  # SIGTERM, as a deleted pod gets


def test_a_step_pod_on_a_lost_node_gives_its_licence_back(lost_bed: Bed, tmp_path: Path) -> None:
    """The step operator's pod (the orchestrator is this machine's) on a node that is lost:
    its process dies with the kubelet, and nobody reports on its pod any more."""
    bed = lost_bed
    ws = bed.workspace
    ensure_pool(ws.resource_manager(), "licenses", {"license": 1}, account=ws.user.name)
    release, started = tmp_path / "release", tmp_path / "started"
    script = start_script(bed, "operated", "operated", path=str(release), started=str(started))
    try:
        assert wait_until(started.exists, BOUND), "the step never started in its pod"
        bed.kubelet.stop()  # the node is lost
        output, _ = script.communicate(timeout=BOUND)
    finally:
        script.kill()
    (run,) = ws.store.runs.list().items
    assert run.status is ExecutionStatus.FAILED, output
    (lost,) = attempts(bed, run)
    assert lost.status is ExecutionStatus.FAILED, lost.status_reason
    assert (lost.status_reason or "").startswith("Heartbeat lost"), lost.status_reason
    request = request_of(ws, lost)
    assert request.status is ResourceRequestStatus.RELEASED, request.status_reason
    # The cancelled attempt did not wait for ever for a pod nobody reports on: once its grace
    # period (and a margin) passed, the pod was force-deleted and its Job deleted.
    pod = pod_of(bed, lost)
    assert bed.seen.gone("Pod", pod), "the lost node's pod is left"
    (job,) = bed.seen.step_objects("Job", run)
    assert wait_until(lambda: bed.seen.gone("Job", job), 30), "the step's Job is left"


def test_the_margin_before_a_node_is_taken_as_lost_is_30_s_unless_the_environment_says(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert unreported_end_margin({}) == UNREPORTED_END_MARGIN_SECONDS == 30
    assert unreported_end_margin({UNREPORTED_END_MARGIN_ENV: ""}) == 30
    assert unreported_end_margin({UNREPORTED_END_MARGIN_ENV: "2.5"}) == 2.5
    assert unreported_end_margin({UNREPORTED_END_MARGIN_ENV: "0"}) == 0
    assert not caplog.records
    for wrong in ("-1", "soon", "nan", "inf"):  # not seconds: the default, and a warning
        caplog.clear()
        assert unreported_end_margin({UNREPORTED_END_MARGIN_ENV: wrong}) == 30
        (record,) = caplog.records
        assert record.getMessage() == (
            f"{UNREPORTED_END_MARGIN_ENV}={wrong!r} is not a number of seconds (0 or more): "
            "30 s are used."
        )
