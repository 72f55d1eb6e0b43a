"""A step's own process whose orchestrator is killed (SIGKILL) stops itself and stores its
log itself (``wharf.execution.entrypoint`` with ``log_capture.OwnLog``): what it printed up to
its end is in the artifact store as any step's (``wharf steps logs``), and its temporary log
file is gone. Real processes: a pipeline script with an isolated step, killed while the step
runs; waits are on conditions with deadlines."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from tests.waiting import wait_until
from wharf import Client
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False, runtime="isolated")
def wait_for_release(release: str, started: str) -> int:
    print("the step printed this before its orchestrator was killed")
    Path(started).write_text("started")
    while not Path(release).exists():
        time.sleep(0.05)
    return 1


@pipeline
def orphaned() -> None:
    wait_for_release(release=sys.argv[1], started=sys.argv[2])


if __name__ == "__main__":
    orphaned()
"""

DEADLINE_SECONDS = 120


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "1")  # 6 s to beat first, on a busy machine too
    workspace = Workspace.open(load_config())
    try:  # a stack whose orchestrator runs isolated steps in processes of their own
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    return home


def step_logs(run_id: str, step: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "steps", "logs", run_id, step],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )


def test_a_step_whose_orchestrator_is_killed_stores_its_log_and_leaves_no_temp_file(
    home: Path, tmp_path: Path
) -> None:
    # Where the pipeline's processes make their temporary files: short, as the fork server's
    # socket lives there too and a socket path is at most 107 bytes (pytest-xdist's are long).
    temp_dir = Path(tempfile.mkdtemp(prefix="wharf-orphan-"))
    script = tmp_path / "orphaned.py"
    script.write_text(SCRIPT)
    release, started = tmp_path / "release", tmp_path / "started"
    environment = {**os.environ, "TMPDIR": str(temp_dir)}
    output = tmp_path / "output.txt"
    with output.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, str(script), str(release), str(started)],
            cwd=tmp_path,
            env=environment,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        started_or_ended = lambda: started.exists() or process.poll() is not None  # noqa: E731
        assert wait_until(started_or_ended, DEADLINE_SECONDS) and started.exists(), (
            output.read_text()
        )
        with Client(load_config()) as client:
            (run,) = client.list_pipeline_runs().items
            (step,) = client.list_run_steps(run.id).items
        logs = list(temp_dir.glob(f"wharf-step-{step.id}-*.log"))
        assert len(logs) == 1, logs  # the step writes its output there while it runs
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=DEADLINE_SECONDS) == -signal.SIGKILL

        # The step's process stores its log, then deletes the file, as it ends.
        assert wait_until(lambda: not logs[0].exists(), DEADLINE_SECONDS), "temp log left"
        assert list(temp_dir.glob("wharf-step-*")) == []
    finally:
        release.write_text("go")
        if process.poll() is None:
            process.kill()
            process.wait()
        shutil.rmtree(temp_dir, ignore_errors=True)
    shown = step_logs(str(run.id), "wait_for_release")
    assert shown.returncode == 0, shown.stderr
    assert "the step printed this before its orchestrator was killed" in shown.stdout
    assert f"The orchestrating process (pid {process.pid}) is gone" in shown.stdout
