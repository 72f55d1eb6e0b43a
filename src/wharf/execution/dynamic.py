"""Dynamic pipelines: the pipeline function runs here and launches steps as it goes.

Owns :class:`DynamicRunner`; steps go through the same launcher as static ones, and each step's
upstream edges are the steps whose outputs it actually received and those its ``after=`` names (by
id, future or output), which it starts only once they ended; a submit (or map) returns its future at
once, its step queued by the thread that ended the last step it waits for (``dynamic_waits``); a
step whose ``after=`` names (or whose input takes the output of) a step that did not succeed
(failed, stopped, not started) never starts, whatever the execution mode, as in a static pipeline:
its call or future raises ``UpstreamNotSucceededError`` naming that step, which is the run's reason
if the function lets it through; a future of a step with no outputs is refused as an input at the
call (``after=`` orders steps). Invariants: invocation ids are unique within the run, given (with
the call's place in the call order) when the call is made; no step starts once the run is stopping;
the run ends only after every submitted step ended; once a step failed (unless the run continues on
failure) no submitted step still waiting for a thread starts; a body that raises (or exits:
``sys.exit``) ends the run failed, its traceback shown once (logged here, unless the caller raises
it again: :data:`CALLER_RAISES_BODY_ERROR`), except a refusal of the run's credential, which
propagates (the run loop stops the run: no write can succeed). A resumed run replays the function; a
call made differently, or one left out, fails the run (``launcher``); each call is checked when it
is made (the versions of inputs from steps still running once it is launched) against the call order
the earlier process recorded (``call_order``). A ``fail_fast`` run interrupts its running steps once
one fails, as a static one does (they end stopped; the failed step is the run's reason). A forced
stop (``forced``: a second Ctrl-C, or one asked elsewhere, raising ``ForcedStop`` in the function's
thread) ends the run even where a step's code or the function swallowed it: the runner raises it
again at the next step boundary (the step's end, the next call, a wait for a submitted step, the
function's end). A wait for a submitted step is a loop of short waits (``dynamic_futures.settle``):
a forced stop raises in a function run off the main thread promptly. Steps are called from the
function's own thread (``dynamic_threads``); a call's spec is made by ``dynamic_calls``.
A step's failure the function lets through (a call's, or a submitted step's ``result()``) is the
run's reason as ``dynamic_outcome.uncaught_failure`` words it: that step, said to be uncaught.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from wharf.config.spec import PipelineSpec, StepSpec
from wharf.core.enums import ExecutionMode, ExecutionStatus
from wharf.core.errors import (
    RunStoppedError,
    RunStoppingError,
    StepExecutionError,
    StepInterfaceError,
)
from wharf.execution.artifact_outages import through_artifact_outage
from wharf.execution.call_order import ReplayDivergedError
from wharf.execution.daemon_pool import DaemonThreadPool
from wharf.execution.dynamic_calls import SpecFactory, StepCalls
from wharf.execution.dynamic_futures import (
    MapResultsFuture,
    OutputArtifact,
    StepFuture,
    StepOutputs,
    settle,
)
from wharf.execution.dynamic_ids import StepIds
from wharf.execution.dynamic_outcome import (
    DynamicOutcome,
    StepFailedError,
    StepHaltedError,
    StepNotStartedError,
    StepStoppedByFailureError,
    uncaught_failure,
    what_the_body_did,
)
from wharf.execution.dynamic_threads import current_run, outside_run, run_context
from wharf.execution.dynamic_waits import CalledSteps, Waits, pass_on, when_ended
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.launcher import StepLauncher
from wharf.execution.outages import refused
from wharf.execution.run_stop import ForcedStop
from wharf.execution.services import RunServices
from wharf.execution.step_like import StepLike
from wharf.execution.step_region import StepRegion
from wharf.execution.stop_check import StopCheck
from wharf.store.models import ArtifactVersionRecord, PipelineRunRecord

DEFAULT_WORKERS = 10

logger = logging.getLogger(__name__)

CALLER_RAISES_BODY_ERROR = "wharf_caller_raises_body_error"
"""Set (True) on a pipeline function whose caller raises the body's exception again after the
run (chained to ``RunFailedError``): the runner then logs it in one line and leaves the
traceback to that exception, so that the traceback is shown once."""


def active_dynamic_run() -> DynamicRunner | None:
    """The dynamic run a step called in this thread belongs to; None outside any (a plain
    function call); :class:`StepInterfaceError` in a thread a running pipeline function may
    have started (``dynamic_threads``)."""
    run: DynamicRunner | None = current_run()
    return run


class DynamicRunner:
    """Runs a dynamic pipeline's function (:meth:`run`), launching steps as it calls them.

    Calling a step runs it and returns its outputs as ``OutputArtifact`` handles (loaded
    lazily); ``step.submit(...)`` returns a ``StepFuture``; ``step.map(...)`` submits one step
    per element and returns a ``MapResultsFuture`` (handles from ``dynamic_futures``). A
    step's first call is named after it, later ones ``name_2``, ``name_3``...; the steps of a
    ``map`` are named by index, ``name_0``, ``name_1``..., a later map of the same step
    ``name_2_0``...; an explicit ``id=`` already given out, or an id too long for its step run
    or output artifact names, is a :class:`StepInterfaceError` at the call (``dynamic_ids``).
    A value given to a step's parameter that does not fit its annotation, or another step's
    output whose stored value cannot, is refused at the call (``wharf.core.type_checks``; a map
    checks its values before any of its steps starts); so is an output of another run (a
    handle kept from it). A submitted step's output given to a submit is checked by its
    annotation at the call, by its stored value once that step ended: refused then, the step
    does not start and the run fails."""

    def __init__(
        self,
        spec: PipelineSpec,
        launcher: StepLauncher,
        services: RunServices,
        run: PipelineRunRecord,
        function: Callable[..., Any],
        spec_factory: SpecFactory,
        workers: int | None = None,
        forced: Callable[[], bool] | None = None,
    ) -> None:
        """``forced``: whether the run's stop was forced while its function runs (a second
        Ctrl-C, or a forced stop asked elsewhere: a ``ForcedStop`` raised in the function's
        thread, which user code may have swallowed)."""
        self._spec = spec
        self._launcher = launcher
        self._services = services
        self._run = run
        self._function = function
        # Daemon threads: a step given up on after a forced stop never keeps the process alive.
        self._pool = DaemonThreadPool(
            workers or spec.config.max_parallelism or DEFAULT_WORKERS, "wharf-dynamic"
        )
        self._lock = threading.Lock()
        self._stop = StopCheck(
            services.store,
            run.id,
            patience=liveness_timeout_for(services.heartbeat_interval),
            clock=services.clock,
            sleep=services.sleep,
        )
        self._forced = forced or (lambda: False)
        ids = StepIds(spec.name)
        self._called = CalledSteps(ids)
        self._calls = StepCalls(
            ids, self._called, spec_factory, self._check_call, self._raise_if_forced
        )
        """Makes the spec of each step call (``dynamic_calls``)."""
        self._thread: int | None = None
        """The thread the function runs in."""
        self._running: dict[str, InterruptibleRegion] = {}
        """The steps launched and not ended yet: a ``fail_fast`` failure interrupts them."""
        self._halted_by: dict[str, str] = {}
        """Step -> the failed step for which ``fail_fast`` interrupted it."""
        self._futures: list[Future[StepOutputs]] = []
        self._failed_step: str | None = None
        self._failures = 0
        """Steps failed (unless the run continues on failure): a submitted step that waited
        while one failed does not start; a step called or submitted later does."""
        self.outcome = DynamicOutcome()

    # ------------------------------------------------------------------ the run

    def run(self) -> DynamicOutcome:
        forced = False
        self._thread = threading.get_ident()
        try:
            with run_context(self, self._spec.name):
                self._run_function()
        except ForcedStop:  # a second Ctrl-C: the orchestrator ends the running steps itself
            forced = True
            raise
        except RunStoppedError:
            self.outcome.stop_requested = True
        except StepHaltedError:
            pass  # the step that failed is the run's reason
        except StepFailedError as exc:  # a called or waited-for step's failure, let through
            self.outcome.error = uncaught_failure(exc)  # logged where the step ran
        except StepExecutionError as exc:
            self.outcome.error = str(exc)  # the step's failure is logged where it ran
        except (Exception, SystemExit) as exc:  # sys.exit ends the run, not the process
            if refused(exc):  # the store refuses the run's credential: the run loop stops it
                raise
            what = what_the_body_did(exc)
            self.outcome.error = f"The pipeline function {what}"
            caller_shows = getattr(self._function, CALLER_RAISES_BODY_ERROR, False)
            logger.error(
                "The body of dynamic pipeline '%s' %s%s",
                self._spec.name,
                what,
                " (its traceback follows with the RunFailedError)" if caller_shows else "",
                exc_info=None if caller_shows else exc,
            )
        finally:
            try:
                if not forced:  # every submitted step ends first (its failure is recorded)
                    for future in list(self._futures):
                        settle(future, between=self._raise_if_forced)  # a forced stop raises
            except ForcedStop:
                forced = True
                raise
            finally:  # waits only once every submitted step ended (a short join); forced: a
                # stuck step's thread is left to it (a daemon), its queued steps never start
                self._pool.shutdown(wait=not forced, cancel_futures=forced)
                left_out = self._launcher.end_unreached()
        if not self.outcome.stop_requested:
            self.outcome.stop_requested = self._stop_requested()
        if left_out is not None and self.outcome.error is None:
            self.outcome.diverged = self.outcome.diverged or left_out
        return self.outcome

    def _run_function(self) -> None:
        """The pipeline function; a forced stop it (or a step's code) swallowed is raised
        again once it ended, instead of what it raised or returned."""
        try:
            self._function(**self._spec.parameters)
        except ForcedStop:
            raise
        except BaseException as exc:
            if self._forced():
                raise ForcedStop() from exc
            raise
        self._raise_if_forced()

    def _raise_if_forced(self) -> None:
        """At a step boundary in the function's thread: raise the run's forced stop again if
        it was asked (the function or a step's code swallowed the ``ForcedStop``)."""
        if self._forced() and threading.get_ident() == self._thread:
            raise ForcedStop()

    def _stop_requested(self) -> bool:
        return self._stop.requested()

    def load(self, version: ArtifactVersionRecord) -> Any:
        """``version``'s value, read through an outage of the store as a step's inputs are."""
        from wharf.artifacts import load_artifact

        store, v = self._services.artifact_store, version
        load = functools.partial(load_artifact, store, v.uri, v.data_type, v.materializer)
        return through_artifact_outage(self._services, load, f"load artifact {v.uri}")

    # ------------------------------------------------------------------ step calls

    def call(self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepOutputs:
        """Run a step now, in this thread (once the steps its ``after=`` names ended), and
        return its outputs."""
        self._raise_if_forced()
        spec, inputs, waits = self._calls.prepare(step, args, kwargs, defer=False)
        ended: Future[StepOutputs] = Future()
        self._called.called(spec.name, ended)  # it ends before the function calls another
        try:
            for future in waits.futures():
                settle(future, between=self._raise_if_forced)
            not_succeeded = waits.not_succeeded(spec.name)
            if not_succeeded is not None:
                raise not_succeeded
            outputs = self._execute(spec, inputs)
        except BaseException as exc:
            ended.set_exception(exc)
            raise
        ended.set_result(outputs)
        return outputs

    def submit(self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepFuture:
        self._raise_if_forced()
        return self._start(step, *self._calls.prepare(step, args, kwargs, defer=True))

    def _start(
        self,
        step: StepLike,
        spec: StepSpec,
        inputs: dict[str, ArtifactVersionRecord],
        waits: Waits,
    ) -> StepFuture:
        """Submit a step whose call was made: its future at once; it is queued for a thread of
        the pool once the steps it waits for ended."""
        ended: Future[StepOutputs] = Future()
        with self._lock:
            failures = self._failures
            self._futures.append(ended)
        self._called.called(spec.name, ended, step)
        when_ended(waits.futures(), lambda: self._queue(step, spec, inputs, waits, failures, ended))
        return StepFuture(spec.name, ended, between=self._raise_if_forced)

    def _queue(
        self,
        step: StepLike,
        spec: StepSpec,
        inputs: dict[str, ArtifactVersionRecord],
        waits: Waits,
        failures: int,
        ended: Future[StepOutputs],
    ) -> None:
        """Queue a submitted step for a thread of the pool, its waits over (in the thread that
        ended the last one); one that waited for a step given up on never starts."""
        try:
            if waits.cancelled():  # a forced stop: nothing waits for it any more
                ended.cancel()
                return
            queued = self._pool.submit(self._execute_queued, step, spec, inputs, waits, failures)
        except Exception as exc:  # no thread for it (the pool is shut down)
            ended.set_exception(exc)
            return
        queued.add_done_callback(lambda done: pass_on(done, ended))

    def map(
        self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> MapResultsFuture:
        self._raise_if_forced()
        after = kwargs.get("after")
        futures = []
        for step_id, values in self._calls.map_calls(step, args, kwargs):
            # bound already: an input named id or after is no call option
            prepared = self._calls.prepare_bound(step, step_id, values, after, defer=True)
            futures.append(self._start(step, *prepared))
        return MapResultsFuture(futures)

    # ------------------------------------------------------------------ internals

    def _check_call(
        self, spec: StepSpec, versions: dict[str, ArtifactVersionRecord] | None
    ) -> None:
        """Tell the launcher of the call ``spec`` (the versions of its inputs, None while some
        are of steps not ended), in the function's own thread: the calls' order is the
        function's. A replay that diverged is recorded as the run's outcome."""
        try:
            self._launcher.called(spec, versions)
        except ReplayDivergedError as exc:
            with self._lock:
                self.outcome.diverged = self.outcome.diverged or str(exc)
            raise

    def _execute_queued(
        self,
        step: StepLike,
        spec: StepSpec,
        inputs: dict[str, ArtifactVersionRecord],
        waits: Waits,
        failures: int,
    ) -> StepOutputs:
        """A submitted step, in a thread of the pool, once the steps it waited for ended: not
        started if a step failed while it waited (``failures``: how many had failed when it
        was submitted), nor if a step it waited for did not succeed."""
        not_succeeded = waits.not_succeeded(spec.name)
        if not_succeeded is not None:
            raise not_succeeded
        with self._lock:
            failed = self._failed_step if self._failures != failures else None
        if failed is not None:
            mode = self._spec.config.execution_mode.value
            raise StepNotStartedError(
                f"Step '{spec.name}' was not started: step '{failed}' failed while it waited "
                f"({mode}; execution_mode='{ExecutionMode.CONTINUE_ON_FAILURE.value}' starts it)."
            )
        try:  # the stored values of the outputs it waited for: a refusal fails the run, as
            # the function may never read this step's future
            inputs = {**inputs, **waits.versions(step, spec.name)}
        except StepInterfaceError as exc:
            with self._lock:
                self.outcome.error = self.outcome.error or str(exc)
            raise
        return self._execute(spec, inputs)

    def _execute(self, spec: StepSpec, inputs: dict[str, ArtifactVersionRecord]) -> StepOutputs:
        # The step's own code runs outside the run: a step it calls is a plain function call,
        # in this thread (a called step) as in a pool thread (a submitted one).
        region = StepRegion()
        with self._lock:
            self._running[spec.name] = region
        try:
            with outside_run():
                outcome = self._launcher.launch(spec, inputs, region)
        except ReplayDivergedError as exc:
            with self._lock:
                self.outcome.diverged = self.outcome.diverged or str(exc)
            raise
        except RunStoppingError:
            raise RunStoppedError(
                f"Run '{self._run.name}' is stopping; step '{spec.name}' was not started."
            ) from None
        finally:
            with self._lock:
                self._running.pop(spec.name, None)
        self._raise_if_forced()  # its code may have swallowed the forced stop
        with self._lock:
            self.outcome.steps[spec.name] = outcome
            self._calls.produced(outcome.outputs.values())
            halts = self._spec.config.execution_mode is not ExecutionMode.CONTINUE_ON_FAILURE
            if halts and outcome.status is ExecutionStatus.FAILED:
                self._failed_step = spec.name
                self._failures += 1
                if self._spec.config.execution_mode is ExecutionMode.FAIL_FAST:
                    self._fail_fast(spec.name)
            halted_by = self._halted_by.get(spec.name)
        if outcome.status in (ExecutionStatus.STOPPED, ExecutionStatus.CANCELLED):
            if halted_by is not None and outcome.status is ExecutionStatus.STOPPED:
                raise StepStoppedByFailureError(
                    f"Step '{spec.name}' was stopped: step '{halted_by}' failed "
                    f"({ExecutionMode.FAIL_FAST.value}; execution_mode="
                    f"'{ExecutionMode.STOP_ON_FAILURE.value}' lets it finish)."
                )
            raise RunStoppedError(f"Step '{spec.name}' was {outcome.status.value}.")
        if not outcome.succeeded:
            raise StepFailedError(spec.name, outcome.reason)
        handles = tuple(
            OutputArtifact(spec.name, name, outcome.outputs[name], self.load)
            for name in spec.outputs
        )
        if not handles:
            return None
        return handles[0] if len(handles) == 1 else handles

    def _fail_fast(self, failed: str) -> None:
        """Interrupt every other running step (under the lock): step ``failed`` failed in a
        ``fail_fast`` run. A step not in its code yet never starts it."""
        reason = f"Stopped because step '{failed}' failed (fail-fast)."
        for name, region in self._running.items():
            if name != failed and name not in self._halted_by and region.interrupt(reason):
                self._halted_by[name] = failed
                logger.info("Interrupting step '%s' (fail-fast).", name)


__all__ = ["DynamicOutcome", "DynamicRunner", "StepNotStartedError", "active_dynamic_run"]
