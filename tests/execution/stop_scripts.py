"""Shared set-up of the tests that stop a pipeline script running in a process of its own: a
fresh embedded workspace (``home``), the script started and waited for until its step runs
(:func:`script_started`), its run, and ``wharf runs stop --force`` from another process."""

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
from wharf.config.global_config import load_config
from wharf.sdk.workspace import Workspace
from wharf.store.models import PageRequest, PipelineRunRecord, RunFilter

BOUND = 60.0  # seconds: a hang fails the test instead of blocking it


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Workspace]:
    """The embedded workspace the scripts (started from this environment) record into."""
    monkeypatch.setenv("WHARF_HOME", str(tmp_path / "home"))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    ws = Workspace.open(load_config())
    yield ws
    ws.close()


def the_run(ws: Workspace) -> PipelineRunRecord | None:
    """The workspace's run (the newest), None before the script recorded it."""
    runs = ws.store.runs.list(RunFilter(), PageRequest()).items
    return runs[0] if runs else None


@contextlib.contextmanager
def script_started(tmp_path: Path, script: str, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``script`` written to ``tmp_path/script.py`` and run with the file ``tmp_path/go`` and
    ``args`` as its arguments, its output in ``out.txt`` and ``err.txt``; yields once its step
    made ``go.started``. Its process group is killed on the way out."""
    (tmp_path / "script.py").write_text(script)
    go = tmp_path / "go"
    errors = tmp_path / "err.txt"
    with (tmp_path / "out.txt").open("w") as out_file, errors.open("w") as err_file:
        process = subprocess.Popen(
            [sys.executable, "script.py", str(go), *args],
            cwd=tmp_path,
            stdout=out_file,
            stderr=err_file,
            start_new_session=True,
        )
    try:
        started = Path(f"{go}.started")
        wait_for(lambda: started.exists() or process.poll() is not None, "the step", BOUND)
        assert started.exists(), errors.read_text()
        yield process
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def force_stop(run: PipelineRunRecord) -> None:
    """``wharf runs stop RUN --force`` in a process of its own; it must succeed."""
    stop = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(run.id), "--force"]
    done = subprocess.run(stop, check=False, capture_output=True, text=True, timeout=BOUND)
    assert done.returncode == 0, done.stderr
