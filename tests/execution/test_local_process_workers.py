"""A step process's own workers (what it forked or spawned, e.g. a ``multiprocessing`` pool)
end with it: a cancel (a forced stop) signals the step's whole process group, and the cleanup
of an attempt whose process died (SIGKILL from outside, as the OOM killer does) kills what is
left of it. Real processes: a stand-in interpreter that starts a worker in the background and
waits; waits poll conditions with deadlines."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.execution.test_local_process_backend import interpreter, launch
from tests.store.conftest import World
from tests.waiting import wait_until
from wharf.artifacts.store import LocalArtifactStore
from wharf.execution.backends import Ended
from wharf.execution.local_process import LocalProcessBackend

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")

BOUND = 60.0


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (ended, not yet reaped by its new parent) is not alive
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return True


def with_worker(tmp_path: Path) -> tuple[LocalProcessBackend, Path]:
    """A backend whose step starts a worker (``sleep``) in the background, writes the worker's
    pid to a file, then waits for it."""
    pid_file = tmp_path / "worker.pid"
    body = f'sleep 300 &\necho $! > "{pid_file}.tmp" && mv "{pid_file}.tmp" "{pid_file}"\nwait'
    return LocalProcessBackend(interpreter(tmp_path, "pool", body)), pid_file


def worker_pid(pid_file: Path) -> int:
    assert wait_until(pid_file.exists, BOUND), "the step never started its worker"
    return int(pid_file.read_text())


@pytest.fixture
def leftovers() -> Iterator[list[int]]:
    """Pids to kill at the end whatever happened (a failed test leaves nothing running)."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def test_a_cancel_ends_the_workers_of_the_step_process(
    world: World, tmp_path: Path, leftovers: list[int]
) -> None:
    """Before, only the step's process was killed: its workers lived on, orphaned."""
    backend, pid_file = with_worker(tmp_path)
    handle = backend.submit(launch(world, LocalArtifactStore(tmp_path / "a")), None)
    worker = worker_pid(pid_file)
    leftovers.append(worker)
    backend.cancel(handle)
    outcome = backend.poll([handle], timeout=BOUND)[handle]
    assert outcome.ended is Ended.CANCELLED
    backend.cleanup(handle)
    assert wait_until(lambda: not alive(worker), BOUND), "the step's worker outlived it"


def test_a_graceful_cancel_terminates_the_workers_too(
    world: World, tmp_path: Path, leftovers: list[int]
) -> None:
    backend, pid_file = with_worker(tmp_path)
    handle = backend.submit(launch(world, LocalArtifactStore(tmp_path / "a")), None)
    worker = worker_pid(pid_file)
    leftovers.append(worker)
    backend.cancel(handle, grace_seconds=BOUND)  # SIGTERM to the group: both end at once
    assert wait_until(lambda: not alive(worker), BOUND), "the step's worker outlived it"
    assert backend.poll([handle], timeout=BOUND)[handle].ended is Ended.CANCELLED
    backend.cleanup(handle)


def test_the_workers_of_a_step_process_killed_from_outside_end_at_its_cleanup(
    world: World, tmp_path: Path, leftovers: list[int]
) -> None:
    """The OOM killer kills one process (the step's); its cleanup ends the rest."""
    backend, pid_file = with_worker(tmp_path)
    handle = backend.submit(launch(world, LocalArtifactStore(tmp_path / "a")), None)
    worker = worker_pid(pid_file)
    leftovers.append(worker)
    os.kill(handle.pid, signal.SIGKILL)
    outcome = backend.poll([handle], timeout=BOUND)[handle]
    assert (outcome.ended, outcome.detail) == (Ended.LOST, "was killed by SIGKILL")
    assert alive(worker)  # the kernel killed only the step's process
    backend.cleanup(handle)
    assert wait_until(lambda: not alive(worker), BOUND), "the step's worker outlived it"
