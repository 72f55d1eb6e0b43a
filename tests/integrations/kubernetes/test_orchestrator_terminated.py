"""A SIGTERM that reaches the orchestrator pod before its run loop (the pod still reading its
Job) ends the run failed, saying the pod was terminated and by what.

On the bed: the emulator holds the pod's read of its Job (``Faults.delay``); once that read
arrived, the pod is deleted as ``kubectl delete pod`` does (a deletionTimestamp, then the process
kubelet's SIGTERM). Before, the process died of the signal and left its run initializing, with
no reason (the Job's next pod would then have run it after the stop).
"""

from __future__ import annotations

import signal
import uuid

import pytest

from tests.integrations.kubernetes.test_orchestrator_deadline import _Store
from tests.integrations.kubernetes.test_orchestrator_e2e import SCRIPT, STEPS_MODULE
from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    orchestrator_logs,
    orchestrator_pods,
    register_kubernetes_stack,
    submit_script,
    wait_for_run_end,
)
from tests.kube.emulator.resources import PODS
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.execution.run_stop import RunStopper
from wharf.execution.signals import RunSignals
from wharf.integrations.kubernetes.orchestrator_terminated import (
    OrchestratorTerminated,
    TerminationSignal,
)

HELD_SECONDS = 60.0
"""How long the emulator holds the pod's read of its Job: far longer than the test needs."""


def test_a_sigterm_outside_a_run_loop_raises_once_and_one_inside_stops_the_run() -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    with TerminationSignal() as terminated:
        with pytest.raises(OrchestratorTerminated, match="got SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)  # a second: the run is ending already
        assert terminated.received
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back
    run_signals = RunSignals(RunStopper(_Store(), uuid.uuid4()), "r")  # type: ignore[arg-type]
    with TerminationSignal() as terminated:
        run_signals.install()  # the run loop's own: a graceful stop
        try:
            signal.raise_signal(signal.SIGTERM)
        finally:
            run_signals.restore()
        assert run_signals.received == [signal.SIGTERM] and not terminated.received
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_a_sigterm_before_the_pod_read_its_job_ends_the_run_saying_so(
    make_bed: BedFactory,
) -> None:
    bed: Bed = make_bed({"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT}, active_stack="k8s-async")
    config = {"image": IMAGE, "synchronous": False, "pod_stop_grace_period": 20}
    register_kubernetes_stack(bed.workspace, "k8s-async", config)
    faults = bed.emulator.faults
    faults.delay("get", HELD_SECONDS, "jobs")  # the pod's read of its own Job
    run, _ = submit_script(bed, "on_kubernetes", "k8s-async")
    assert wait_until(lambda: faults.pending_delays() == 0, BOUND), "the pod never read its Job"
    (pod,) = orchestrator_pods(bed, run)
    name = pod["metadata"]["name"]
    bed.emulator.store.delete(PODS, "default", name)  # as `kubectl delete pod` does
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.FAILED, orchestrator_logs(bed, run)
    assert ended.status_reason == (
        f"The orchestrator pod default/{name} was terminated (SIGTERM) before it ran the run's "
        f"steps; Kubernetes stopped it: its pod {name} was deleted."
    ), ended.status_reason
    assert bed.seen.step_objects("Pod", run) == []  # no step ran
