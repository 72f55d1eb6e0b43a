"""The embedded RM's commands end the workspace's runs whose process is gone before they answer,
as ``wharf runs`` commands do: after ``kill -9`` of a pipeline script, ``wharf pool show`` and
``wharf request list`` no longer show the allocation its step held (they did until some
``wharf runs`` command swept the run). A real script in a process group of its own, killed as
``kill -9`` does; ``wharf`` commands as real processes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.execution.stop_scripts import BOUND, script_started
from tests.server.test_cli_server import wharf

SCRIPT = """
import sys
import time
from pathlib import Path

from wharf import ResourceSettings, pipeline, step


@step(enable_cache=False, settings={"resources": ResourceSettings(cpu_count=1)})
def hold() -> None:
    Path(f"{sys.argv[1]}.started").touch()
    time.sleep(600)


@pipeline
def holding() -> None:
    hold()


if __name__ == "__main__":
    holding()
"""


def shown(home: Path, *args: str) -> object:
    done = wharf(home, *args, "-o", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_pool_show_and_request_list_end_a_killed_runs_allocation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    for name in [name for name in os.environ if name.startswith("WHARF_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("WHARF_HOME", str(home))
    with script_started(tmp_path, SCRIPT) as process:
        pool = shown(home, "pool", "show", "local")
        assert isinstance(pool, dict) and len(pool["allocations"]) == 1, pool
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=BOUND)
    after = wharf(home, "pool", "show", "local", "-o", "json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["allocations"] == [], after.stdout
    assert "Run 'holding-" in after.stderr and "ended failed" in after.stderr, after.stderr
    assert shown(home, "request", "list", "--status", "allocated") == []
    runs = wharf(home, "runs", "list")
    assert "failed" in runs.stdout, runs.stdout + runs.stderr
