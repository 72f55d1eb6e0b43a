"""How a dynamic run's running steps are stopped: by a ``fail_fast`` failure of another step
(as a static pipeline's are), and by a forced stop that a step's code in the function's (main)
thread swallowed (``except BaseException``)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from wharf import get_step_context, pipeline, step
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, StepRunFilter

BOUND = 20.0
"""Seconds a step below runs at most when nothing stops it (the test then fails, not hangs)."""
FORCED_BOUND = 60.0
"""Seconds a step waits at most for its run's forced stop (a CLI process's start included)."""


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.3")
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def steps_of(workspace: Workspace, run_id: Any) -> dict[str, tuple[ExecutionStatus, str | None]]:
    page = workspace.store.steps.list(StepRunFilter(run_id=run_id), PageRequest(size=100))
    return {s.name: (s.status, s.status_reason) for s in page.items}


STARTED = threading.Event()


@step(enable_cache=False)
def runs_long() -> int:
    """Runs until it is interrupted (at most ``BOUND`` seconds)."""
    STARTED.set()
    deadline = time.monotonic() + BOUND
    while time.monotonic() < deadline:
        time.sleep(0.01)
    return 1


@step(enable_cache=False)
def fails_once_the_other_runs() -> int:
    assert STARTED.wait(BOUND)
    raise ValueError("broken")


@pytest.mark.parametrize("where", ["submitted", "called"])
def test_a_fail_fast_failure_stops_the_running_steps(workspace: Workspace, where: str) -> None:
    """``runs_long`` in a thread of the run's pool (submitted) or in the function's thread
    (called): a failure of another step interrupts it, as a static pipeline's fail_fast does;
    before, it ran to its end, and the run's end waited for it."""
    STARTED.clear()
    got: dict[str, str] = {}

    @pipeline(dynamic=True, execution_mode="fail_fast", raise_on_failure=False)
    def p() -> None:
        failing = fails_once_the_other_runs.submit()
        try:
            if where == "called":
                runs_long()
            else:
                runs_long.submit().result()
        except Exception as exc:
            got["call"] = str(exc)
        failing.wait()

    started = time.monotonic()
    run = p.run_in(workspace)
    assert time.monotonic() - started < BOUND / 2
    assert run.status is ExecutionStatus.FAILED
    assert run.status_reason == "Step(s) failed: fails_once_the_other_runs.", run.status_reason
    steps = steps_of(workspace, run.id)
    assert steps["runs_long"] == (
        ExecutionStatus.STOPPED,
        "Stopped because step 'fails_once_the_other_runs' failed (fail-fast).",
    ), steps
    assert steps["fails_once_the_other_runs"][0] is ExecutionStatus.FAILED
    assert got["call"] == (
        "Step 'runs_long' was stopped: step 'fails_once_the_other_runs' failed "
        "(fail_fast; execution_mode='stop_on_failure' lets it finish)."
    )


def test_stop_on_failure_lets_the_running_steps_finish(workspace: Workspace) -> None:
    STARTED.clear()

    @step(enable_cache=False)
    def finishes_after_the_failure() -> int:
        STARTED.set()
        run_id = get_step_context().pipeline_run.id
        deadline = time.monotonic() + BOUND
        while steps_of(workspace, run_id).get("fails_once_the_other_runs", (None,))[0] is not (
            ExecutionStatus.FAILED
        ):
            assert time.monotonic() < deadline
            time.sleep(0.01)  # polls the store until the other step failed
        return 1

    @pipeline(dynamic=True, execution_mode="stop_on_failure", raise_on_failure=False)
    def p() -> None:
        failing = fails_once_the_other_runs.submit()
        finishes_after_the_failure()
        failing.wait()

    run = p.run_in(workspace)
    assert run.status is ExecutionStatus.FAILED
    steps = steps_of(workspace, run.id)
    assert steps["finishes_after_the_failure"][0] is ExecutionStatus.COMPLETED, steps


@step(enable_cache=False)
def force_own_stop_and_swallow_it(marker: str) -> str:
    """Ask for this run's forced stop (as ``wharf runs stop --force`` from another terminal),
    and swallow each interrupt until the forced one came (at most ``FORCED_BOUND`` seconds)."""
    run_id = str(get_step_context().pipeline_run.id)
    command = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", run_id, "--force"]
    stopping = subprocess.Popen(command)
    swallowed: list[str] = []
    deadline = time.monotonic() + FORCED_BOUND
    try:
        while time.monotonic() < deadline and "ForcedStop" not in swallowed:
            try:
                time.sleep(0.01)
            except BaseException as exc:  # the step's interrupt, then the forced stop
                swallowed.append(type(exc).__name__)
    finally:
        stopping.wait()
    Path(marker).write_text(" ".join(swallowed))
    return "done"


@pytest.mark.timeout(2 * FORCED_BOUND)
def test_a_forced_stop_swallowed_by_a_step_in_the_main_thread_still_ends_the_run(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Before, the step returned and the function went on (here: its own work, written down)
    as though no forced stop had come; now the run ends force-stopped at the step's end."""
    swallowed = tmp_path / "swallowed"
    went_on = tmp_path / "went-on"
    assert threading.current_thread() is threading.main_thread()

    @pipeline(dynamic=True)
    def p() -> None:
        force_own_stop_and_swallow_it(str(swallowed))
        went_on.write_text("the function went on after the forced stop")

    run = p.run_in(workspace)
    assert "ForcedStop" in swallowed.read_text()
    assert not went_on.exists()
    assert run.status is ExecutionStatus.STOPPED
    assert run.status_reason == "Force-stopped on request."
