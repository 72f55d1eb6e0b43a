"""Stopping a run from the process that orchestrates it: gracefully, or by force.

Owns :class:`RunStopper` (the run's attempts in flight, registered by :class:`TrackedInline`
and :class:`TrackedBackend`), and :func:`stop_recorded_steps` for a forced stop from another
process. A graceful stop means the same whoever asks (``wharf runs stop``,
``Client.stop_run``, Ctrl-C or SIGTERM): no new step starts, running steps are interrupted at
their next safe point and end stopped (except isolated steps whose backend lets them finish:
``wharf.execution.heartbeat.FINISH_ON_RUN_STOP_ENV``), and the run ends stopped. A forced stop
also ends isolated attempts at once, through the backend that started each one; one asked
from another process also stops the orchestrating thread's wait for inline attempts in flight
(:meth:`RunStopper.forced_elsewhere`), as a second Ctrl-C does, and records them stopped.

A run orchestrated off the main thread (a pipeline called from a thread of the user's program):
no signal can wake that thread from a blocking call, so the ``ForcedStop`` sent to it is raised
only once it runs Python code again. The run loop's own waits return to Python code often
(``interrupt.UNWOKEN_WAIT_SECONDS``): a static pipeline's call ends within a fraction of a
second; so do a dynamic pipeline's waits for its futures (``dynamic_futures.settle``). Where the
thread stays blocked (in a system call of its own, or its code swallowing the ``ForcedStop`` and
not waiting again), the run is ended without it :data:`FORCED_WAKE_SECONDS` later: its steps and
the run are recorded stopped and its summary line shown, as the thread would
(``RunStopper.orchestrating(unwoken=...)``). The limit: the pipeline call itself returns only
when that thread next runs Python code (Python cannot interrupt a thread other than the main one
inside a blocking call), and the stuck step's code goes on in its thread.

A refused credential (``RunStopper.refuse``) stops the run as a forced stop would, without
writing anything: the store refuses every write.

Invariants: once stopping, always stopping (both stops are idempotent); a finished run never
has a step left running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar
from uuid import UUID

from wharf.config.spec import StepSpec
from wharf.core.enums import ExecutionStatus
from wharf.core.errors import CredentialsRefusedError, IllegalTransitionError
from wharf.core.paging import MAX_PAGE_INDEX, MAX_PAGE_SIZE
from wharf.core.transitions import FORCE_STOPPED_ON_REQUEST, STOPPED_ON_REQUEST
from wharf.execution import forced_exit
from wharf.execution.attempt_ends import FORCE_STOPPED_STEP
from wharf.execution.attempts import AttemptExecutor, AttemptResult
from wharf.execution.backends import (
    AttemptOutcome,
    HearsStopsAtOnce,
    StepBackend,
    StepLaunch,
    TellsWork,
    placement_of,
    startup_timeout_of,
)
from wharf.execution.interrupt import Interruptible, InterruptibleRegion
from wharf.execution.log_capture import store_log_of_ended_step
from wharf.store.lost_runs import ReleaseEnded
from wharf.store.models import (
    ArtifactVersionRecord,
    PageRequest,
    RunUpdate,
    StepRunFilter,
    StepRunRecord,
    StepRunUpdate,
)
from wharf.store.ports import Store

if TYPE_CHECKING:  # the RM's models are only needed for type checking here
    from wharf.resource_manager.contract.models import ResourceRequestInfo

logger = logging.getLogger(__name__)

STOP_REASON = STOPPED_ON_REQUEST
FORCED_REASON = FORCE_STOPPED_STEP
FORCED_RUN_REASON = FORCE_STOPPED_ON_REQUEST
"""How a run whose stop was forced ends (``runs.finish`` says so too of a run whose stop
was recorded forced: ``wharf.core.transitions.run_end``)."""
UNFINISHED = (
    ExecutionStatus.QUEUED,
    ExecutionStatus.RUNNING,
    ExecutionStatus.STOPPING,
    ExecutionStatus.CANCELLING,
)
RECORD_WAIT_SECONDS = 10.0
FORCED_WAKE_SECONDS = 1.0
"""How long a forced stop asked elsewhere waits for the orchestrating thread to stop waiting
for the run's inline steps before the run is ended without it (:meth:`RunStopper.orchestrating`)."""
"""How long a forced stop waits for killed processes' waiters to record them."""


class ForcedStop(KeyboardInterrupt):
    """Raised in the orchestrating thread by a second Ctrl-C: stop waiting for running steps."""


@dataclass(frozen=True)
class ForcedOutcome:
    """How a run whose stop was forced ends; ``steps``: the step runs the force ended, as
    recorded (their progress is told by the run loop: no waiter is left to tell it)."""

    steps: tuple[StepRunRecord, ...] = ()

    def final_status(self) -> tuple[ExecutionStatus, str | None]:
        return ExecutionStatus.STOPPED, FORCED_RUN_REASON


class RunStopper:
    """Stops one run's attempts in flight in this process (:meth:`stop`, :meth:`force`).

    Another process (``wharf runs stop --force``) force-stops attempts with
    :func:`stop_recorded_steps`; this process learns of it from its run's heartbeat and ends
    its attempts itself (:meth:`end_attempts`)."""

    def __init__(self, store: Store, run_id: UUID, *, release: ReleaseEnded | None = None) -> None:
        """``release``: told of each step a forced stop ended (releases its request)."""
        self._store = store
        self._release = release
        self._run_id = run_id
        self._cond = threading.Condition()
        self._regions: set[Interruptible] = set()
        """Inline attempts in flight and steps waiting for resources."""
        self._inline: set[Interruptible] = set()
        """The inline attempts in flight (of :attr:`_regions`)."""
        self._waiting: InterruptibleRegion | None = None
        """The orchestrating thread's wait for the run's steps (:meth:`orchestrating`)."""
        self._unwoken: Callable[[], object] | None = None
        """What ends the run when a forced stop cannot wake that thread (:meth:`orchestrating`)."""
        self._attempts: dict[Hashable, StepBackend[Any]] = {}
        """The isolated attempts in flight: handle -> the backend that started it."""
        self._attempt_steps: dict[Hashable, UUID] = {}
        """The step run of each attempt in flight, where known."""
        self._ended_steps: set[UUID] = set()
        """The step runs whose attempts a forced stop ended."""
        self.stopping = False
        self.forced = False
        self._recorded_forced = False
        """:meth:`force` recorded the run's stop forced (once)."""
        self.refusal: CredentialsRefusedError | None = None
        """The first refusal of the run's credential (:meth:`refuse`), if any."""

    # ------------------------------------------------------------------ registration

    def add_region(self, region: Interruptible, *, inline: bool = False) -> None:
        """``inline``: the region of an inline attempt (not a wait for resources)."""
        with self._cond:
            self._regions.add(region)
            if inline:
                self._inline.add(region)
            stopping = self.stopping
        if stopping:
            region.interrupt(STOP_REASON)

    def remove_region(self, region: Interruptible) -> None:
        with self._cond:
            self._regions.discard(region)
            self._inline.discard(region)

    @contextmanager
    def orchestrating(self, unwoken: Callable[[], object] | None = None) -> Iterator[None]:
        """Wrap the orchestrating thread's run of the steps: a forced stop asked elsewhere
        (:meth:`forced_elsewhere`) raises :class:`ForcedStop` there, as a second Ctrl-C does,
        and wakes the thread like an interrupted step (``wharf.execution.interrupt``);
        :attr:`stopped_waiting` then tells that it did. ``unwoken``: called from another
        thread when the orchestrating thread has not stopped waiting
        :data:`FORCED_WAKE_SECONDS` after (blocked where nothing wakes it: it ends the run's
        steps and the run in the store, as that thread would)."""
        waiting = InterruptibleRegion(raises=ForcedStop)
        with self._cond:
            self._waiting = waiting  # kept once left (an interrupt then does nothing)
            self._unwoken = unwoken
        with waiting:
            yield

    @property
    def stopped_waiting(self) -> bool:
        """A forced stop asked elsewhere raised ``ForcedStop`` in the orchestrating thread."""
        with self._cond:
            waiting = self._waiting
        return waiting is not None and waiting.interrupted

    def add_attempt(
        self, backend: StepBackend[Any], handle: Hashable, step_run_id: UUID | None = None
    ) -> None:
        with self._cond:
            self._attempts[handle] = backend
            if step_run_id is not None:
                self._attempt_steps[handle] = step_run_id
            forced = self.forced
            if forced and step_run_id is not None:
                self._ended_steps.add(step_run_id)
        if forced:
            backend.cancel(handle)

    def remove_attempt(self, handle: Hashable) -> None:
        with self._cond:
            self._attempts.pop(handle, None)
            self._attempt_steps.pop(handle, None)
            self._cond.notify_all()

    # ------------------------------------------------------------------ stopping

    def stop(self, *, recorded: bool = False) -> None:
        """Stop gracefully: move the run to stopping (isolated steps learn it from their
        heartbeat, at once where their backend can make them beat now:
        ``backends.HearsStopsAtOnce``) and interrupt every inline attempt and every wait for
        resources at once, and any that registers afterwards. Safe to call from any thread (the
        run's heartbeat calls it when it learns of a stop recorded elsewhere). ``recorded``:
        the run is stopping in the store already (a stop asked elsewhere)."""
        with self._cond:
            first = not self.stopping
            self.stopping = True
            regions = list(self._regions)
            attempts = list(self._attempts.items()) if first else []
        if first and not recorded:
            # First: a wait the interrupts end (before a retry) goes on to a write of the next
            # attempt, which the store must refuse (``RunStoppingError``).
            self._record_stopping(RunUpdate(status=ExecutionStatus.STOPPING))
        for region in regions:
            region.interrupt(STOP_REASON)
        for handle, backend in attempts:  # once the stop is recorded: their beat reads it
            if isinstance(backend, HearsStopsAtOnce):
                try:
                    backend.beat_now(handle)
                except Exception as exc:  # it learns of the stop at its next beat instead
                    logger.debug("Could not make step attempt %s beat now: %s", handle, exc)

    def _record_stopping(self, update: RunUpdate, level: int = logging.WARNING) -> None:
        """Record the run stopping (``update``), as far as the store lets it (a failure is
        logged at ``level``)."""
        try:
            self._store.runs.update(self._run_id, update)
        except IllegalTransitionError:
            pass  # already stopping, or finished meanwhile
        except Exception as exc:  # the interrupts still stop this process's steps
            logger.log(level, "Could not record run %s as stopping: %s", self._run_id, exc)

    def refuse(self, error: CredentialsRefusedError) -> None:
        """The store refused the run's credential (``error``: revoked, or its permission
        withdrawn): nothing about the run can be written any more. Stop here without writing:
        interrupt every inline attempt and wait for resources, and end every isolated attempt
        through its backend (its own process is refused too). Safe from any thread; the first
        refusal is kept (:attr:`refusal`)."""
        with self._cond:
            if self.refusal is None:
                self.refusal = error
        self.stop(recorded=True)
        self.end_attempts()

    def force(self) -> ForcedOutcome:
        """Stop by force: stop, end every isolated attempt through the backend that started
        it, wait (bounded) for their waiters to record them, then record every step run still
        unfinished (e.g. inline code stuck in native code, or waiting to retry) as stopped.
        Call from the orchestrating thread once it no longer waits for the run's steps.
        Returns how the run ends, with the step runs it ended as recorded. The process's pools
        are ended without their locks at its exit (``wharf.execution.forced_exit``)."""
        forced_exit.arm()
        self.stop()
        with self._cond:
            first = not self._recorded_forced
            self._recorded_forced = True
        if first:  # the run's end says it was forced (``runs.finish`` reads it); if the
            # store refuses it, the run's end keeps the forced reason (``ForcedOutcome``)
            forced = RunUpdate(status=ExecutionStatus.STOPPING, stop_forced=True)
            self._record_stopping(forced, logging.DEBUG)
        self.end_attempts()
        deadline = time.monotonic() + RECORD_WAIT_SECONDS
        with self._cond:  # their waiters record them (status, logs) once the attempts ended
            while self._attempts and (left := deadline - time.monotonic()) > 0:
                self._cond.wait(left)
            killed = set(self._ended_steps)
        ended = self.end_unfinished_steps()
        recorded = {step.id for step in ended}
        for step_run_id in killed - recorded:  # recorded by their waiters
            try:
                step = self._store.steps.get(step_run_id)
            except Exception as exc:
                logger.warning("Could not read step run %s: %s", step_run_id, exc)
                continue
            if step.status.is_finished:
                ended.append(step)
        return ForcedOutcome(tuple(ended))

    def forced_elsewhere(self) -> None:
        """The run's stop was forced from another process (``wharf runs stop --force``, told
        by the run's heartbeat): end the isolated attempts through their backends and, while
        inline attempts are in flight (their code may not return for long, or ever: blocked in
        a thread, or ignoring its interrupt), stop the orchestrating thread's wait for them
        (:meth:`orchestrating`), so that it ends them (:meth:`force`) and the run at once."""
        self.end_attempts()
        with self._cond:
            waiting = self._waiting if self._inline else None
            unwoken = self._unwoken
        if waiting is not None and waiting.interrupt(FORCED_RUN_REASON) and unwoken is not None:
            threading.Thread(
                target=_end_if_unwoken,
                args=(waiting, unwoken, self._run_id),
                name=f"wharf-forced-stop-{self._run_id}",
                daemon=True,
            ).start()

    def end_attempts(self) -> None:
        """End every isolated attempt in flight, and any submitted from now on, through the
        backend that started it (a forced stop; their waiters record them)."""
        with self._cond:
            self.forced = True
            attempts = list(self._attempts.items())
            self._ended_steps.update(self._attempt_steps.values())
        for handle, backend in attempts:
            try:
                backend.cancel(handle)
            except Exception as exc:
                logger.warning("Could not end step attempt %s: %s", handle, exc)

    def end_unfinished_steps(
        self, status: ExecutionStatus = ExecutionStatus.STOPPED, reason: str = FORCED_REASON
    ) -> list[StepRunRecord]:
        """Record every unfinished step run of the run, and every retry that will not start
        (a step's latest attempt, retrying), as ``status`` with ``reason``; those it ended.
        Read again once they are ended, until no other is found: a step that ended meanwhile
        moves those after it to an earlier page of the listing, where it was already read."""
        ended = []
        seen: set[UUID] = set()
        update = StepRunUpdate(status=status, status_reason=reason)
        while steps := [s for s in unfinished_steps(self._store, self._run_id) if s.id not in seen]:
            for step in steps:
                seen.add(step.id)
                try:
                    stopped = self._store.steps.update(step.id, update)
                except IllegalTransitionError:
                    continue  # it ended meanwhile
                ended.append(stopped)
                store_log_of_ended_step(stopped.id)  # an inline step's code may never return
                if self._release is not None:
                    self._release(stopped)
        return ended


def _end_if_unwoken(waiting: InterruptibleRegion, unwoken: Callable[[], object], run: UUID) -> None:
    """Call ``unwoken`` unless the orchestrating thread stopped ``waiting`` for the run's steps
    within :data:`FORCED_WAKE_SECONDS` of a forced stop (a thread that no signal wakes, blocked
    in a wait or a system call: the ``ForcedStop`` sent to it is raised only once it runs
    Python code again)."""
    if waiting.wait_left(FORCED_WAKE_SECONDS):
        return
    logger.info("Run %s: the forced stop ends its steps without its orchestrating thread.", run)
    try:
        unwoken()
    except Exception as exc:
        logger.warning("Could not end run %s after its forced stop: %s", run, exc)


def all_step_runs(store: Store, query: StepRunFilter) -> list[StepRunRecord]:
    """Every step run ``query`` selects, oldest first, read page after page (a run may have
    more step runs than one page holds); each once, though the listing changes meanwhile."""
    found: dict[UUID, StepRunRecord] = {}
    index = 1
    while True:
        page = store.steps.list(query, PageRequest(index=index, size=MAX_PAGE_SIZE, sort="asc"))
        for step in page.items:
            found.setdefault(step.id, step)
        if index >= min(page.total_pages, MAX_PAGE_INDEX):
            return list(found.values())
        index += 1


def unfinished_steps(store: Store, run_id: UUID) -> list[StepRunRecord]:
    """The run's step runs in flight, and those retrying whose next attempt was not created
    (an earlier retrying attempt is final: the step went on with its next one)."""
    wanted = (*UNFINISHED, ExecutionStatus.RETRYING)
    steps = all_step_runs(store, StepRunFilter(run_id=run_id, statuses=wanted))
    retrying = [s for s in steps if s.status is ExecutionStatus.RETRYING]
    if not retrying:
        return steps
    names = tuple(sorted({s.name for s in retrying}))
    latest: dict[str, int] = {}
    for step in all_step_runs(store, StepRunFilter(run_id=run_id, names=names)):
        latest[step.name] = max(latest.get(step.name, 0), step.attempt)
    return [
        s
        for s in steps
        if s.status is not ExecutionStatus.RETRYING or s.attempt >= latest.get(s.name, 0)
    ]


def stop_recorded_steps(
    store: Store, run_id: UUID, backend_for: Callable[[StepRunRecord], StepBackend[Any] | None]
) -> list[StepRunRecord]:
    """Force-stop the attempts of the run's unfinished steps from another process than the one
    that started them: each through ``backend_for(step)``, the kind of backend that started it
    (None: it has none, e.g. an inline step), from what the store recorded of it (a backend
    stops only what it vouches for). The steps stopped."""
    steps = all_step_runs(store, StepRunFilter(run_id=run_id, statuses=UNFINISHED))
    stopped = []
    for step in steps:
        backend = backend_for(step)
        if backend is not None and backend.stop_recorded(step):
            stopped.append(step)
    return stopped


@dataclass
class TrackedInline:
    """An inline executor whose attempts a :class:`RunStopper` can interrupt."""

    inner: AttemptExecutor
    stopper: RunStopper

    def __call__(
        self,
        spec: StepSpec,
        record: StepRunRecord,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        allocation: ResourceRequestInfo | None = None,
    ) -> AttemptResult:
        self.stopper.add_region(region, inline=True)
        try:
            return self.inner(spec, record, inputs, region, allocation)
        finally:
            self.stopper.remove_region(region)


H = TypeVar("H", bound=Hashable)


@dataclass
class TrackedBackend(Generic[H]):
    """A step backend whose attempts a :class:`RunStopper` can end."""

    inner: StepBackend[H]
    stopper: RunStopper

    @property
    def startup_timeout_seconds(self) -> float | None:
        """The inner backend's (``wharf.execution.backends.SlowStarting``)."""
        return startup_timeout_of(self.inner)

    def startup_timeout_for(self, spec: StepSpec) -> float | None:
        """The inner backend's for ``spec`` (``wharf.execution.backends.SlowStartingPerStep``)."""
        return startup_timeout_of(self.inner, spec)

    def placement(self, spec: StepSpec, record: StepRunRecord) -> str | None:
        """The inner backend's (``wharf.execution.backends.DescribesPlacement``)."""
        return placement_of(self.inner, spec, record)

    def submit(self, attempt: StepLaunch, allocation: ResourceRequestInfo | None) -> H:
        handle = self.inner.submit(attempt, allocation)
        self.stopper.add_attempt(self.inner, handle, attempt.record.id)
        return handle

    def poll(self, handles: Sequence[H], timeout: float = 0.0) -> Mapping[H, AttemptOutcome]:
        return self.inner.poll(handles, timeout)

    def cancel(self, handle: H, grace_seconds: float = 0.0) -> None:
        self.inner.cancel(handle, grace_seconds)

    def cleanup(self, handle: H) -> None:
        try:
            self.inner.cleanup(handle)
        finally:
            self.stopper.remove_attempt(handle)

    def stop_recorded(self, step: StepRunRecord) -> bool:
        return self.inner.stop_recorded(step)

    def working(self, handle: H) -> bool:
        """The inner backend's (``wharf.execution.backends.TellsWork``); False if it cannot
        tell."""
        return isinstance(self.inner, TellsWork) and self.inner.working(handle)
