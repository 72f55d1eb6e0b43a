"""A run whose orchestrating process is killed (SIGKILL) while a step runs, between beats: the
lost-run sweep ends the step when its run was last seen alive, and ``wharf runs show`` shows
such durations as what they are, lower bounds ("unknown" under a second), never as a precise
"0 ms". Real processes: the pipeline script, and the CLI that sweeps and shows the run."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.waiting import wait_for
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
def first() -> int:
    return 1


@step(enable_cache=False)
def slow(x: int, started: str) -> int:
    Path(started).write_text("started")
    time.sleep(600)
    return x


@pipeline
def lost_late(started: str) -> None:
    slow(first(), started=started)


if __name__ == "__main__":
    lost_late(started=sys.argv[1])
"""

BOUND = 120


def test_a_step_of_a_lost_run_shows_its_duration_as_unknown_not_0_ms(
    wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "60")  # no beat while the step runs
    (tmp_path / "lost.py").write_text(SCRIPT)
    started = tmp_path / "started"
    process = subprocess.Popen([sys.executable, "lost.py", str(started)], cwd=tmp_path)
    try:
        wait_for(lambda: started.exists() or process.poll() is not None, "the step", BOUND)
        assert started.exists(), "the script ended before its step started"
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=BOUND)
    with Client(load_config()) as client:
        (run,) = client.list_pipeline_runs().items  # the read sweeps: its process is gone
        assert run.status is ExecutionStatus.FAILED, run.status_reason
        steps = {s.name: s for s in client.list_run_steps(run.id).items}
    first, slow = steps["first"], steps["slow"]
    assert slow.status is ExecutionStatus.FAILED
    assert slow.start_time is not None and slow.end_time is not None
    assert first.end_time is not None
    # alive as long as its run's process was seen: not before the last sign (its start)
    assert slow.end_time >= slow.start_time >= first.end_time
    assert slow.end_time == run.end_time
    shown = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "runs", "show", str(run.id)],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    (slow_row,) = [re.split(r"\s{2,}", line.strip()) for line in lines if "slow" in line]
    assert slow_row[1:3] == ["failed", "unknown"], shown.stdout  # not "0 ms"
    (duration,) = [line.split(None, 1)[1] for line in lines if line.startswith("Duration")]
    assert duration == "unknown" or duration.startswith("≥ "), shown.stdout
