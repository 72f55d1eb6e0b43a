"""The orchestrator Job's active deadline: its pod's SIGTERM at the deadline fails the run and
deletes its step Jobs, rather than stopping the run as a user's stop would.

Pure checks of :class:`DeadlineSignal` (the deadline from the Job, a SIGTERM to this process),
and one run on the bed: the emulator's Job controller deletes the orchestrator pod once the
Job's ``activeDeadlineSeconds`` passed since its ``startTime`` (as Kubernetes does), and the
process kubelet sends that pod SIGTERM."""

from __future__ import annotations

import os
import signal
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.integrations.kubernetes.test_orchestrator_e2e import SCRIPT, STEPS_MODULE
from tests.integrations.kubernetes.testbed import (
    BOUND,
    IMAGE,
    Bed,
    BedFactory,
    job_exists,
    register_kubernetes_stack,
    submit_script,
    wait_for_run_end,
    wait_for_step,
)
from tests.waiting import wait_for, wait_until
from wharf.core.enums import ExecutionStatus
from wharf.execution.run_stop import RunStopper
from wharf.execution.signals import RunSignals
from wharf.integrations.kubernetes.labels import STEP_KEY
from wharf.integrations.kubernetes.orchestrator_deadline import (
    CLOCK_SKEW_SECONDS,
    DeadlineSignal,
    OrchestratorDeadlineExceeded,
    job_deadline,
)

DEADLINE_SECONDS = 15
"""Long enough for the orchestrator pod to start its run loop and the step's pod on 2 busy
cores (the step runs about 1.5 s after the Job starts on an idle machine); the step then waits
for a file that never comes, and the test for the deadline: each second here is one of wall."""


def job(deadline: int | None, started: str | None = "2026-12-06T10:00:00Z") -> dict[str, Any]:
    spec = {} if deadline is None else {"activeDeadlineSeconds": deadline}
    status = {} if started is None else {"startTime": started}
    return {"metadata": {"name": "wharf-run"}, "spec": spec, "status": status}


def at(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_the_deadline_is_the_jobs_start_time_plus_its_active_deadline() -> None:
    assert job_deadline(job(90)) == datetime(2026, 12, 6, 10, 1, 30, tzinfo=UTC)
    assert job_deadline(job(None)) is None
    assert job_deadline(job(90, started=None)) is None  # not started: no deadline yet
    signals = DeadlineSignal(job(90), clock=lambda: at("2026-12-06T10:01:00"))
    assert not signals.passed()
    near = at("2026-12-06T10:01:30") - CLOCK_SKEW_SECONDS  # the control plane's clock ahead
    assert DeadlineSignal(job(90), clock=lambda: near).passed()


def test_a_sigterm_past_the_deadline_raises_naming_the_jobs_active_deadline() -> None:
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    past = DeadlineSignal(job(90), clock=lambda: at("2026-12-06T10:02:00"))
    with pytest.raises(OrchestratorDeadlineExceeded) as raised, past:
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs in this (the main) thread
    assert repr(raised.value) == (
        "The orchestrator Job wharf-run passed its active deadline (active_deadline_seconds: "
        "90 s, DeadlineExceeded): Kubernetes stopped the orchestrator pod."
    )
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # given back


def test_without_a_deadline_sigterm_is_left_alone() -> None:
    with DeadlineSignal(job(None)):
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


class _Runs:
    def __init__(self) -> None:
        self.updates: list[Any] = []

    def update(self, run_id: Any, update: Any) -> None:
        self.updates.append(update.status)


class _Store:
    """The run's store as :class:`RunStopper` writes to it (a stand-in for the port)."""

    def __init__(self) -> None:
        self.runs = _Runs()


def test_the_run_loop_takes_sigterm_itself_and_the_deadline_only_hooks_into_it() -> None:
    """Before, the deadline took SIGTERM over and handed an early one to whatever handled
    SIGINT (the run loop's, when it was the run loop's): now it registers a SIGTERM hook and
    the run loop handles SIGTERM as anywhere else, asking the hook first."""
    now = {"t": at("2026-12-06T10:01:00")}
    store = _Store()
    run_signals = RunSignals(RunStopper(store, uuid.uuid4()), "r")  # type: ignore[arg-type]
    deadline = DeadlineSignal(job(90), clock=lambda: now["t"])
    try:
        with deadline:
            run_signals.install()
            assert signal.getsignal(signal.SIGTERM) == run_signals._handle
            now["t"] = at("2026-12-06T10:02:00")  # past the deadline: the run fails
            with pytest.raises(OrchestratorDeadlineExceeded):
                signal.raise_signal(signal.SIGTERM)
            signal.raise_signal(signal.SIGTERM)  # a second: the run is ending already
            assert run_signals.received == [] and deadline.exceeded
            run_signals.restore()
    finally:
        run_signals.restore()
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_early_sigterm_in_the_run_loop_stops_the_run_gracefully() -> None:
    store = _Store()
    run_signals = RunSignals(RunStopper(store, uuid.uuid4()), "r")  # type: ignore[arg-type]
    early = DeadlineSignal(job(90), clock=lambda: at("2026-12-06T10:00:30"))
    try:
        with early:
            run_signals.install()
            signal.raise_signal(signal.SIGTERM)
            assert run_signals.received == [signal.SIGTERM] and not early.exceeded
            wait_for(lambda: store.runs.updates == [ExecutionStatus.STOPPING], "the stop")
    finally:
        run_signals.restore()


def test_a_deadline_that_passes_before_the_run_loop_raises_outside_it_too() -> None:
    """The pod enters the deadline as soon as it read its Job, before the run loop (which
    installs its handlers later): a SIGTERM there at the deadline fails the run as well."""
    past = DeadlineSignal(job(90), clock=lambda: at("2026-12-06T10:02:00"))
    with pytest.raises(OrchestratorDeadlineExceeded), past:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # no run loop
        signal.raise_signal(signal.SIGTERM)


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    """The bed with stack ``k8s-deadline``: asynchronous, every Job with an active deadline."""
    made = make_bed({"k8s_steps.py": STEPS_MODULE, "run.py": SCRIPT}, active_stack="k8s-deadline")
    config = {"image": IMAGE, "synchronous": False, "active_deadline_seconds": DEADLINE_SECONDS}
    register_kubernetes_stack(made.workspace, "k8s-deadline", config)
    return made


def test_the_orchestrator_jobs_active_deadline_fails_the_run_and_deletes_its_step_jobs(
    bed: Bed, tmp_path: Path
) -> None:
    run, _ = submit_script(bed, "stoppable", "k8s-deadline", path=str(tmp_path / "never"))
    waiting = wait_for_step(bed, run, "wait_for", ExecutionStatus.RUNNING)
    ended = wait_for_run_end(bed, run)
    assert ended.status is ExecutionStatus.FAILED, ended.status_reason
    assert ended.status_reason is not None
    assert "passed its active deadline" in ended.status_reason
    assert f"active_deadline_seconds: {DEADLINE_SECONDS} s" in ended.status_reason
    step = bed.workspace.store.steps.get(waiting.id)
    assert step.status is ExecutionStatus.FAILED, step.status_reason
    (step_pod,) = bed.seen.step_objects("Pod", run)
    assert step_pod["metadata"]["labels"][STEP_KEY] == "wait_for"
    name = step_pod["metadata"]["labels"]["job-name"]
    assert wait_until(lambda: not job_exists(bed.emulator, name), BOUND), f"step Job {name} is left"
