"""Step pods and their heartbeat, end to end on the allocation tests' bed
(:mod:`.allocations_bed`: its stacks and pool, with this module's steps and a shorter grace;
issue 27 §3 and §5): a reclaimed step pod whose code ignores the stop is cut off after the
pod's grace period (``pod_stop_grace_period``, passed to the step's process:
``wharf.execution.stop_deadline``), and a step operator's pod, allowed ``pod_startup_timeout``
to start, beats as its process starts, so its allowance ends there. The embedded Resource
Manager beside the bed's SQLite store is the one every pod asks, renews and releases through.
The step that ignores the stop is the local test's (:mod:`tests.stop_ignoring`, copied into the
bed's project, whence it travels in the run's code archive). Both scenarios share one bed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests import stop_ignoring
from tests.integrations.kubernetes.allocations_bed import (
    HEARTBEAT,
    pod_of,
    register_allocation_stacks,
    submit,
)
from tests.integrations.kubernetes.testbed import (
    BOUND,
    Bed,
    BedFactory,
    attempts,
    exit_code,
    reported_run_id,
    run_in_project,
    runner_script,
    wait_for_run_end,
)
from tests.resource_beds import (
    assert_cut_off_then_retried,
    assert_handed_over_after_grace,
    contended_pool,
)
from tests.waiting import wait_until
from wharf.core.enums import ExecutionStatus
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.store.models import StepRunRecord

GRACE = 8  # the step pods' pod_stop_grace_period
SLACK = 30  # seconds a cut-off may come after its grace on a loaded machine
STARTUP = 600  # the step operator's pod_startup_timeout (the default)

STEPS_MODULE = """
import pathlib

from stop_ignoring import ignore_the_stop
from wharf import ResourceSettings, get_step_context, pipeline, step


@step(
    enable_cache=False,
    retry={"max_retries": 1},
    settings={
        "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
    },
)
def ignores_the_stop(path: str, started: str, marker: str) -> int:
    return ignore_the_stop(path, started, marker, limit=200)


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def quick() -> int:
    return 1


@pipeline(name="low_pipe", enable_cache=False, raise_on_failure=False)
def low_pipe(path: str, started: str, marker: str) -> None:
    ignores_the_stop(path, started, marker)


@pipeline(name="high_pipe", enable_cache=False, raise_on_failure=False)
def high_pipe() -> None:
    quick()


@step(step_operator="k8s-op", enable_cache=False)
def liveness_window(seen: str) -> int:
    # What the step's record says as its code starts: the window its last beat opened.
    from wharf.config.global_config import load_config
    from wharf.execution.services import open_store

    store = open_store(load_config())
    try:
        record = store.steps.get(get_step_context().step_run.id)
    finally:
        store.close()
    window = record.heartbeat_deadline - record.last_heartbeat
    pathlib.Path(seen).write_text(str(window.total_seconds()))
    return 1


@pipeline(enable_cache=False, raise_on_failure=False)
def operated(seen: str) -> None:
    liveness_window(seen)
"""

SCRIPT = runner_script("k8s_cutoff_steps")
STOP_IGNORING = Path(stop_ignoring.__file__).read_text()  # the project's copy: pods import it


@pytest.fixture
def bed(make_bed: BedFactory) -> Bed:
    made = make_bed(
        {"k8s_cutoff_steps.py": STEPS_MODULE, "stop_ignoring.py": STOP_IGNORING, "run.py": SCRIPT},
        active_stack="k8s",
        heartbeat_interval=HEARTBEAT,
    )
    register_allocation_stacks(made, GRACE)
    return made


def pod_exit_code(bed: Bed, step: StepRunRecord) -> int | None:
    """The exit code of the step run's pod, as the emulator last saw it."""
    return exit_code(bed.seen.last_state(pod_of(bed, step)))


def test_a_reclaimed_step_pod_is_cut_off_after_its_grace_and_an_operator_pod_beats_at_start(
    bed: Bed, tmp_path: Path
) -> None:
    """A reclaimed step pod that ignores the stop is cut off after its grace; then, on the same
    bed, a step operator's pod beats as its process starts: with a heartbeat interval of 60 s
    no regular beat comes before the step's code reads its record, so the window it sees is
    the usual one only because the process beat as it started (the engine's first beat
    allowed it the pod's startup timeout)."""
    ws = bed.workspace
    contended_pool(ws)
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "marker"
    low = submit(bed, "low_pipe", path=str(release), started=str(started), marker=str(marker))
    assert wait_until(started.exists, BOUND), "the low step never started in its pod"
    high = submit(bed, "high_pipe")
    ended_high = wait_for_run_end(bed, high)
    assert ended_high.status is ExecutionStatus.COMPLETED, ended_high.status_reason
    release.write_text("go")  # the low step's retry may now finish
    ended_low = wait_for_run_end(bed, low)
    assert ended_low.status is ExecutionStatus.COMPLETED, ended_low.status_reason

    reclaimed, retried = attempts(bed, low)
    # The interrupt reached the code, which ignored it; the step's process then ended itself
    # (exit code 1, not a signal; its finally block never ran), so did its pod.
    assert_cut_off_then_retried(reclaimed, retried, marker)
    assert wait_until(lambda: pod_exit_code(bed, reclaimed) is not None, 60)
    assert pod_exit_code(bed, reclaimed) == 1
    # The licence was released once the pod's grace period had passed, and went to the
    # preemptor.
    (high_step,) = attempts(bed, high)
    assert_handed_over_after_grace(ws, reclaimed, high_step, GRACE, SLACK)

    # The step operator's pod beats as its process starts.
    interval = 60.0
    assert liveness_timeout_for(interval) < STARTUP
    seen = tmp_path / "seen"
    done = run_in_project(  # synchronous: the local orchestrator; this interval for this run only
        bed,
        sys.executable,
        "run.py",
        "operated",
        json.dumps({"seen": str(seen)}),
        WHARF_ACTIVE_STACK="operated",
        WHARF_HEARTBEAT_INTERVAL=str(interval),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    run = bed.workspace.store.runs.get(reported_run_id(done))
    assert run.status is ExecutionStatus.COMPLETED, run.status_reason
    assert float(seen.read_text()) == pytest.approx(liveness_timeout_for(interval), abs=1)
