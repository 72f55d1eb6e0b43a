"""A forced stop (``wharf runs stop --force``, or a second Ctrl-C) of an inline step whose code
is blocked and never returns: the step ends stopped and what it printed before is stored as its
log (``wharf.execution.log_capture.StepLog``), not lost with its thread. Real processes; every
wait polls a condition with a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.waiting import wait_for
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, RunFilter

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

SCRIPT = """
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
def block(go: str) -> int:
    print("printed before the block", flush=True)
    print("and on stderr", file=sys.stderr, flush=True)
    Path(go + ".started").write_text(str(os.getpid()))
    while True:  # stubborn: ignores its interrupt, never returns
        try:
            while True:
                time.sleep(0.02)
        except BaseException:
            Path(go + ".interrupted").write_text("yes")


@pipeline
def blocking(go: str) -> None:
    block(go=go)


if __name__ == "__main__":
    try:
        blocking(go=sys.argv[1])
    except BaseException as exc:
        print(f"the pipeline call raised {type(exc).__name__}", flush=True)
    os._exit(0)  # the stubborn step's thread would keep the interpreter from exiting
"""

BOUND = 60.0  # seconds: a hang fails the test instead of blocking it


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def the_run(ws: Workspace) -> PipelineRunRecord | None:
    runs = ws.store.runs.list(RunFilter(), PageRequest()).items
    return runs[0] if runs else None


@pytest.mark.parametrize("how", ["runs stop --force", "second Ctrl-C"])
def test_a_blocked_inline_step_ended_by_force_keeps_what_it_printed(
    home: Workspace, tmp_path: Path, how: str
) -> None:
    (tmp_path / "script.py").write_text(SCRIPT)
    go = tmp_path / "go"
    with (tmp_path / "out.txt").open("w") as out, (tmp_path / "err.txt").open("w") as err:
        process = subprocess.Popen(
            [sys.executable, "script.py", str(go)],
            cwd=tmp_path,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    try:
        started = Path(f"{go}.started")
        wait_for(lambda: started.exists() or process.poll() is not None, "the step", BOUND)
        assert started.exists(), (tmp_path / "err.txt").read_text()
        run = the_run(home)
        assert run is not None
        if how == "second Ctrl-C":
            process.send_signal(signal.SIGINT)
            interrupted = Path(f"{go}.interrupted")
            wait_for(interrupted.exists, "the graceful interrupt", BOUND)
            process.send_signal(signal.SIGINT)
        else:
            stop = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(run.id)]
            done = subprocess.run(
                [*stop, "--force"], check=False, capture_output=True, text=True, timeout=BOUND
            )
            assert done.returncode == 0, done.stderr
        process.wait(timeout=BOUND)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    ended = the_run(home)
    assert ended is not None and ended.status is ExecutionStatus.STOPPED
    client = Client(home.config, home.store)
    step = client.get_run_step(ended.id, "block")
    assert step.status is ExecutionStatus.STOPPED, step
    logs = client.step_logs(step)
    assert "printed before the block" in logs and "and on stderr" in logs, logs
