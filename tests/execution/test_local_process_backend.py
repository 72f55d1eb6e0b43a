"""The local-process step backend through its launch interface: real processes (stand-in
interpreters that exit or sleep), a real SQLite store for the step runs, a local artifact store
for the logs."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from pathlib import Path

import pytest

from tests.store.conftest import World
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepSpec
from wharf.core.errors import InputError
from wharf.execution import started_here
from wharf.execution.backends import Ended, StepLaunch
from wharf.execution.local_process import (
    CODE_TRAVELS,
    LocalProcessBackend,
    LocalProcessHandle,
    configured_flag,
)
from wharf.execution.log_capture import read_log
from wharf.store.models import StepRunRecord, StepRunUpdate
from wharf.store.process_identity import start_token, this_host

SPEC = StepSpec(name="s", source="x:s", code_hash="s")


def interpreter(tmp_path: Path, name: str, body: str) -> str:
    """A stand-in for the step's interpreter: a shell script run as ``python -m ... ID``."""
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def launch(world: World, logs: LocalArtifactStore) -> StepLaunch:
    record = world.step(logs_uri=logs.new_uri("p", "r") + ".log")
    return StepLaunch(record, SPEC, {}, logs)


def wait_all(
    backend: LocalProcessBackend, handles: list[LocalProcessHandle]
) -> dict[LocalProcessHandle, Ended]:
    ended: dict[LocalProcessHandle, Ended] = {}
    while len(ended) < len(handles):
        left = [h for h in handles if h not in ended]
        ended.update({h: o.ended for h, o in backend.poll(left, timeout=60).items()})
    return ended


def test_one_poll_answers_the_attempts_that_finished(world: World, tmp_path: Path) -> None:
    logs = LocalArtifactStore(tmp_path / "artifacts")
    ok = LocalProcessBackend(interpreter(tmp_path, "ok", 'echo "hello from $3"'))
    bad = LocalProcessBackend(interpreter(tmp_path, "bad", "exit 2"))
    slow = LocalProcessBackend(interpreter(tmp_path, "slow", "exec sleep 60"))
    first, second = launch(world, logs), launch(world, logs)
    done, failed = ok.submit(first, None), bad.submit(second, None)
    sleeping = slow.submit(launch(world, logs), None)
    assert slow.poll([sleeping]) == {}  # running: not answered
    assert wait_all(ok, [done]) == {done: Ended.SUCCEEDED}
    outcome = bad.poll([failed], timeout=60)[failed]
    assert (outcome.ended, outcome.detail) == (Ended.FAILED, "exited with code 2")
    slow.cancel(sleeping)
    cancelled = slow.poll([sleeping], timeout=60)[sleeping]
    assert (cancelled.ended, cancelled.detail) == (Ended.CANCELLED, "was killed by SIGKILL")
    for backend, handle in ((ok, done), (bad, failed), (slow, sleeping)):
        backend.cleanup(handle)
    assert first.record.logs_uri is not None
    assert read_log(logs, first.record.logs_uri) == f"hello from {first.record.id}\n"


def test_many_attempts_of_one_backend_are_polled_at_once(world: World, tmp_path: Path) -> None:
    logs = LocalArtifactStore(tmp_path / "artifacts")
    backend = LocalProcessBackend(interpreter(tmp_path, "ok", "exit 0"))
    handles = [backend.submit(launch(world, logs), None) for _ in range(5)]
    assert set(wait_all(backend, handles).values()) == {Ended.SUCCEEDED}
    for handle in handles:
        backend.cleanup(handle)


def test_a_process_killed_from_outside_is_lost(world: World, tmp_path: Path) -> None:
    logs = LocalArtifactStore(tmp_path / "artifacts")
    backend = LocalProcessBackend(interpreter(tmp_path, "slow", "exec sleep 60"))
    handle = backend.submit(launch(world, logs), None)
    os.kill(handle.pid, signal.SIGTERM)
    outcome = backend.poll([handle], timeout=60)[handle]
    assert (outcome.ended, outcome.detail) == (Ended.LOST, "was killed by SIGTERM")
    backend.cleanup(handle)


def test_stop_recorded_ends_only_the_process_the_record_names(world: World, tmp_path: Path) -> None:
    logs = LocalArtifactStore(tmp_path / "artifacts")
    starter = LocalProcessBackend(interpreter(tmp_path, "slow", "exec sleep 60"))
    attempt = launch(world, logs)
    handle = starter.submit(attempt, None)

    def recorded(host: str, token: str | None) -> StepRunRecord:
        update = StepRunUpdate(pid=handle.pid, pid_host=host, pid_start=token)
        return world.store.steps.update(attempt.record.id, update)

    token = start_token(handle.pid)
    elsewhere = LocalProcessBackend()  # e.g. in the process of `wharf runs stop --force`
    assert not elsewhere.stop_recorded(recorded("another-machine", token))
    assert not elsewhere.stop_recorded(recorded(this_host(), f"{token}0"))  # a reused pid
    assert starter.poll([handle]) == {}
    assert elsewhere.stop_recorded(recorded(this_host(), token))
    assert starter.poll([handle], timeout=60)[handle].ended is Ended.LOST
    starter.cleanup(handle)


def test_a_process_this_machine_did_not_start_is_never_signalled(
    world: World, tmp_path: Path
) -> None:
    """A record naming a live process exactly (host, pid, start token), as anyone able to
    write the step's record could: not started by a backend here, so not signalled."""
    decoy = subprocess.Popen(["sleep", "300"])
    try:
        token = start_token(decoy.pid)
        step = world.step()
        update = StepRunUpdate(pid=decoy.pid, pid_host=this_host(), pid_start=token)
        record = world.store.steps.update(step.id, update)
        assert not LocalProcessBackend().stop_recorded(record)
        assert decoy.poll() is None
    finally:
        decoy.kill()
        decoy.wait()


def test_a_started_process_is_marked_until_cleaned_up(world: World, tmp_path: Path) -> None:
    logs = LocalArtifactStore(tmp_path / "artifacts")
    starter = LocalProcessBackend(interpreter(tmp_path, "slow", "exec sleep 60"))
    attempt = launch(world, logs)
    handle = starter.submit(attempt, None)
    assert started_here.started(attempt.record.id) == (handle.pid, start_token(handle.pid))
    starter.cancel(handle)
    wait_all(starter, [handle])
    starter.cleanup(handle)
    assert started_here.started(attempt.record.id) is None  # its marker went with it


def test_a_travelling_step_starts_in_an_empty_directory_without_the_submitters_paths(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    logs = LocalArtifactStore(tmp_path / "artifacts")
    body = 'echo "cwd=$(pwd) entries=$(ls -A | wc -l) path=[$PYTHONPATH]"'
    backend = LocalProcessBackend(interpreter(tmp_path, "where", body), code_travels=True)
    attempt = launch(world, logs)
    attempt = StepLaunch(attempt.record, SPEC, {"PYTHONPATH": str(tmp_path)}, logs)
    handle = backend.submit(attempt, None)
    assert wait_all(backend, [handle]) == {handle: Ended.SUCCEEDED}
    backend.cleanup(handle)
    assert attempt.record.logs_uri is not None
    line = read_log(logs, attempt.record.logs_uri).strip()
    workdir = line.split()[0].removeprefix("cwd=")
    assert os.path.basename(workdir).startswith(f"wharf-step-{attempt.record.id}-")
    assert line.endswith("entries=0 path=[]")
    assert not os.path.exists(workdir)  # removed at cleanup


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("true", True), ("0", False), (None, False)],
)
def test_the_code_travels_option_is_a_yes_or_no(value: object, expected: bool) -> None:
    configuration = {} if value is None else {CODE_TRAVELS: value}
    assert configured_flag(configuration, CODE_TRAVELS) is expected


def test_a_code_travels_option_that_is_neither_is_refused() -> None:
    with pytest.raises(InputError, match="code_travels must be true or false, not 'often'"):
        configured_flag({CODE_TRAVELS: "often"}, CODE_TRAVELS)
