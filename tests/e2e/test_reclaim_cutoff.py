"""A reclaimed local isolated step whose code ignores the stop is cut off after its grace (issue
27 §3, ``wharf.execution.stop_deadline``), end to end with real processes: SQLite store, the
embedded Resource Manager, a ``local_process`` stack. A higher-priority pipeline reclaims the
one licence from a step that catches every interrupt; the step's own process records the
attempt's end once the grace (the orchestrator's ``stop_grace_period``, which its log names)
has passed and exits, which releases the licence; the preemptor then runs, and the reclaimed
step is retried."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_isolated import make_stack
from tests.resource_beds import (
    assert_cut_off_then_retried,
    assert_handed_over_after_grace,
    contended_pool,
)
from tests.stop_ignoring import ignore_the_stop
from tests.waiting import wait_until
from wharf import ResourceSettings, RetryConfig, pipeline, step
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.execution.log_capture import read_log
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, StepRunFilter, StepRunRecord

BOUND = 180.0  # seconds: a hang fails the test instead of blocking it
SLACK = 30.0  # seconds the cut-off may come after its grace on a loaded machine
GRACE = 5  # the orchestrator's stop_grace_period, seconds (the default is 30)
"""Inside the grace, the interrupt the heartbeat sends as it hears of the reclaim must reach the
step's code, which writes it to its marker, before the cut-off ends the process: a thread's
work of milliseconds, seconds at worst on two loaded cores. The grace starts only then, so how
long the reclaim takes to be heard does not count."""
LICENSE = ResourceSettings(resources={"license": 1})


@step(enable_cache=False)
def ignores_the_stop(path: str, started: str, marker: str) -> int:
    """Hold the licence until ``path`` exists, swallowing every interrupt; ``marker`` records
    what happened (:func:`tests.stop_ignoring.ignore_the_stop`)."""
    return ignore_the_stop(path, started, marker, limit=170)


@step(enable_cache=False)
def quick(label: str) -> str:
    return label


def attempts(workspace: Workspace, run: PipelineRunRecord) -> list[StepRunRecord]:
    page = PageRequest(sort="asc", size=100)
    return list(workspace.store.steps.list(StepRunFilter(run_id=run.id), page).items)


def test_a_reclaimed_step_that_ignores_the_stop_is_cut_off_after_its_grace(
    wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "2")  # a loaded machine: 11 s liveness
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    setup = Workspace.open(load_config())
    try:
        make_stack(
            setup, "procs", "local_process", orchestrator_config={"stop_grace_period": GRACE}
        )
        contended_pool(setup)
    finally:
        setup.close()
    release, started, marker = tmp_path / "release", tmp_path / "started", tmp_path / "marker"
    low_step = ignores_the_stop.with_options(
        runtime="isolated",
        retry=RetryConfig(max_retries=1),
        settings={
            "resources": ResourceSettings(resources={"license": 1}, reclaim_tolerance="coordinated")
        },
    )
    high_step = quick.with_options(runtime="isolated", settings={"resources": LICENSE})

    @pipeline(name="low_pipe", dynamic=True, raise_on_failure=False)
    def low() -> None:
        low_step(path=str(release), started=str(started), marker=str(marker))

    @pipeline(name="high_pipe", dynamic=True, raise_on_failure=False)
    def high() -> None:
        high_step(label="high")

    runs: dict[str, Any] = {}

    def run(p: Any, key: str) -> None:
        ws = Workspace.open(load_config())
        try:
            runs[key] = p.run_in(ws)
        finally:
            ws.close()

    low_thread = threading.Thread(target=run, args=(low, "low"), daemon=True)
    low_thread.start()
    assert wait_until(started.exists, BOUND), "the low step never started"
    high_thread = threading.Thread(target=run, args=(high, "high"), daemon=True)
    high_thread.start()
    high_thread.join(BOUND)
    assert "high" in runs, "the high run did not end"
    release.write_text("go")  # the low step's retry may now finish
    low_thread.join(BOUND)
    assert "low" in runs, "the low run did not end"

    ws = Workspace.open(load_config())
    try:
        high_run, low_run = runs["high"], runs["low"]
        assert high_run.status is ExecutionStatus.COMPLETED, high_run.status_reason
        assert low_run.status is ExecutionStatus.COMPLETED, low_run.status_reason
        reclaimed, retried = attempts(ws, low_run)
        # The interrupt reached the code, which ignored it; its process was then ended (its
        # finally block never ran); the retry left normally.
        assert_cut_off_then_retried(reclaimed, retried, marker)
        assert reclaimed.logs_uri is not None
        log = read_log(LocalArtifactStore(ws.config.artifact_root), reclaimed.logs_uri)
        # the cut-off names its grace: the component's reached the step's process
        assert f"did not stop within {GRACE} s of being cancelled" in log, log
        # The licence was released by the cut-off, once the grace had passed, and went to the
        # preemptor.
        (high_step_run,) = attempts(ws, high_run)
        assert_handed_over_after_grace(ws, reclaimed, high_step_run, GRACE, SLACK)
        assert retried.resource_request_id is not None
        released = ws.resource_manager().requests.get(retried.resource_request_id)
        assert released.status is ResourceRequestStatus.RELEASED
    finally:
        ws.close()
