"""Running a static pipeline's steps in upstream order, in threads of this process.

Owns :class:`DagRunner` (one per run) and its schedule. Invariants:
- a step starts only after all its upstream steps succeeded (completed or cached), and at most
  ``max_parallelism`` steps run at once; a step that never starts gets no step run record;
- once the run is stopping, no new step starts: the store refuses the step run's creation
  (``RunStoppingError``) in the write that would start it; running steps are interrupted at
  their next safe point and end stopped, unless their backend lets them finish;
- a forced stop (``ForcedStop`` raised in the calling thread) does not wait for running steps;
- on a failure: FAIL_FAST starts nothing more and interrupts running steps (they end stopped);
  STOP_ON_FAILURE starts nothing more and lets running steps finish; CONTINUE_ON_FAILURE keeps
  starting every step that does not depend on a failed one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol
from uuid import UUID

from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.dag import Dag
from wharf.core.enums import ExecutionMode, ExecutionStatus
from wharf.core.errors import RunStoppingError
from wharf.execution.cache_decisions import ReadyStep, ReadySteps
from wharf.execution.interrupt import UNWOKEN_WAIT_SECONDS, InterruptibleRegion
from wharf.execution.launch_errors import launch_error_reason, log_launch_error
from wharf.execution.launcher import StepOutcome
from wharf.execution.lost_resources import lost_resources, reclaimed_resources, stopped_steps
from wharf.execution.outages import refused
from wharf.execution.run_stop import ForcedStop
from wharf.execution.step_outcome import failed_steps_reason
from wharf.execution.step_region import StepRegion
from wharf.execution.stop_check import StopCheck
from wharf.store.models import ArtifactVersionRecord
from wharf.store.ports import Store

logger = logging.getLogger(__name__)

DEFAULT_MAX_PARALLELISM = 8

LaunchFn = Callable[
    [StepSpec, Mapping[str, ArtifactVersionRecord], InterruptibleRegion], StepOutcome
]


class LooksAhead(Protocol):
    """What decides ready steps ahead of their slot (the launcher's cache decisions)."""

    def attach(self, ready: ReadySteps | None) -> None: ...


@dataclass
class DagOutcome:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    stop_requested: bool = False
    not_started: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.status is ExecutionStatus.FAILED]

    def final_status(self) -> tuple[ExecutionStatus, str | None]:
        failed = failed_steps_reason(self.steps)
        if failed is not None:
            return ExecutionStatus.FAILED, failed
        lost = lost_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if lost is not None and not self.stop_requested:
            return ExecutionStatus.FAILED, lost
        reclaimed = reclaimed_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if reclaimed is not None and not self.stop_requested:
            return ExecutionStatus.STOPPED, reclaimed
        if self.stop_requested:
            return ExecutionStatus.STOPPED, "Stopped on request."
        stopped = stopped_steps((n, o.status, o.reason) for n, o in self.steps.items())
        if stopped is not None:
            return ExecutionStatus.STOPPED, stopped
        if all(o.succeeded for o in self.steps.values()) and not self.not_started:
            return ExecutionStatus.COMPLETED, None
        return ExecutionStatus.FAILED, "Some steps did not complete."


class DagRunner:
    """Runs the steps of one run (:meth:`run`).

    The schedule (which steps may start) is updated under one lock by the thread that ends a
    step, and that thread goes on with one of the steps that became ready: a chain of steps
    runs on one thread; each other step that became ready gets a thread of its own, which ends
    with its branch (no thread is kept between runs). The calling thread only starts the
    first steps and waits for the last one.

    Looking ahead (``look_ahead``, the launcher's
    :class:`~wharf.execution.cache_decisions.CacheDecisions`): while the run lasts, ready steps
    that have no slot yet may be claimed and settled without one -- ended cached or handed
    back ready, at the front of the queue. A claimed step never starts; the runner waits for
    claimed steps as for running ones; nothing is claimed once the schedule is halted.
    """

    def __init__(
        self,
        spec: PipelineSpec,
        launch: LaunchFn,
        store: Store,
        run_id: UUID,
        stop_check: StopCheck | None = None,
        *,
        read_stop_at_end: bool = True,
        done: Mapping[str, StepOutcome] | None = None,
        in_flight: Collection[str] = (),
        look_ahead: LooksAhead | None = None,
    ) -> None:
        """``read_stop_at_end``: read the run's status once the steps are done, to report a
        stop that no step saw. A caller that ends the run with ``runs.finish`` may pass False:
        that write reads the status itself and ends a stopping run stopped. ``done`` and
        ``in_flight``: when resuming a run, the steps an earlier process finished (recorded
        as if they had just ended, in upstream order, execution mode applied; never launched)
        and those it left in flight (launched first, even when the schedule is halted or full,
        so that each is taken over and never left unwatched); ``look_ahead``: given the run's
        ready steps while the run lasts, to settle those cached before they get a slot."""
        self._look_ahead = look_ahead
        self._done = dict(done or {})
        self._in_flight = frozenset(in_flight)
        self._spec = spec
        self._read_stop_at_end = read_stop_at_end
        self._launch = launch
        self._stop = stop_check or StopCheck(store, run_id)
        self._dag = Dag({name: s.upstream for name, s in spec.steps.items()})
        mode = spec.config.execution_mode
        self._mode = mode
        self._parallelism = spec.config.max_parallelism or DEFAULT_MAX_PARALLELISM

    def _stop_requested(self) -> bool:
        return self._stop.requested()

    def run(self) -> DagOutcome:
        schedule = _Schedule(self._dag, self._spec.steps, self._parallelism)
        if self._done or self._in_flight:
            schedule.resume(self._done, self._in_flight, self._on_failure)

        def work(start: _Start) -> None:
            # A thread that ends a step goes on with one of the steps that became ready (the
            # others go to other threads): a chain of steps runs on one thread, without a
            # hand-over to the calling thread and back between its steps.
            current: _Start | None = start
            while current is not None:
                name = current[0]
                try:
                    result = self._outcome_of(*current)
                    if isinstance(result, BaseException):
                        raise result
                    starts = schedule.done(name, result, self._on_failure)
                except BaseException as exc:  # never leave the run waiting for this step
                    schedule.abort(name, exc)
                    return
                current = starts[0] if starts else None
                for other in starts[1:]:
                    hand_over(other)

        def hand_over(start: _Start) -> None:
            # A thread of its own for each step started beside another (a chain stays on one):
            # a daemon, which never cuts a step short (the runner waits for its running steps,
            # also when interrupted) but never keeps the process alive after a forced stop.
            name = f"wharf-step-{start[0]}"
            thread = threading.Thread(target=work, args=(start,), name=name, daemon=True)
            try:
                thread.start()
            except BaseException as exc:  # no thread for it (it was marked running)
                schedule.abort(start[0], exc)

        if self._look_ahead is not None:
            self._look_ahead.attach(_ReadyQueue(schedule, hand_over, self._on_failure))
        try:
            return self._run(schedule, hand_over)
        finally:
            if self._look_ahead is not None:
                self._look_ahead.attach(None)

    def _run(self, schedule: _Schedule, hand_over: Callable[[_Start], None]) -> DagOutcome:
        starts = schedule.take_ready()
        try:
            while starts:
                hand_over(starts[0])
                del starts[0]
            schedule.wait_until_idle()
        except BaseException as exc:  # e.g. KeyboardInterrupt: none start, running steps end
            for start in starts:  # taken to start, never handed to a thread
                schedule.abort(start[0], exc)
            schedule.halt()
            if not isinstance(exc, ForcedStop):  # forced: the orchestrator ends them itself
                schedule.wait_until_idle()
            raise
        if schedule.error is not None:
            raise schedule.error
        outcome = schedule.outcome
        outcome.not_started = [n for n in self._dag.order if n not in outcome.steps]
        if self._read_stop_at_end and not outcome.stop_requested:
            outcome.stop_requested = self._stop_requested()
        return outcome

    def _outcome_of(
        self, name: str, region: InterruptibleRegion, inputs: dict[str, ArtifactVersionRecord]
    ) -> StepOutcome | BaseException | None:
        """The step's outcome; None if it never started because its run is stopping; an
        exception that is not an ``Exception``, or a refusal of the run's credential (either
        ends the run), as the value."""
        try:
            return self._launch(self._spec.steps[name], inputs, region)
        except RunStoppingError:
            return None
        except Exception as exc:  # a bug or a store failure outside the user-code boundary
            if refused(exc):  # the store refuses the run's credential: the run loop stops it
                return exc
            reason = launch_error_reason(exc)
            log_launch_error(name, reason, exc)
            return StepOutcome(name, ExecutionStatus.FAILED, reason=reason)
        except BaseException as exc:
            return exc

    def _on_failure(self, name: str, running: Mapping[str, InterruptibleRegion]) -> bool:
        """Apply the execution mode; True if no new steps may start."""
        if self._mode is ExecutionMode.CONTINUE_ON_FAILURE:
            return False
        if self._mode is ExecutionMode.FAIL_FAST:
            for other, region in running.items():
                if region.interrupt(f"Stopped because step '{name}' failed (fail-fast)."):
                    logger.info("Interrupting step '%s' (fail-fast).", other)
        return True


_Start = tuple[str, InterruptibleRegion, dict[str, ArtifactVersionRecord]]
"""A step to start: its name, its interruptible region and its input versions."""


class _Schedule:
    """Which steps of one run may start, updated by the threads that end steps (under one
    lock), so that a thread that ends a step can start the next one itself."""

    def __init__(self, dag: Dag, specs: Mapping[str, StepSpec], parallelism: int) -> None:
        self._dag = dag
        self._specs = specs
        self._parallelism = parallelism
        self._cond = threading.Condition()
        self._waiting_on = {n: len(set(dag.upstream[n])) for n in dag.order}
        self._ready = deque(n for n in dag.order if self._waiting_on[n] == 0)
        self._blocked: set[str] = set()  # descendants of failed steps
        self._halted = False  # no new steps start (failure, stop or an error)
        self._running: dict[str, InterruptibleRegion] = {}
        self._taken_over: deque[str] = deque()  # in flight elsewhere: start whatever happens
        self._claimed: set[str] = set()  # ready steps being decided ahead of their slot
        self.outcome = DagOutcome()
        self.error: BaseException | None = None

    def resume(
        self,
        done: Mapping[str, StepOutcome],
        in_flight: Collection[str],
        on_failure: Callable[[str, Mapping[str, InterruptibleRegion]], bool],
    ) -> None:
        """Record the steps ``done`` by an earlier process of the run (in upstream order), and
        have those ``in_flight`` started first, whatever the schedule's state."""
        with self._cond:
            for name in self._dag.order:
                if name in done:
                    self._record(name, done[name], on_failure)
            self._taken_over = deque(
                n
                for n in self._dag.order
                if n in in_flight and self._waiting_on[n] == 0 and n not in self._blocked
            )
            taken = set(self._taken_over)
            self._ready = deque(n for n in self._ready if n not in done and n not in taken)

    def take_ready(self) -> list[_Start]:
        with self._cond:
            return self._take_ready()

    def _take_ready(self) -> list[_Start]:
        starts: list[_Start] = []
        while self._taken_over or (
            self._ready and not self._halted and len(self._running) < self._parallelism
        ):
            name = self._taken_over.popleft() if self._taken_over else self._ready.popleft()
            region = self._running[name] = StepRegion()
            starts.append((name, region, self._inputs_of(name)))
        return starts

    def _inputs_of(self, name: str) -> dict[str, ArtifactVersionRecord]:
        steps = self.outcome.steps
        return {k: steps[i.step].outputs[i.output] for k, i in self._specs[name].inputs.items()}

    def done(
        self,
        name: str,
        result: StepOutcome | None,
        on_failure: Callable[[str, Mapping[str, InterruptibleRegion]], bool],
    ) -> list[_Start]:
        """Record how step ``name`` ended (None: refused, the run is stopping); the steps that
        start now, marked running."""
        with self._cond:
            self._running.pop(name, None)
            self._record(name, result, on_failure)
            starts = self._take_ready()
            self._notify_if_idle()
            return starts

    def claim(self, limit: int, wanted: Callable[[StepSpec], bool]) -> list[ReadyStep]:
        """Up to ``limit`` ready steps (from the front) for which ``wanted`` holds, with their
        inputs; none starts until :meth:`settle` hands it back. None once halted."""
        with self._cond:
            if self._halted:
                return []
            taken: list[str] = []
            passed: list[str] = []
            while self._ready and len(taken) < limit:
                name = self._ready.popleft()
                (taken if wanted(self._specs[name]) else passed).append(name)
            self._ready.extendleft(reversed(passed))
            self._claimed.update(taken)
            return [(self._specs[n], self._inputs_of(n)) for n in taken]

    def settle(
        self,
        cached: Mapping[str, StepOutcome],
        released: Collection[str],
        on_failure: Callable[[str, Mapping[str, InterruptibleRegion]], bool],
    ) -> list[_Start]:
        """Claimed steps handed back: those ``cached`` ended so, those ``released`` are ready
        again (at the front); the steps that start now, marked running."""
        with self._cond:
            for name, outcome in cached.items():
                self._claimed.discard(name)
                self._record(name, outcome, on_failure)
            back = [n for n in released if n in self._claimed]
            self._claimed.difference_update(back)
            self._ready.extendleft(reversed(back))
            starts = self._take_ready()
            self._notify_if_idle()
            return starts

    def _notify_if_idle(self) -> None:
        if not self._running and not self._claimed:
            self._cond.notify_all()

    def _record(
        self,
        name: str,
        result: StepOutcome | None,
        on_failure: Callable[[str, Mapping[str, InterruptibleRegion]], bool],
    ) -> None:
        outcome, dag = self.outcome, self._dag
        if result is None:  # refused by the store: the run is stopping
            outcome.stop_requested = self._halted = True
            return
        outcome.steps[name] = result
        if result.succeeded:
            for d in dag.downstream[name]:
                self._waiting_on[d] -= 1
                if self._waiting_on[d] == 0 and d not in self._blocked:
                    self._ready.append(d)
            return
        self._blocked |= dag.descendants(name)
        if result.status is ExecutionStatus.FAILED:
            self._halted = on_failure(name, self._running) or self._halted

    def abort(self, name: str, error: BaseException) -> None:
        """Step ``name`` raised ``error`` (not an ``Exception``): start nothing more; the
        runner raises it once the running steps ended."""
        with self._cond:
            self._running.pop(name, None)
            self.error = self.error or error
            self._halted = True
            self._notify_if_idle()

    def halt(self) -> None:
        with self._cond:
            self._halted = True

    def wait_until_idle(self) -> None:
        """Return once no step runs; a ``ForcedStop`` sent to a calling thread that no signal
        wakes (a run orchestrated off the main thread) is raised within a short wait."""
        with self._cond:
            while self._running or self._claimed:
                self._cond.wait(UNWOKEN_WAIT_SECONDS)


class _ReadyQueue:
    """The schedule's ready steps as the launcher's look-ahead takes them
    (:class:`~wharf.execution.cache_decisions.ReadySteps`): the steps that start once some
    are settled go to threads of their own."""

    def __init__(
        self,
        schedule: _Schedule,
        hand_over: Callable[[_Start], None],
        on_failure: Callable[[str, Mapping[str, InterruptibleRegion]], bool],
    ) -> None:
        self._schedule = schedule
        self._hand_over = hand_over
        self._on_failure = on_failure

    def claim(self, limit: int, wanted: Callable[[StepSpec], bool]) -> list[ReadyStep]:
        return self._schedule.claim(limit, wanted)

    def settle(self, cached: Mapping[str, StepOutcome], released: Sequence[str]) -> None:
        for start in self._schedule.settle(cached, released, self._on_failure):
            self._hand_over(start)
