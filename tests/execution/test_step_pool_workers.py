"""An isolated step that runs a ``multiprocessing`` pool (fork start method) leaves no worker
behind when its run is force-stopped from another terminal (``wharf runs stop --force``), and
what its workers print is in the step's log. Real processes: a pipeline script on a
``local_process`` stack and the CLI; every wait polls a condition with a deadline."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from tests.waiting import wait_until
from wharf import Client
from wharf.config.global_config import load_config
from wharf.core.enums import ExecutionStatus
from wharf.sdk.workspace import Workspace

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork, /proc")

SCRIPT = """
import multiprocessing
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step


def work(i: int) -> int:
    print(f"worker {i} says hello", flush=True)
    Path(sys.argv[1], f"worker-{os.getpid()}").write_text(str(os.getpid()))
    time.sleep(600)  # stuck: only a kill ends it
    return i


@step(enable_cache=False, runtime="isolated")
def pooled() -> int:
    with multiprocessing.get_context("fork").Pool(2) as pool:
        return sum(pool.map(work, range(2), chunksize=1))


@pipeline(raise_on_failure=False)
def with_pool() -> None:
    pooled()


if __name__ == "__main__":
    with_pool()
"""

BOUND = 90.0


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.5")
    workspace = Workspace.open(load_config())
    try:
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    (tmp_path / "script.py").write_text(SCRIPT)
    return tmp_path


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


@pytest.fixture
def workers(home: Path) -> Iterator[Path]:
    """Where the workers write their pids; any still alive at the end is killed."""
    where = home / "workers"
    where.mkdir()
    yield where
    for pid_file in where.glob("worker-*"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )


def test_a_forced_stop_ends_the_pool_workers_of_an_isolated_step(home: Path, workers: Path) -> None:
    """Before, the step's process was killed alone: its two workers lived on, orphaned."""
    with (home / "output.txt").open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "script.py", str(workers)],
            cwd=home,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        started = lambda: len(list(workers.glob("worker-*"))) == 2  # noqa: E731
        assert wait_until(started, BOUND), (home / "output.txt").read_text()
        pids = [int(f.read_text()) for f in workers.glob("worker-*")]
        with Client(load_config()) as client:
            (run,) = client.list_pipeline_runs().items
        stopped = cli("runs", "stop", str(run.id), "--force")
        assert stopped.returncode == 0, stopped.stderr
        assert process.wait(timeout=BOUND) == 0
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert wait_until(lambda: not any(alive(pid) for pid in pids), BOUND), "orphaned workers"
    with Client(load_config()) as client:
        (step,) = client.list_run_steps(run.id).items
    assert step.status is ExecutionStatus.STOPPED
    logs = cli("steps", "logs", str(run.id), "pooled")
    assert "worker 0 says hello" in logs.stdout and "worker 1 says hello" in logs.stdout
