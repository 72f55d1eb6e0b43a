"""The orchestrating process's heartbeat: the run's liveness record, renewed while it runs.

Owns :func:`orchestrator_process` (host, pid, start token, liveness timeout, recorded with a
first beat in the write that starts the run), :func:`creating_process` (the same, recorded by a
pipeline call's creation of its run: a window covering :func:`creation_patience`),
:class:`RunHeartbeat` and :func:`end_unattended`. A stop recorded by another process of this
user on this machine wakes the heartbeat (``wharf.execution.run_wake``): it beats at once and so
hears of the stop within a moment, not at its next beat.
Invariants: ``on_stopping``, ``on_forced`` and ``on_refused`` are each told once, and a beat
refused the run's credential (``wharf.execution.outages.refused``) is the last; every beat and
every run's start sweeps the runs whose orchestrator is gone (``wharf.store.lost_runs``), so no
daemon is needed for that (unless the store refuses it to the run's credential: a workspace
server sweeps itself); a stopping run that no process beats for is ended by a forced stop
itself.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from uuid import UUID

from wharf.core.enums import ExecutionStatus
from wharf.core.errors import CredentialsRefusedError, IllegalTransitionError
from wharf.execution.heartbeat import FIRST_RETRY_FRACTION, liveness_timeout_for
from wharf.execution.outages import refused
from wharf.execution.run_stop import all_step_runs
from wharf.execution.run_wake import RunWake
from wharf.store.lost_runs import ReleaseEnded, sweep_quietly
from wharf.store.models import (
    OrchestratorProcess,
    PipelineRunRecord,
    RunUpdate,
    StepRunFilter,
    StepRunUpdate,
)
from wharf.store.ports import Store
from wharf.store.process_identity import own_start_token, this_host

logger = logging.getLogger(__name__)

UNFINISHED_STEP_STATUSES = (
    ExecutionStatus.RUNNING,
    ExecutionStatus.STOPPING,
    ExecutionStatus.CANCELLING,
)


def orchestrator_process(heartbeat_interval: float) -> OrchestratorProcess:
    """This process, as the orchestrating process of a run that beats every interval."""
    return OrchestratorProcess(
        host=this_host(),
        pid=os.getpid(),
        start=own_start_token(),
        liveness_timeout_seconds=liveness_timeout_for(heartbeat_interval),
    )


RUN_CREATION_PATIENCE_SECONDS = 120.0
"""How long a pipeline call goes on recording its run through an outage of the store (the
workspace server gone, a lost answer) before it fails: two minutes, or the run's liveness
timeout where that is longer (:func:`creation_patience`)."""


def creation_patience(heartbeat_interval: float) -> float:
    """Seconds a pipeline call retries its run's creation (see
    :data:`RUN_CREATION_PATIENCE_SECONDS`)."""
    return max(RUN_CREATION_PATIENCE_SECONDS, liveness_timeout_for(heartbeat_interval))


def creating_process(heartbeat_interval: float) -> OrchestratorProcess:
    """This process as the write that creates its run records it: its first liveness window
    is the creation's patience on top of the usual timeout, so no sweep ends the run while its
    creator still retries the creation (its answer lost in an outage after the commit) and
    before the creator's first beat, which brings the usual window. A creator that gave up
    (or died) leaves a run swept within that window."""
    process = orchestrator_process(heartbeat_interval)
    window = creation_patience(heartbeat_interval) + process.liveness_timeout_seconds
    return process.model_copy(update={"liveness_timeout_seconds": window})


_STOP_STATUSES = frozenset({ExecutionStatus.STOPPING, ExecutionStatus.STOPPED})

UNATTENDED_REASON = "Stopped by force: no orchestrating process records a heartbeat for this run."
_NOT_ENDED = (
    ExecutionStatus.INITIALIZING,
    ExecutionStatus.PROVISIONING,
    ExecutionStatus.QUEUED,
    *UNFINISHED_STEP_STATUSES,
)


def end_unattended(
    store: Store, run: PipelineRunRecord, *, release: ReleaseEnded | None = None
) -> PipelineRunRecord:
    """End stopped a stopping run that no orchestrating process beats for, and its unfinished
    steps (``release`` told of each, to release its request); the run as it ends. Nothing
    else would ever end such a run."""
    if run.orchestrator_host is not None or run.status is not ExecutionStatus.STOPPING:
        return run
    unfinished = all_step_runs(store, StepRunFilter(run_id=run.id, statuses=_NOT_ENDED))
    stopped = StepRunUpdate(status=ExecutionStatus.STOPPED, status_reason=UNATTENDED_REASON)
    for step in unfinished:
        try:
            ended = store.steps.update(step.id, stopped)
        except IllegalTransitionError:  # it ended meanwhile
            continue
        if release is not None:
            release(ended)
    update = RunUpdate(status=ExecutionStatus.STOPPED, status_reason=UNATTENDED_REASON)
    try:
        return store.runs.update(run.id, update)
    except IllegalTransitionError:
        return store.runs.get(run.id)


class RunHeartbeat:
    """Beats for one run from a daemon thread (``RunRepository.update_heartbeat``) every
    heartbeat interval, until :meth:`close` (called when the run's steps are done).

    A failed beat is retried sooner (:func:`retry_delay`: the liveness timeout allows four
    missed beats). When a beat learns that the run is stopping (``wharf runs stop`` from
    another process), it tells ``on_stopping`` (the run loop stops the run here as a Ctrl-C
    would); when it learns that the stop is forced, it tells ``on_forced`` (the run loop ends
    the attempts in flight through the backends that started them). When the store refuses
    the run's credential (revoked, or its permission withdrawn), it tells ``on_refused`` and
    beats no more: beating again cannot succeed. A wake (``run_wake.wake_run``: ``wharf runs
    stop`` on this machine, once it recorded the stop) makes it beat at once."""

    def __init__(
        self,
        store: Store,
        run_id: UUID,
        interval: float,
        *,
        release: ReleaseEnded | None = None,
        on_forced: Callable[[], object] | None = None,
        on_stopping: Callable[[], object] | None = None,
        on_refused: Callable[[CredentialsRefusedError], object] | None = None,
        sweeps: bool = True,
    ) -> None:
        """``sweeps``: False where the store's credential may not sweep (a workspace server's
        run token: the server sweeps itself, and would refuse it 403); ``release``: told of
        each step a sweep ended (releases its request); ``on_forced``: called once when a beat
        learns that the run's stop is forced; ``on_stopping``: called once when a beat learns
        that the run is stopping; ``on_refused``: called once, with the store's error, when a
        beat is refused the run's credential."""
        self._store = store
        self._on_refused = on_refused
        self.refusal: CredentialsRefusedError | None = None
        self._release = release
        self._on_forced = on_forced
        self._on_stopping = on_stopping
        self._stopping = False
        self._run_id = run_id
        self._interval = interval
        self._process = orchestrator_process(interval)
        self._stopped = threading.Event()
        self._wake = RunWake.listen(run_id)
        """What the loop waits on between beats: woken by :meth:`close` or another process."""
        self._forced = False
        self._sweeps = sweeps
        """False if told so, or once the store refused a sweep (a run token it missed)."""
        self._thread = threading.Thread(
            target=self._loop, name=f"wharf-run-heartbeat-{run_id}", daemon=True
        )

    @classmethod
    def start(
        cls,
        store: Store,
        run_id: UUID,
        interval: float,
        *,
        release: ReleaseEnded | None = None,
        on_forced: Callable[[], object] | None = None,
        on_stopping: Callable[[], object] | None = None,
        on_refused: Callable[[CredentialsRefusedError], object] | None = None,
        sweeps: bool = True,
    ) -> RunHeartbeat:
        """Sweep lost runs (so their leftover allocations are given back before this run asks
        for any), then beat every ``interval`` seconds."""
        heartbeat = cls(
            store,
            run_id,
            interval,
            release=release,
            on_forced=on_forced,
            on_stopping=on_stopping,
            on_refused=on_refused,
            sweeps=sweeps,
        )
        heartbeat._sweep()
        heartbeat._thread.start()
        return heartbeat

    def _sweep(self) -> None:
        """Sweep lost runs, unless the store refused it to this credential before."""
        if self._sweeps:
            self._sweeps = sweep_quietly(self._store, release=self._release)

    def beat_once(self) -> bool:
        """One beat (and sweep); False if the beat failed (logged, or told to ``on_refused``)."""
        if self.refusal is not None:
            return False
        try:
            response = self._store.runs.update_heartbeat(self._run_id, self._process)
        except Exception as exc:
            if refused(exc):
                self._refused(exc)
                return False
            logger.warning("Heartbeat of run %s failed: %s", self._run_id, exc)
            return False
        if response.status in _STOP_STATUSES and not self._stopping:
            self._stopping = True
            if self._on_stopping is not None:
                try:
                    self._on_stopping()
                except Exception as exc:
                    logger.warning("Could not stop run %s here: %s", self._run_id, exc)
        if response.stop_forced and not self._forced:
            self._forced = True
            if self._on_forced is not None:
                try:
                    self._on_forced()
                except Exception as exc:
                    logger.warning("Could not force the stop of run %s: %s", self._run_id, exc)
        self._sweep()
        return True

    def _refused(self, error: CredentialsRefusedError) -> None:
        self.refusal = error
        logger.debug("Heartbeat of run %s refused: %s", self._run_id, error)
        if self._on_refused is not None:
            try:
                self._on_refused(error)
            except Exception as exc:
                logger.warning("Could not stop run %s here: %s", self._run_id, exc)

    def _loop(self) -> None:
        failures = 0
        try:
            while self.refusal is None:
                self._wake.wait(retry_delay(self._interval, failures))  # or woken: beat now
                if self._stopped.is_set():
                    return
                failures = 0 if self.beat_once() else failures + 1
        finally:
            self._wake.close()  # beats no more: no wake to hear

    @property
    def wakeable(self) -> bool:
        """Whether another process can wake this heartbeat (``run_wake.wake_run``)."""
        return self._wake.listening

    def close(self) -> None:
        self._stopped.set()
        self._wake.poke()
        if self._thread.ident is None:  # never started: no loop closes the wake
            self._wake.close()
        elif self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()


def retry_delay(interval: float, failures: int) -> float:
    """The wait before the next beat after ``failures`` failed ones in a row: the interval,
    or sooner while failing (a quarter of it, then half, then the interval again), so a beat
    lands soon after the store is back."""
    if not failures:
        return interval
    delay: float = interval * FIRST_RETRY_FRACTION * 2 ** (failures - 1)
    return min(interval, delay)
