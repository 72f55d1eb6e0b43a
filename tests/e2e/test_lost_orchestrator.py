"""A run whose orchestrating process is killed ends failed ("orchestrator lost"), with its
steps ended and their resource requests given back; ``wharf runs stop`` ends it at once.

Real processes: a pipeline script runs in its own process, holds a licence in the embedded
Resource Manager with a step that blocks until a file appears, and is killed with SIGKILL.
"""

from __future__ import annotations

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
from wharf.core.enums import ExecutionStatus, ResourceRequestStatus
from wharf.store.models import PipelineRunRecord

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import sys
import time
from pathlib import Path

from wharf import ResourceSettings, pipeline, step


@step(enable_cache=False, settings={"resources": ResourceSettings(resources={"license": 1})})
def hold(path: str, started: str) -> int:
    Path(started).write_text("started")
    while not Path(path).exists():
        time.sleep(0.05)
    return 1


@pipeline
def held() -> None:
    hold(path=sys.argv[1], started=sys.argv[2])


if __name__ == "__main__":
    held()
"""

DEADLINE_SECONDS = 120


@pytest.fixture
def killed_run(
    wharf_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[PipelineRunRecord]:
    """A run whose pipeline process was SIGKILLed while its step held a licence."""
    monkeypatch.setenv("WHARF_HEARTBEAT_INTERVAL", "0.2")
    with Client(load_config()) as client:
        client.ensure_resource_pool("licenses", {"license": 1})
    script = tmp_path / "held.py"
    script.write_text(SCRIPT)
    release, started = tmp_path / "release", tmp_path / "started"
    process = subprocess.Popen(
        [sys.executable, str(script), str(release), str(started)], cwd=tmp_path
    )
    try:
        wait_for(started.exists, "the step to start", DEADLINE_SECONDS)
        with Client(load_config()) as client:
            (run,) = client.list_pipeline_runs().items
            assert run.status is ExecutionStatus.RUNNING
            assert run.orchestrator_pid == process.pid
            assert run.heartbeat_deadline is not None
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
        yield run
    finally:
        release.write_text("go")
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_killed_orchestrator_fails_its_run_and_gives_back_its_resources(
    killed_run: PipelineRunRecord,
) -> None:
    with Client(load_config()) as client:

        def ended() -> PipelineRunRecord | None:
            run = client.get_pipeline_run(killed_run.id)
            return run if run.status.is_finished else None

        run = wait_for(ended, "the run to end", DEADLINE_SECONDS)
        assert run.status is ExecutionStatus.FAILED
        assert run.status_reason is not None
        assert run.status_reason.startswith("orchestrator lost (last seen ")
        assert run.heartbeat_deadline is None
        steps = client.list_run_steps(run.id).items
        assert [s.name for s in steps] == ["hold"]
        (step,) = steps
        assert step.status is ExecutionStatus.FAILED
        assert step.status_reason and "orchestrator lost" in step.status_reason
        assert step.resource_request_id is not None
        request = client.get_resource_request(step.resource_request_id)
        assert request.status in (ResourceRequestStatus.RELEASED, ResourceRequestStatus.CANCELLED)
        # who released it and why (it read "Released by the holder.", which nobody did)
        assert request.status_reason == (
            f"Released by Wharf, as step 'hold' ended failed: {step.status_reason.rstrip('.')}."
        )


def test_runs_stop_ends_a_run_whose_orchestrator_is_gone_at_once(
    killed_run: PipelineRunRecord,
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(killed_run.id), "--force"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"Run '{killed_run.name}' is failed: orchestrator lost (last seen" in done.stdout
    with Client(load_config()) as client:
        run = client.get_pipeline_run(killed_run.id)
        assert run.status is ExecutionStatus.FAILED
        (step,) = client.list_run_steps(run.id).items
        assert step.status.is_finished


def test_runs_list_shows_a_run_whose_orchestrator_is_gone_failed(
    killed_run: PipelineRunRecord,
) -> None:
    """The CLI's quick read-only path leaves such a run to the normal one, which sweeps it."""
    import json

    done = subprocess.run(
        [sys.executable, "-m", "wharf.cli.main", "runs", "list", "--output", "json"],
        capture_output=True,
        text=True,
        timeout=DEADLINE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (shown,) = json.loads(done.stdout)
    assert (shown["id"], shown["status"]) == (str(killed_run.id), "failed")
    assert shown["status_reason"].startswith("orchestrator lost (last seen ")
