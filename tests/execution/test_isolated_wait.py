"""How the engine waits for an isolated attempt (``IsolatedExecutor``): a backend's startup
timeout holds off the liveness check until the attempt's first beat, and a step the store shows
finished gets a grace to exit before it is cancelled.

Real processes through the local-process backend (stand-in interpreters run as ``python -m
wharf.execution.entrypoint ID``), a real SQLite store; the engine's clock is a fake that runs
ahead of real time by an offset the tests move, so the lost-heartbeat sweep sees time pass."""

from __future__ import annotations

import stat
import sys
import threading
from datetime import datetime, timedelta
from pathlib import Path

from tests.store.conftest import World
from tests.waiting import wait_for
from wharf.artifacts.materializers.registry import default_registry
from wharf.artifacts.store import LocalArtifactStore
from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.execution.attempts import AttemptResult
from wharf.execution.backends import StepBackend, startup_timeout_of
from wharf.execution.heartbeat import DEFAULT_INTERVAL_SECONDS, liveness_timeout_for
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.isolated_attempts import IsolatedExecutor
from wharf.execution.local_process import STARTUP_SECONDS, LocalProcessBackend
from wharf.execution.services import RunServices, utc_now
from wharf.store.models import StepRunRecord

SPEC = StepSpec(name="s", source="x:s", code_hash="s")
INTERVAL = 0.2
STARTUP = 30.0
DEADLINE = 60.0


class AheadClock:
    """Real UTC time plus an offset the test moves; counts its reads (one per engine check)."""

    def __init__(self) -> None:
        self.offset = timedelta()
        self.reads = 0
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            self.reads += 1
            return utc_now() + self.offset

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.offset += timedelta(seconds=seconds)

    def read_count(self) -> int:
        with self._lock:
            return self.reads


class SlowStartingBackend(LocalProcessBackend):
    """The local-process backend declaring a startup timeout of its own, as a cluster's does."""

    startup_timeout_seconds: float | None = STARTUP


def interpreter(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def never_beats(tmp_path: Path) -> str:
    return interpreter(tmp_path, "silent", "#!/bin/sh\nexec sleep 60\n")


def records_then_lingers(tmp_path: Path, linger: float) -> str:
    """A step process that records its step completed, lingers ``linger`` s, then exits 0;
    a SIGTERM leaves a ``signalled`` marker, a normal end an ``exited`` one."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    return interpreter(
        tmp_path,
        "lingering",
        f"""#!{sys.executable}
import signal, sys, time
from pathlib import Path
from uuid import UUID
from wharf.core.enums import ExecutionStatus
from wharf.store.models import StepRunUpdate
from wharf.store.sql import SqlStore

here = Path({str(tmp_path)!r})
def on_term(signum, frame):
    (here / "signalled").write_text("SIGTERM")
    sys.exit(143)
signal.signal(signal.SIGTERM, on_term)
store = SqlStore.open({url!r})
store.steps.update(UUID(sys.argv[3]), StepRunUpdate(status=ExecutionStatus.COMPLETED))
store.close()
(here / "recorded").write_text("yes")
time.sleep({linger})
(here / "exited").write_text("yes")
""",
    )


def services_for(world: World, tmp_path: Path, clock: AheadClock) -> RunServices:
    return RunServices(
        store=world.store,
        artifact_store=LocalArtifactStore(tmp_path / "artifacts"),
        materializers=default_registry(),
        project_id=world.project.id,
        clock=clock,
        heartbeat_interval=INTERVAL,
    )


class Attempt:
    """One attempt run by ``executor`` in a thread of its own."""

    def __init__(self, executor: IsolatedExecutor, record: StepRunRecord) -> None:
        self.record = record
        self.result: AttemptResult | None = None
        self._thread = threading.Thread(
            target=self._run, args=(executor,), name="attempt", daemon=True
        )
        self._thread.start()

    def _run(self, executor: IsolatedExecutor) -> None:
        self.result = executor(SPEC, self.record, {}, InterruptibleRegion())

    def ended(self) -> AttemptResult:
        self._thread.join(DEADLINE)
        assert self.result is not None, "the attempt did not end"
        return self.result


def checks_after_now(clock: AheadClock) -> None:
    """Wait until the engine ran at least one full lost-heartbeat sweep at the current time."""
    seen = clock.read_count()
    wait_for(lambda: clock.read_count() >= seen + 2, "the engine's next checks", DEADLINE)


def status(world: World, record: StepRunRecord) -> ExecutionStatus:
    return world.store.steps.get(record.id).status


def lost_only_after_startup(
    world: World, tmp_path: Path, backend: StepBackend, startup: float
) -> None:
    """An attempt of ``backend`` that never beats is still running past the usual liveness
    timeout and is lost once its backend's startup timeout ``startup`` passed."""
    clock = AheadClock()
    assert startup_timeout_of(backend) == startup
    executor = IsolatedExecutor(
        services_for(world, tmp_path, clock), lambda spec: backend, finish_grace=0.1
    )
    attempt = Attempt(executor, world.step())
    wait_for(
        lambda: world.store.steps.get(attempt.record.id).last_heartbeat is not None,
        "the liveness clock to start at submit",
        DEADLINE,
    )
    clock.advance(liveness_timeout_for(INTERVAL) + 5)  # past the usual liveness timeout
    checks_after_now(clock)
    assert status(world, attempt.record) is ExecutionStatus.RUNNING
    clock.advance(startup)  # no first beat within the startup timeout: lost
    ended = attempt.ended().record
    assert ended.status is ExecutionStatus.FAILED
    assert (ended.status_reason or "").startswith("Heartbeat lost"), ended.status_reason


def test_an_attempt_without_a_beat_is_lost_only_after_its_backends_startup_timeout(
    world: World, tmp_path: Path
) -> None:
    lost_only_after_startup(world, tmp_path, SlowStartingBackend(never_beats(tmp_path)), STARTUP)


def test_a_local_process_slow_to_start_is_not_lost_at_a_short_interval(
    world: World, tmp_path: Path
) -> None:
    """At a 0.2 s interval the usual liveness timeout is 2 s, shorter than a step's process may
    take to start on a busy machine: the local-process backend allows its processes
    ``STARTUP_SECONDS`` to send their first beat, whatever the interval."""
    backend = LocalProcessBackend(never_beats(tmp_path))
    lost_only_after_startup(world, tmp_path, backend, STARTUP_SECONDS)


def test_at_the_default_interval_the_startup_allowance_changes_nothing() -> None:
    assert liveness_timeout_for(DEFAULT_INTERVAL_SECONDS) > STARTUP_SECONDS


def test_after_its_first_beat_an_attempt_has_the_usual_liveness_timeout(
    world: World, tmp_path: Path
) -> None:
    clock = AheadClock()
    backend = SlowStartingBackend(never_beats(tmp_path))
    executor = IsolatedExecutor(
        services_for(world, tmp_path, clock), lambda spec: backend, finish_grace=0.1
    )
    attempt = Attempt(executor, world.step())
    record = attempt.record
    wait_for(
        lambda: world.store.steps.get(record.id).last_heartbeat is not None,
        "the liveness clock to start at submit",
        DEADLINE,
    )
    # the step's first beat, as its process sends it
    world.store.steps.update_heartbeat(record.id, liveness_timeout_for(INTERVAL))
    clock.advance(liveness_timeout_for(INTERVAL) + 5)
    ended = attempt.ended().record
    assert ended.status is ExecutionStatus.FAILED
    assert (ended.status_reason or "").startswith("Heartbeat lost"), ended.status_reason


def test_a_finished_step_exiting_slowly_is_not_cancelled(world: World, tmp_path: Path) -> None:
    """The store shows the step completed for several checks while its process lingers:
    within the grace, the process ends on its own, never signalled."""
    clock = AheadClock()
    backend = LocalProcessBackend(records_then_lingers(tmp_path, linger=1.5))
    executor = IsolatedExecutor(
        services_for(world, tmp_path, clock), lambda spec: backend, finish_grace=30.0
    )
    attempt = Attempt(executor, world.step())
    ended = attempt.ended().record
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason
    assert (tmp_path / "exited").exists()
    assert not (tmp_path / "signalled").exists()


def test_a_finished_step_that_does_not_exit_is_cancelled_after_the_grace(
    world: World, tmp_path: Path
) -> None:
    clock = AheadClock()
    backend = LocalProcessBackend(records_then_lingers(tmp_path, linger=60))
    executor = IsolatedExecutor(
        services_for(world, tmp_path, clock), lambda spec: backend, finish_grace=0.5
    )
    attempt = Attempt(executor, world.step())
    ended = attempt.ended().record
    assert ended.status is ExecutionStatus.COMPLETED, ended.status_reason  # as it recorded
    assert not (tmp_path / "exited").exists()
