"""A step's own process ended at once by SIGTERM (the signal's default action: no Python code
runs) keeps in its stored log what the step printed before the signal, whichever way it was
started: forked from the zygote, or a new interpreter. Real processes: a pipeline script run
with its output to a pipe and without ``PYTHONUNBUFFERED`` (as from a scheduler or a CI job),
whose isolated step prints, then sends itself SIGTERM. And a step forked from the zygote sees
the environment of the process that launched it, set after the zygote started included."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import logging
import os
import signal
import sys

from wharf import pipeline, step


@step(enable_cache=False, runtime="isolated")
def printed_then_terminated() -> int:
    print("printed before SIGTERM")
    sys.stdout.write("written without a newline before SIGTERM")
    sys.stderr.write("written to stderr before SIGTERM\\n")
    logging.getLogger("user.step").warning("logged before SIGTERM")
    os.kill(os.getpid(), signal.SIGTERM)  # its default action: the process ends at once
    return 0


@pipeline
def terminated() -> None:
    printed_then_terminated()


if __name__ == "__main__":
    terminated()
"""

DEADLINE_SECONDS = 120


@pytest.mark.parametrize("started", ["forked", "new interpreter"])
def test_what_a_step_printed_before_sigterm_is_in_its_stored_log(
    started: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    workspace = Workspace.open(load_config())
    try:
        config = {"python": sys.executable} if started == "new interpreter" else {}
        make_stack(workspace, "procs", "local_process", orchestrator_config=config)
    finally:
        workspace.close()
    script = tmp_path / "terminated.py"
    script.write_text(SCRIPT)
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    environment["WHARF_ACTIVE_STACK"] = "procs"
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert ran.returncode != 0, ran.stdout  # the run failed: its step was killed

    with Client(load_config()) as client:
        (run,) = client.list_pipeline_runs().items
        (step,) = client.list_run_steps(run.id).items
        log = client.step_logs(step)
    assert step.status is ExecutionStatus.FAILED, ran.stdout
    assert "SIGTERM" in (step.status_reason or ""), step.status_reason
    for printed in (
        "printed before SIGTERM\n",
        "written without a newline before SIGTERM",
        "written to stderr before SIGTERM\n",
        "logged before SIGTERM",
    ):
        assert printed in log, log


LATE_SCRIPT = """
import os
from wharf import pipeline, step


@step(enable_cache=False)
def late_setting() -> str:
    return os.environ.get("LATE_SETTING", "<unset>")


@pipeline
def sees_the_environment() -> None:
    late_setting()


if __name__ == "__main__":
    sees_the_environment()  # the fork server starts with this environment
    os.environ["LATE_SETTING"] = "set after the first run"  # e.g. credentials, in a notebook
    sees_the_environment()
"""


def test_a_forked_step_sees_the_environment_of_its_launch_not_the_fork_servers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variable the pipeline's process sets after its first isolated step (AWS credentials
    set in a notebook) reaches the later steps forked from the zygote, as it reaches a new
    interpreter's: the fork server keeps the environment it started with."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK", "LATE_SETTING"):
        monkeypatch.delenv(var, raising=False)
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    script = tmp_path / "late.py"
    script.write_text(LATE_SCRIPT)
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**os.environ, "WHARF_ACTIVE_STACK": "procs"},
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    with Client(load_config()) as client:
        runs = sorted(client.list_pipeline_runs().items, key=lambda r: r.created)
        seen = [
            client.load_artifact(step.outputs["output"])
            for run in runs
            for step in client.list_run_steps(run.id).items
        ]
    assert seen == ["<unset>", "set after the first run"]
