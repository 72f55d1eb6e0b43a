"""Waking a run's orchestrating process from another process (``wharf.execution.run_wake``):
real sockets, a real SQLite store, the wake sent from a process of its own."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.core.enums import ExecutionStatus as S
from wharf.execution.run_heartbeat import RunHeartbeat, orchestrator_process
from wharf.execution.run_wake import RunWake, remove_stale, socket_path, wake_run
from wharf.store.models import RunUpdate

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="Unix sockets")
HOUR = 3600.0
"""The heartbeat interval of these tests: no beat of its own comes while a test runs."""
PATIENCE = 60.0  # seconds a woken beat may take on a loaded machine


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This user's marker directory (``started_here``), private to the test: under a short
    base (a test's ``tmp_path`` can be too long for a socket's path)."""
    base = Path(tempfile.mkdtemp(prefix="wake-", dir="/tmp" if os.path.isdir("/tmp") else None))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    try:
        yield base / "wharf-steps"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def wake_from_another_process(run_id: uuid.UUID) -> bool:
    """``wake_run(run_id)`` in a process of its own (as ``wharf runs stop`` sends it)."""
    code = "import sys, uuid; from wharf.execution.run_wake import wake_run; "
    code += "sys.exit(0 if wake_run(uuid.UUID(sys.argv[1])) else 3)"
    command = [sys.executable, "-c", code, str(run_id)]
    done = subprocess.run(command, check=False, timeout=PATIENCE)
    assert done.returncode in (0, 3)
    return done.returncode == 0


def test_a_stop_recorded_elsewhere_is_heard_at_once_when_its_recorder_wakes_the_heartbeat(
    world: World, runtime: Path
) -> None:
    """At an hour's interval, the heartbeat beats once woken from another process, hears of
    the stop recorded before and tells it (``on_stopping``), long before its next beat."""
    store = world.store
    run = world.run(status=S.RUNNING, orchestrator=orchestrator_process(HOUR))
    stopping = threading.Event()
    heartbeat = RunHeartbeat.start(store, run.id, HOUR, on_stopping=stopping.set)
    try:
        assert heartbeat.wakeable
        assert stat.S_ISSOCK(os.lstat(runtime / f"{run.id}.wake").st_mode)
        before = store.runs.get(run.id).last_heartbeat
        assert wake_from_another_process(run.id)  # running: a beat, nothing to tell
        wait_for(lambda: store.runs.get(run.id).last_heartbeat != before, "a beat", PATIENCE)
        assert not stopping.is_set()
        store.runs.update(run.id, RunUpdate(status=S.STOPPING))
        assert wake_from_another_process(run.id)
        assert stopping.wait(PATIENCE), "the woken heartbeat did not hear of the stop"
    finally:
        heartbeat.close()
    assert not (runtime / f"{run.id}.wake").exists()  # closed: its socket file is removed
    assert not wake_from_another_process(run.id)


def test_a_wake_without_a_listener_does_nothing(runtime: Path) -> None:
    """No process listens (another machine's run), or one died and left its socket file:
    the wake says so and raises nothing."""
    run_id = uuid.uuid4()
    assert not wake_run(run_id)
    path = socket_path(run_id, make=True)
    assert path is not None
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(os.fspath(path))
    dead.close()  # as a killed process leaves it
    assert path.exists() and not wake_run(run_id)
    wake = RunWake.listen(run_id)  # the run's next process replaces it
    try:
        assert wake.listening and wake_run(run_id)
        assert wake.wait(PATIENCE)
    finally:
        wake.close()


def test_a_listener_removes_only_its_own_socket_file(runtime: Path) -> None:
    """A process that took the run over bound its own socket since: the first one's close
    leaves it, and wakes reach the new one."""
    run_id = uuid.uuid4()
    first = RunWake.listen(run_id)
    second = RunWake.listen(run_id)
    try:
        first.close()
        assert wake_run(run_id)
        assert second.wait(PATIENCE)
        assert not first.listening
    finally:
        second.close()
    assert socket_path(run_id) is not None and not wake_run(run_id)


def test_several_wakes_make_one_and_a_poke_wakes_from_this_process(runtime: Path) -> None:
    run_id = uuid.uuid4()
    wake = RunWake.listen(run_id)
    try:
        assert not wake.wait(0)
        for _ in range(3):
            assert wake_run(run_id)
        wake.poke()
        assert wake.wait(PATIENCE)
        assert not wake.wait(0)  # every pending wake was consumed by the one above
    finally:
        wake.close()
    wake.poke()  # closed: nothing, no error


def test_no_socket_where_the_directory_is_not_this_users_own_or_too_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory others may write is never listened in (nor sent to); one too long for a
    socket's path leaves only this process's pokes. The heartbeat then hears of stops at its
    beats, as before."""
    open_dir = tmp_path / "open"
    (open_dir / "wharf-steps").mkdir(parents=True)
    (open_dir / "wharf-steps").chmod(0o777)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(open_dir))
    run_id = uuid.uuid4()
    assert socket_path(run_id, make=True) is None
    long_dir = tmp_path / ("x" * 100)
    long_dir.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(long_dir))
    assert socket_path(run_id, make=True) is None
    wake = RunWake.listen(run_id)
    try:
        assert not wake.listening and not wake_run(run_id)
        wake.poke()
        assert wake.wait(PATIENCE)
    finally:
        wake.close()


def test_a_listener_removes_the_sockets_no_process_listens_on_any_more(runtime: Path) -> None:
    """Processes killed (or ended by ``os._exit``) leave their socket files: the next run's
    listener removes them, never a live listener's nor anything else."""
    dead_run, live_run = uuid.uuid4(), uuid.uuid4()
    dead_path = socket_path(dead_run, make=True)
    assert dead_path is not None
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    dead.bind(os.fspath(dead_path))
    dead.close()  # as a killed process leaves it
    other = runtime / "not-a-wake"
    other.write_text("a step's marker")
    live = RunWake.listen(live_run)
    try:
        fresh = RunWake.listen(uuid.uuid4())
        fresh.close()
        assert not dead_path.exists()
        assert other.exists() and wake_run(live_run)
        assert remove_stale(runtime) == []  # the live one is kept
    finally:
        live.close()
