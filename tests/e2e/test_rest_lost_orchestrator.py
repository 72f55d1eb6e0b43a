"""Team mode: a run whose orchestrating process (a pipeline script talking to a workspace server)
is killed ends failed ("orchestrator lost") at once when a client of the same machine stops it
(the server ends it and its steps; a run of another machine ends at its heartbeat deadline)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_lost_orchestrator import DEADLINE_SECONDS
from tests.server.conftest import (  # noqa: F401 (fixtures)
    World,
    live,
    world,
)
from tests.waiting import wait_for
from wharf import Client
from wharf.config.global_config import WharfConfig, load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.sdk.workspace import Workspace
from wharf.store.models import ComponentCreate

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
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


@pytest.fixture
def member(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[WharfConfig]:
    """A member of project A on a ``local`` stack, over the workspace server."""
    server: World = request.getfixturevalue("world")
    for name in ("WHARF_STORE_URL", "WHARF_SERVER_URL", "WHARF_API_KEY", "WHARF_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    env = {
        "WHARF_HOME": str(tmp_path / "home"),
        "WHARF_SERVER_URL": server.url,
        "WHARF_API_KEY": str(server.credentials["member"]),
        "WHARF_PROJECT": "A",
        "WHARF_ACTIVE_STACK": "plain",
        "WHARF_HEARTBEAT_INTERVAL": "0.2",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = load_config()
    register_plain_stack(config, "local")
    yield config


def register_plain_stack(config: WharfConfig, orchestrator_flavor: str) -> None:
    """Register the stack ``plain`` (an orchestrator of ``orchestrator_flavor``, the local
    artifact store at ``config``'s artifact root) through ``config``'s store."""
    workspace = Workspace.open(config)
    try:
        stacks = workspace.store.stacks
        components = {
            ComponentType.ORCHESTRATOR: ComponentCreate(
                name="plain", type=ComponentType.ORCHESTRATOR, flavor=orchestrator_flavor
            ),
            ComponentType.ARTIFACT_STORE: ComponentCreate(
                name="plain",
                type=ComponentType.ARTIFACT_STORE,
                flavor="local",
                configuration={"path": str(config.artifact_root)},
            ),
        }
        stacks.create_stack(
            "plain", {t: stacks.create_component(c).id for t, c in components.items()}
        )
    finally:
        workspace.close()


def test_a_killed_orchestrator_in_team_mode(member: WharfConfig, tmp_path: Path) -> None:
    script = tmp_path / "held.py"
    script.write_text(SCRIPT)
    release, started = tmp_path / "release", tmp_path / "started"
    process = subprocess.Popen(
        [sys.executable, str(script), str(release), str(started)], cwd=tmp_path
    )
    try:
        wait_for(started.exists, "the step to start", DEADLINE_SECONDS)
        with Client(member) as client:
            (run,) = client.list_pipeline_runs().items
            assert run.orchestrator_pid == process.pid and run.heartbeat_deadline is not None
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=60) == -signal.SIGKILL
        with Client(member) as client:
            # ``wharf runs stop --force``: the run ends at once, never stopping forever.
            lost = client.stop_run(run.id, force=True)
            assert lost.status is ExecutionStatus.FAILED
            assert lost.status_reason and lost.status_reason.startswith("orchestrator lost")
            assert client.get_pipeline_run(run.id) == lost
            (step,) = client.list_run_steps(run.id).items
            assert step.status is ExecutionStatus.FAILED
    finally:
        release.write_text("go")
        if process.poll() is None:
            process.kill()
            process.wait()
