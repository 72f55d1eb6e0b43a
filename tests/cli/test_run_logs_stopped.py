"""``wharf runs logs`` and ``wharf steps logs`` on a step that was force-stopped with no output
stored: each says so with the step's status and reason, instead of printing nothing (the step
did not show at all in ``runs logs``); ``runs logs --follow`` ends saying how the run ended;
and ``wharf steps logs RUN`` given a run's id alone says
how to name one of its steps. Real pipeline processes, real ``wharf`` commands."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.cli.test_cli import assert_one_line_error, wharf
from tests.waiting import wait_until
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.client import Client

SCRIPT = """
import time
from wharf import pipeline, step

@step
def load() -> int:
    print("loading")
    return 1

@step(enable_cache=False)
def block(x: int) -> int:
    time.sleep(120)  # blocked in C: only a forced stop ends it
    return x

@pipeline(name="blocking", enable_cache=False)
def blocking() -> None:
    block(load())

if __name__ == "__main__":
    blocking()
"""


def _block_status() -> ExecutionStatus | None:
    with Client(load_config()) as client:
        runs = client.list_pipeline_runs().items
        if not runs:
            return None
        steps = {s.name: s for s in client.list_run_steps(runs[0].id).items}
        return steps["block"].status if "block" in steps else None


def test_a_force_stopped_silent_step_says_it_has_no_stored_output(
    home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "blocking.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "WHARF_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: _block_status() is ExecutionStatus.RUNNING, timeout=60)
        with Client(load_config()) as client:
            run = client.list_pipeline_runs().items[0]
        assert wharf("runs", "stop", run.name, "--force").returncode == 0
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert _block_status() is ExecutionStatus.STOPPED

    logs = wharf("runs", "logs", run.name)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert lines[0] == "[load] loading"
    assert lines[1].startswith("[block] has no stored output (stopped). Reason: Force-stopped")
    followed = wharf("runs", "logs", run.name, "--follow")
    assert followed.returncode == 0 and followed.stdout == logs.stdout
    # following ends saying how the run ended: before, it just stopped printing
    assert followed.stderr == f"Run '{run.name}' ended stopped: Force-stopped on request.\n"
    assert wharf("runs", "logs", run.name).stderr == ""  # not following: nothing to say

    step = wharf("steps", "logs", run.name, "block")
    assert step.returncode == 0 and step.stdout == ""
    assert step.stderr.startswith("Step 'block' has no stored output (stopped). Reason: Force")


def test_a_run_given_alone_to_steps_logs_says_how_to_name_its_steps(
    home: Path, tmp_path: Path
) -> None:
    script = tmp_path / "blocking.py"
    script.write_text(SCRIPT.replace("time.sleep(120)", "pass"))
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "WHARF_HOME": str(home)},
        capture_output=True,
        check=True,
        timeout=120,
    )
    with Client(load_config()) as client:
        run = client.list_pipeline_runs().items[0]
    prefix = run.id.hex[:6]
    assert_one_line_error(
        wharf("steps", "logs", prefix),
        f"Error: '{prefix}' is run '{run.name}', not a step run: wharf steps logs {prefix} STEP "
        f"prints one of its steps (its steps: load, block); wharf runs logs {prefix} prints them "
        "all.",
    )
    assert_one_line_error(wharf("steps", "logs", "beef0123"), "No step run with id or id prefix")


def test_following_a_run_whose_process_was_killed_says_its_end_once(
    home: Path, tmp_path: Path
) -> None:
    """The follower's own sweep ends the run (orchestrator lost) and warns so: the closing line
    is not said a second time."""
    script = tmp_path / "blocking.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "WHARF_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: _block_status() is ExecutionStatus.RUNNING, timeout=60)
        with Client(load_config()) as client:
            run = client.list_pipeline_runs().items[0]
    finally:
        process.kill()
        process.wait()
    followed = wharf("runs", "logs", run.name, "--follow")
    assert followed.returncode == 0, followed.stderr
    (line,) = followed.stderr.splitlines()
    assert "orchestrator lost" in line, line
    assert followed.stdout.splitlines()[-1].startswith("[block] has no stored output (failed).")


def test_a_graceful_stop_names_the_running_steps_and_how_to_end_them_at_once(
    home: Path, tmp_path: Path
) -> None:
    """A step blocked in a long C call (here ``time.sleep``) is interrupted only once the call
    returns: before, ``runs stop`` said only 'is stopping' and the run stayed so."""
    script = tmp_path / "blocking.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "WHARF_STORE_URL"}
    process = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "WHARF_HOME": str(home)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_until(lambda: _block_status() is ExecutionStatus.RUNNING, timeout=60)
        with Client(load_config()) as client:
            run = client.list_pipeline_runs().items[0]
        stopped = wharf("runs", "stop", run.name)
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout == (
            f"Run '{run.name}' is stopping: no new steps start; still running: block "
            f"(`wharf runs stop {run.name} --force` ends them at once).\n"
        )
        forced = wharf("runs", "stop", run.name, "--force")
        assert forced.returncode == 0 and forced.stdout == f"Run '{run.name}' is stopping.\n"
        process.wait(timeout=60)
    finally:
        process.kill()
        process.wait()
