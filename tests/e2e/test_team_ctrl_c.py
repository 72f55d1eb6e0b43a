"""Ctrl-C of a pipeline script logged in to a workspace server: its isolated step, which hears
of a stop through the store, stops at once and the run ends stopped. The run's process holds
a run-scoped token, which the server refused to record the run stopping ("may only end its
own run"): the step ran on to its end and the run ended completed. A real server process, a
real script, a real SIGINT."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_cli import wharf
from tests.cli.test_run_views import _workspace_server
from tests.waiting import wait_for
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.client import Client

SCRIPT = """
import os, pathlib, time
from wharf import pipeline, step

@step(enable_cache=False, runtime="isolated")
def long_work() -> None:
    pathlib.Path(os.environ["STARTED_FILE"]).touch()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.05)
    pathlib.Path(os.environ["DONE_FILE"]).touch()

@pipeline
def interrupted() -> None:
    long_work()

interrupted()
"""

PROMPTLY_SECONDS = 20.0
"""From the Ctrl-C to the script's exit: the step's process hears the stop at its next beat
(every 2 s here) or at once; it would otherwise run on for 60 s."""


@pytest.mark.slow
def test_ctrl_c_stops_an_isolated_step_of_a_team_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_database_url: Any
) -> None:
    server, user_env = _workspace_server(empty_database_url("sqlite"), tmp_path / "team")
    started, done = tmp_path / "started", tmp_path / "done"
    script = tmp_path / "interrupted.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WHARF_")}
    env |= {**user_env, "WHARF_HOME": str(tmp_path / "home"), "WHARF_HEARTBEAT_INTERVAL": "2"}
    env |= {"STARTED_FILE": str(started), "DONE_FILE": str(done)}
    try:
        for args in (
            (
                "component",
                "register",
                "procs",
                "--type",
                "orchestrator",
                "--flavor",
                "local_process",
            ),
            ("stack", "register", "procs", "-o", "procs", "-a", "default"),
            ("stack", "set", "procs"),
        ):
            made = wharf(*args, env=env)
            assert made.returncode == 0, made.stderr
        process = subprocess.Popen(
            [sys.executable, str(script)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            wait_for(started.exists, "the isolated step", 60)
            process.send_signal(signal.SIGINT)
            asked = time.monotonic()
            _, err = process.communicate(timeout=PROMPTLY_SECONDS + 30)
        finally:
            if process.poll() is None:
                process.kill()
        took = time.monotonic() - asked
        for name, value in user_env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
        with Client(load_config()) as client:
            (run,) = client.list_pipeline_runs().items
            (step,) = client.list_run_steps(run.id).items
    finally:
        server.stop()
    assert process.returncode == -signal.SIGINT, err  # as any process a Ctrl-C ended
    assert "Could not record run" not in err, err
    assert not done.exists() and took < PROMPTLY_SECONDS, (took, err)
    assert run.status is ExecutionStatus.STOPPED, run.status_reason
    assert step.status is ExecutionStatus.STOPPED, step.status_reason
