"""The step launcher's wait before a retry ends at once when the run is stopped: Ctrl-C in the
terminal of a pipeline whose failed step waits a long delay to retry stops the run right away,
in a real process, instead of after the delay, and the retry that never started ends the step's
last attempt stopped (never left retrying in a finished run)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_for
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.client import Client
from wharf.store.models import StepRunRecord

DELAY = 300
"""The retry delay of the script's step: far longer than the test may take."""
BOUND = 60.0

SCRIPT = f"""
from wharf import pipeline, step

@step(enable_cache=False, retry={{"max_retries": 2, "delay": {DELAY}}})
def flaky() -> int:
    raise RuntimeError("always")

@pipeline(name="waits_to_retry")
def waits_to_retry() -> None:
    flaky()

if __name__ == "__main__":
    waits_to_retry()
"""


def _retrying_step(process: subprocess.Popen[str]) -> StepRunRecord:
    with Client(load_config()) as client:

        def retrying() -> StepRunRecord | None:
            assert process.poll() is None, "the pipeline ended early"
            runs = client.list_pipeline_runs().items
            steps = client.list_run_steps(runs[0].id).items if runs else []
            if steps and steps[0].status is ExecutionStatus.RETRYING:
                return steps[0]
            return None

        return wait_for(retrying, "the step to fail its first attempt", BOUND)


def test_ctrl_c_ends_the_wait_before_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(name, raising=False)
    script = tmp_path / "waits_to_retry.py"
    script.write_text(SCRIPT)
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = _retrying_step(process)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=BOUND)  # BOUND < DELAY: the delay was cut short
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == -signal.SIGINT, err  # what a shell shows as 130
    with Client(load_config()) as client:
        run = client.get_pipeline_run(first.run_id)
        steps = client.list_run_steps(run.id).items
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    assert [(s.attempt, s.status) for s in steps] == [(1, ExecutionStatus.STOPPED)]
    reason = steps[0].status_reason or ""
    assert "retry never started" in reason and "always" in reason, reason
    assert steps[0].end_time == first.end_time  # the attempt ended when it failed
    # the console claims no duration for the attempt that never ran ("stopped in 0.00 s")
    ended = [line for line in err.splitlines() if "Step 'flaky' stopped" in line]
    assert len(ended) == 1 and "Step 'flaky' stopped: Stopped on request" in ended[0], err
