"""Isolated steps start under a long TMPDIR (pytest-xdist's temporary paths are ~150 characters):
the fork server's socket, which ``multiprocessing`` puts in a directory under TMPDIR, would pass
the 107-byte AF_UNIX path limit there, so ``wharf.execution.subprocesses`` gives
``multiprocessing`` a short directory of its own; the step's code still sees the user's TMPDIR.

Real processes: a pipeline script run in a new interpreter (the fork server and
``multiprocessing``'s temporary directory are made once per process, so the test's own process
cannot show a first start), with one isolated step on a ``local_process`` stack."""

from __future__ import annotations

import json
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

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="AF_UNIX fork server")

SCRIPT = """
import json
import os
import sys
import tempfile

from wharf import pipeline, step


@step(enable_cache=False, runtime="isolated")
def where_temp_files_go(seen: str) -> int:
    with open(seen, "w") as out:
        json.dump({"TMPDIR": os.environ.get("TMPDIR"), "gettempdir": tempfile.gettempdir()}, out)
    return 1


@pipeline
def long_tmpdir() -> None:
    where_temp_files_go(seen=sys.argv[1])


if __name__ == "__main__":
    long_tmpdir()
"""

TMPDIR_LENGTH = 150
DEADLINE_SECONDS = 120


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("WHARF_HOME", str(home))
    for var in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK"):
        monkeypatch.delenv(var, raising=False)
    workspace = Workspace.open(load_config())
    try:  # a stack whose orchestrator runs isolated steps in processes of their own
        make_stack(workspace, "procs", "local_process")
    finally:
        workspace.close()
    monkeypatch.setenv("WHARF_ACTIVE_STACK", "procs")
    return home


def long_directory(base: Path, length: int) -> Path:
    """A new directory under ``base`` whose path is ``length`` characters long."""
    directory = base
    while len(str(directory)) < length:
        room = length - len(str(directory)) - 1
        directory = directory / ("t" * min(room, 40) if room > 1 else "tt")
    directory.mkdir(parents=True)
    return directory


def test_an_isolated_step_starts_under_a_long_tmpdir_and_sees_it(
    home: Path, tmp_path: Path
) -> None:
    temp_dir = long_directory(tmp_path, TMPDIR_LENGTH)
    assert len(str(temp_dir)) >= TMPDIR_LENGTH
    script, seen = tmp_path / "long_tmpdir.py", tmp_path / "seen.json"
    script.write_text(SCRIPT)
    ran = subprocess.run(
        [sys.executable, str(script), str(seen)],
        cwd=tmp_path,
        env={**os.environ, "TMPDIR": str(temp_dir)},
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    with Client(load_config()) as client:
        (run,) = client.list_pipeline_runs().items
        (step,) = client.list_run_steps(run.id).items
    assert "AF_UNIX path too long" not in (step.status_reason or ""), step.status_reason
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert step.status is ExecutionStatus.COMPLETED, step.status_reason
    # The step's own code sees the user's TMPDIR, not the short one multiprocessing got.
    assert json.loads(seen.read_text()) == {"TMPDIR": str(temp_dir), "gettempdir": str(temp_dir)}
    # Nothing of multiprocessing's is left behind under the user's TMPDIR.
    assert list(temp_dir.glob("pymp-*")) == []
