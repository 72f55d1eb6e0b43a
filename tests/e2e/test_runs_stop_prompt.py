"""``wharf runs stop RUN`` (and ``--force``) from another terminal reaches the run's running steps
at once, not at the next heartbeat of the run's orchestrating process: real processes (a
pipeline script, the CLI), an embedded workspace or a workspace server.

The heartbeat interval is two minutes here: a stop heard only at a beat would end the run one to
two minutes later; heard at once (the CLI wakes the orchestrating process: ``run_wake``, which
makes its isolated steps beat now), it ends within seconds. The script's step blocks until a file
exists (it polls it); every wait polls a condition with a deadline.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.e2e.test_isolated import make_stack
from tests.server.conftest import World, live, world  # noqa: F401 (fixtures)
from tests.waiting import wait_for
from wharf.config.global_config import load_config
from wharf.core.enums import ComponentType, ExecutionStatus
from wharf.core.transitions import FORCE_STOPPED_ON_REQUEST, STOPPED_ON_REQUEST
from wharf.sdk.workspace import Workspace
from wharf.store.models import (
    ComponentCreate,
    PageRequest,
    PipelineRunRecord,
    RunFilter,
    StepRunFilter,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")

INTERVAL = 120.0
"""The heartbeat interval (s) of the script's run and steps."""
PROMPT = INTERVAL / 4
"""How soon (s) after the CLI returned the run must have ended: well under one interval, with
room for a loaded machine (about a second otherwise)."""
BOUND = 60.0  # seconds: a hang of the script's start or of the CLI fails the test

SCRIPT = """
import os
import sys
import time
from pathlib import Path

from wharf import pipeline, step


@step(enable_cache=False)
def block(go: str) -> int:
    Path(go + ".started").write_text(str(os.getpid()))
    try:
        while not Path(go).exists():
            time.sleep(0.02)
        return 1
    except BaseException:  # the stop's interrupt
        Path(go + ".interrupted").write_text("yes")
        raise


@pipeline
def blocking(go: str) -> None:
    block(go=go)


if __name__ == "__main__":
    blocking(go=sys.argv[1])
    print("the pipeline call returned", flush=True)
"""


@dataclass
class Place:
    """Where the script and the CLI run: their environment, and the workspace the test reads."""

    env: Mapping[str, str]
    workspace: Workspace


@pytest.fixture
def embedded(wharf_home: Path) -> Iterator[Place]:
    """An embedded workspace with a ``local_process`` stack (``procs``)."""
    env = {**os.environ, "WHARF_HEARTBEAT_INTERVAL": str(INTERVAL)}
    ws = Workspace.open(load_config(env))
    make_stack(ws, "procs", "local_process")
    yield Place(env, ws)
    ws.close()


@pytest.fixture
def served(world: World, tmp_path: Path) -> Iterator[Place]:  # noqa: F811 (fixture)
    """A workspace server; a member of its project A on a ``local_process`` stack (``procs``)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("WHARF_STORE_URL", "WHARF_ARTIFACT_ROOT", "WHARF_ACTIVE_STACK")
    }
    env.update(
        WHARF_HOME=str(tmp_path / "home"),
        WHARF_SERVER_URL=world.url,
        WHARF_API_KEY=str(world.credentials["member"]),
        WHARF_PROJECT="A",
        WHARF_HEARTBEAT_INTERVAL=str(INTERVAL),
    )
    ws = Workspace.open(load_config(env))
    stacks = ws.store.stacks
    made = {
        kind: stacks.create_component(
            ComponentCreate(name="procs", type=kind, flavor=flavor, configuration=config)
        ).id
        for kind, flavor, config in (
            (ComponentType.ORCHESTRATOR, "local_process", {}),
            (ComponentType.ARTIFACT_STORE, "local", {"path": str(ws.config.artifact_root)}),
        )
    }
    stacks.create_stack("procs", made)
    yield Place(env, ws)
    ws.close()


@pytest.fixture
def place(request: pytest.FixtureRequest) -> Place:
    place: Place = request.getfixturevalue(request.param)
    return place


@contextlib.contextmanager
def script_running(tmp_path: Path, env: Mapping[str, str], stack: str) -> Iterator[Path]:
    """The script running in its own session on ``stack`` until its step runs; yields the
    file the step waits for. The script and the step's process are killed on the way out."""
    (tmp_path / "script.py").write_text(SCRIPT)
    go = tmp_path / "go"
    started = Path(f"{go}.started")
    err = tmp_path / "err.txt"
    with err.open("w") as errors:
        process = subprocess.Popen(
            [sys.executable, "script.py", str(go)],
            cwd=tmp_path,
            env={**env, "WHARF_ACTIVE_STACK": stack},
            stdout=subprocess.DEVNULL,
            stderr=errors,
            start_new_session=True,
        )
    try:
        wait_for(lambda: started.exists() or process.poll() is not None, "the step", BOUND)
        assert started.exists(), err.read_text()
        yield go
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(started.read_text()), signal.SIGKILL)  # an isolated step's process


def the_run(ws: Workspace) -> PipelineRunRecord:
    (run,) = ws.store.runs.list(RunFilter(), PageRequest()).items
    return run


def ended(ws: Workspace) -> PipelineRunRecord | None:
    """The run once it ended, else None."""
    run = the_run(ws)
    return run if run.status.is_finished else None


def stop_from_another_terminal(env: Mapping[str, str], run: PipelineRunRecord, force: bool) -> None:
    """``wharf runs stop RUN [--force]`` in a process of its own; it must succeed."""
    command = [sys.executable, "-m", "wharf.cli.main", "runs", "stop", str(run.id)]
    done = subprocess.run(
        [*command, "--force"] if force else command,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("place", "stack", "force"),
    [
        ("embedded", "procs", False),
        ("embedded", "procs", True),
        ("embedded", "default", False),
        ("embedded", "default", True),
        ("served", "procs", False),
    ],
    indirect=["place"],
)
def test_runs_stop_from_another_terminal_reaches_running_steps_at_once(
    place: Place, tmp_path: Path, stack: str, force: bool
) -> None:
    """The run ends stopped within seconds of ``wharf runs stop``, not at a beat: an isolated
    step (``procs``: its own process) or an inline one (``default``) is interrupted (a graceful
    stop: its code sees it) or killed (``--force``: the CLI kills an isolated step's process;
    the orchestrating process gives up on an inline one), over an embedded workspace or a
    workspace server."""
    ws = place.workspace
    with script_running(tmp_path, place.env, stack) as go:
        stop_from_another_terminal(place.env, the_run(ws), force)
        asked = time.monotonic()
        run = wait_for(lambda: ended(ws), "its end", PROMPT)
        took = time.monotonic() - asked
        if not force:  # the step's own code saw the interrupt
            wait_for(Path(f"{go}.interrupted").exists, "the step's interrupt", BOUND)
    reason = FORCE_STOPPED_ON_REQUEST if force else STOPPED_ON_REQUEST
    assert (run.status, run.status_reason) == (ExecutionStatus.STOPPED, reason), took
    steps = ws.store.steps.list(StepRunFilter(run_id=run.id), PageRequest()).items
    assert [(s.name, s.status) for s in steps] == [("block", ExecutionStatus.STOPPED)]
