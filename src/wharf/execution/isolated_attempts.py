"""Waiting for an isolated attempt of a step, run by its backend in a process of its own.

Owns :class:`IsolatedExecutor` (the executor the launcher gives isolated steps) and what it
needs while it waits: the vouching beat for a process that works but cannot beat itself
(:class:`_Vouch`) and the reasons of an attempt whose process ended without its result.
Invariants: an attempt's liveness clock starts before its submit; its end is recorded by the
step's own process (``wharf.execution.entrypoint``), or here, once, when that process ended
without recording it (failed, retrying, or stopped if its run is stopping); nothing waits
forever for an attempt to be reported ended (``finish_grace``, ``cancel_patience``); the store
checks made while attempts wait are the run's (``wharf.execution.run_checks``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from uuid import UUID

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import CredentialsRefusedError, IllegalTransitionError, WharfError
from wharf.execution import step_writes
from wharf.execution.allocation_waits import Stops
from wharf.execution.artifact_outages import step_logs_through_outage, waits_ended_by
from wharf.execution.attempt_ends import FORCE_STOPPED_STEP, attempts_left, describe_exception
from wharf.execution.attempts import AttemptResult
from wharf.execution.backends import (
    NOT_STARTED,
    AttemptOutcome,
    Ended,
    StepBackend,
    StepLaunch,
    TellsWork,
    placement_of,
    startup_timeout_of,
)
from wharf.execution.heartbeat import liveness_timeout_for, startup_allowance_granted
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.outages import retry_through_outage, transient
from wharf.execution.run_checks import RunChecks
from wharf.execution.services import RunServices
from wharf.store.models import ArtifactVersionRecord, StepRunRecord, StepRunUpdate

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

logger = logging.getLogger(__name__)

FINISH_GRACE_MIN = 3.0
"""The least time (s) a step the store shows finished has to end before it is cancelled: its
process is exiting (a pod is reported terminated a few seconds after its exit under load)."""
CANCEL_PATIENCE = 300.0
"""How long (s) a cancelled attempt has to be reported ended by its backend before the engine
counts it as ended (the Kubernetes backend ends one itself after its pods' grace + 30 s)."""


@dataclass
class IsolatedExecutor:
    """Runs the attempt through the step's backend (``wharf.execution.backends``) and records
    it if the attempt could not.

    An attempt's liveness clock starts at its submit, allowing it its backend's startup
    timeout until its own first beat. Once the store shows the step finished, its backend gets
    ``finish_grace`` to report the attempt ended before it is cancelled; a cancelled attempt
    never reported ended counts as ended after ``cancel_patience``. The orchestrator waits out
    a store outage shorter than the step's liveness timeout (:mod:`wharf.execution.outages`).
    The store checks made while attempts wait are made once per heartbeat interval for all of
    a run's waiting attempts (``wharf.execution.run_checks``), not once per attempt."""

    services: RunServices
    backend_for: Callable[[StepSpec], StepBackend[Any]]
    finish_grace: float | None = None
    """How long (s) the backend has to report an attempt ended once the store shows its step
    finished, before the attempt is cancelled; None: the liveness timeout of the heartbeat
    interval (``liveness_timeout_for``), at least :data:`FINISH_GRACE_MIN`."""
    cancel_patience: float = CANCEL_PATIENCE
    """How long (s) a cancelled attempt has to be reported ended before it counts as ended."""
    stops: Stops | None = None
    """The run's stopper: its stop ends the wait of an attempt's log copy for the store."""
    _checks: dict[UUID, RunChecks] = field(default_factory=dict, init=False, repr=False)
    """The store checks of each run that has attempts waiting (under ``_checks_lock``)."""
    _checks_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str | None:
        """Where the attempt of ``record`` runs, as its backend says (None: it does not say)."""
        return placement_of(self.backend_for(spec), spec, record)

    def __call__(
        self,
        spec: StepSpec,
        record: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None = None,
    ) -> AttemptResult:
        store = self.services.store
        backend = self.backend_for(spec)
        logs_wait = step_logs_through_outage(self.services, region)  # its log's copy
        launch = StepLaunch(
            record, spec, self.services.child_env, self.services.artifact_store, logs_wait
        )
        interval = self.services.heartbeat_interval
        first: float | None = None  # the liveness window from the submit (None: no heartbeat)
        if spec.config.enable_heartbeat:
            # Start the liveness clock before the submit: a process that hangs before its first
            # beat is then lost like any other, once its backend's startup timeout (if longer)
            # passed; the process's own first beat, always later than this one, brings it back
            # to the usual liveness timeout.
            first = liveness_timeout_for(interval)
            startup = startup_timeout_of(backend, spec)
            if startup is not None:
                first = max(first, startup)
            try:
                step_writes.heartbeat(self.services, record.id, first)
            except WharfError as exc:
                if not transient(exc):
                    raise
                logger.warning("Could not record the first heartbeat of %s: %s", record.name, exc)
        try:
            handle = backend.submit(launch, allocation)
        except Exception as exc:
            reason = f"The step process could not start: {describe_exception(exc)}"
            return AttemptResult(self._record_lost(spec, record, reason, reason), {})
        try:
            ended = self._wait(backend, handle, record, first)
        except CredentialsRefusedError:  # nothing about the attempt can be recorded: end it
            backend.cancel(handle)
            raise
        finally:
            with waits_ended_by(self.stops, region):  # its log's copy waits through an outage
                backend.cleanup(handle)
        final = retry_through_outage(
            lambda: store.steps.get(record.id),
            what=f"read how step run {record.name} ended",
            patience=liveness_timeout_for(interval),
            clock=self.services.clock,
            sleep=self.services.sleep,
        )
        if not (final.status.is_finished or final.status is ExecutionStatus.RETRYING):
            final = self._record_lost(spec, record, *_ended_without_result(ended))
        outputs = {}
        if final.status is ExecutionStatus.COMPLETED:
            outputs = self.services.versions.outputs_of(store, final)
        return AttemptResult(final, outputs)

    def _wait(
        self,
        backend: StepBackend[Any],
        handle: Hashable,
        record: StepRunRecord,
        first_window: float | None,
    ) -> AttemptOutcome:
        """Wait for the attempt; meanwhile fail steps of this run whose heartbeat was lost,
        and end this step's attempt if that happened to it (e.g. it hangs). Those store checks
        are the run's (:class:`~wharf.execution.run_checks.RunChecks`): one sweep per run per
        heartbeat interval serves all its waiting steps.

        A store that cannot be reached (a server or database restarting) is waited out: the
        step's own process keeps beating and records its result when the store is back. The
        first check after an outage only reads: the steps' heartbeats get one interval to
        arrive before anyone is judged lost.

        A step the store shows finished is cancelled only if its backend does not report the
        attempt ended within ``finish_grace``; a cancelled one counts as ended after
        ``cancel_patience`` at the latest.

        ``first_window``: the liveness window from the submit (None: no heartbeat); this
        process beats for a step whose process works but cannot beat (:class:`_Vouch`)."""
        checks = self._checks_for(record)
        vouch = None
        if first_window is not None and isinstance(backend, TellsWork):
            vouch = _Vouch(self.services, record, backend, handle, first_window)
        try:
            return self._wait_checked(backend, handle, record, checks, vouch)
        finally:
            self._done_checking(record, checks)

    def _wait_checked(
        self,
        backend: StepBackend[Any],
        handle: Hashable,
        record: StepRunRecord,
        checks: RunChecks,
        vouch: _Vouch | None = None,
    ) -> AttemptOutcome:
        interval = self.services.heartbeat_interval
        grace = self.finish_grace
        if grace is None:
            grace = max(liveness_timeout_for(interval), FINISH_GRACE_MIN)
        finished_at: float | None = None  # monotonic time the store first showed it finished
        cancelled_at: float | None = None
        outage = False
        timeout = interval
        while True:
            ended = backend.poll([handle], timeout).get(handle)
            if ended is not None:
                return ended
            timeout = interval
            if cancelled_at is not None:
                waited = time.monotonic() - cancelled_at
                if waited >= self.cancel_patience:
                    logger.warning(
                        "Step %s was cancelled %.0f s ago and its backend has not reported it "
                        "ended; counting it as ended.",
                        record.name,
                        waited,
                    )
                    return AttemptOutcome(
                        Ended.CANCELLED,
                        f"was cancelled and not reported ended within {waited:.0f} s",
                    )
                timeout = min(interval, self.cancel_patience - waited)
                continue
            if finished_at is not None:
                waited = time.monotonic() - finished_at
                if waited >= grace:
                    # the step ended in the store but its process did not exit: end it
                    backend.cancel(handle)
                    cancelled_at = time.monotonic()
                    timeout = min(interval, self.cancel_patience)
                else:
                    timeout = min(interval, grace - waited)
                continue
            try:
                if vouch is not None:
                    vouch.beat_if_working()
                finished = checks.finished(record)
            except WharfError as exc:
                if not transient(exc):
                    raise
                if not outage:
                    logger.warning(
                        "Could not check step %s (still waiting for it): %s", record.name, exc
                    )
                outage = True
                continue
            outage = False
            if finished:  # its process is likely exiting: the backend gets a grace to say so
                finished_at = time.monotonic()
                timeout = min(interval, grace)

    def _checks_for(self, record: StepRunRecord) -> RunChecks:
        """The checks of ``record``'s run, with ``record`` among its waiting steps."""
        with self._checks_lock:
            checks = self._checks.get(record.run_id)
            if checks is None:
                interval = self.services.heartbeat_interval
                checks = self._checks[record.run_id] = RunChecks(
                    self.services, record.run_id, interval
                )
            checks.add(record)
            return checks

    def _done_checking(self, record: StepRunRecord, checks: RunChecks) -> None:
        with self._checks_lock:
            checks.remove(record)
            if checks.idle and self._checks.get(record.run_id) is checks:
                del self._checks[record.run_id]

    def _record_lost(
        self, spec: StepSpec, record: StepRunRecord, failed: str, stopped: str
    ) -> StepRunRecord:
        """The process is gone without a result: stopped if its run is stopping, else failed,
        or retrying if the step has attempts left (a process killed, e.g. by the OOM killer,
        or that could not start, is retried like a step that raised). A run whose stop was
        forced killed it (its Job deleted, its pod sent SIGTERM): it says so, as the steps the
        forced stop ended itself do."""
        store = self.services.store
        run = store.runs.get(record.run_id)
        if run.status in (ExecutionStatus.STOPPING, ExecutionStatus.STOPPED):
            reason = FORCE_STOPPED_STEP if run.stop_forced else stopped
            update = StepRunUpdate(status=ExecutionStatus.STOPPED, status_reason=reason)
        else:
            retry = attempts_left(spec, record.attempt)
            status = ExecutionStatus.RETRYING if retry else ExecutionStatus.FAILED
            update = StepRunUpdate(status=status, status_reason=failed)
        try:
            return step_writes.update(self.services, record.id, update)
        except IllegalTransitionError:
            return store.steps.get(record.id)


class _Vouch:
    """Beats for an isolated attempt whose process used CPU time since the last look
    (``backends.TellsWork``; every second interval): its own heartbeat thread cannot run while
    its code holds the GIL in C (a long ``re`` match), yet it is healthy. A process stopped, or
    stuck without using the CPU, gets no beat: it is lost as before. No beat cuts a startup
    allowance short (``heartbeat.startup_allowance_granted``: until the step's first beat);
    none follows an answer that the step must stop, or ended: its process, or the checks, end
    it."""

    def __init__(
        self,
        services: RunServices,
        record: StepRunRecord,
        backend: TellsWork,
        handle: Hashable,
        first_window: float,
    ) -> None:
        self._services = services
        self._record = record
        self._backend = backend
        self._handle = handle
        interval = services.heartbeat_interval
        self._window = liveness_timeout_for(interval)
        self._starting = first_window > self._window + 1.0  # may be in its allowance: read
        self._last = time.monotonic()
        self._every = 2 * interval
        self._active = True
        backend.working(handle)  # the first look: what the process used so far

    def beat_if_working(self) -> None:
        """Beat for the step if a look is due and the process worked since the last one."""
        now = time.monotonic()
        if not self._active or now - self._last < self._every:
            return
        self._last = now
        if not self._backend.working(self._handle):
            return
        services, step_id = self._services, self._record.id
        if self._starting:
            interval = services.heartbeat_interval
            if startup_allowance_granted(services.store.steps.get(step_id), interval):
                return  # its own first beat has not come: the allowance stands
            self._starting = False
        if step_writes.heartbeat(services, step_id, self._window).step_should_stop:
            self._active = False


def _ended_without_result(ended: AttemptOutcome) -> tuple[str, str]:
    """The reasons (failed, stopped) of an attempt whose process ended without recording its
    result, as its backend saw it end ("The step process exited with code 7 before reporting
    its result.", "… was killed by SIGKILL …"; one that never started says only why). Not a lost
    heartbeat: the store's liveness check, which says "Heartbeat lost", did not end it."""
    what = ended.detail
    if not what.startswith(NOT_STARTED):
        what += " before reporting its result"
    return f"The step process {what}.", f"Stopped: the step process {what}."


__all__ = ["CANCEL_PATIENCE", "FINISH_GRACE_MIN", "IsolatedExecutor"]
