"""Dynamic pipelines: the pipeline function runs here and launches steps as it goes.

Owns :class:`DynamicRunner`; steps go through the same launcher as static ones, and each step's
upstream edges are the steps whose outputs it actually received. Invariants: invocation ids are
unique within the run; no step starts once the run is stopping; the run ends only after every
submitted step ended; once a step failed (unless the run continues on failure) no submitted step
still waiting for a thread starts; a body that raises (or exits: ``sys.exit``) ends the run
failed, its traceback shown once (logged here, unless the caller raises it again:
:data:`CALLER_RAISES_BODY_ERROR`), except a refusal of the run's credential, which propagates
(the run loop stops the run: no write can succeed). A resumed run replays the function; a call
made differently, or one left out, fails the run (``launcher``); each call is checked when it is
made, against the call order the earlier process recorded (``call_order``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from wharf.config.spec import InputSpec, PipelineSpec, StepSpec
from wharf.core.enums import ExecutionMode, ExecutionStatus
from wharf.core.errors import (
    RunStoppedError,
    RunStoppingError,
    StepExecutionError,
    StepInterfaceError,
)
from wharf.execution.attempt_ends import describe_exception
from wharf.execution.call_order import ReplayDivergedError
from wharf.execution.daemon_pool import DaemonThreadPool
from wharf.execution.dynamic_arguments import (
    artifact_of,
    as_list,
    as_sequence,
    check_artifact,
    is_mappable,
    is_upstream,
)
from wharf.execution.dynamic_futures import (
    MapResultsFuture,
    OutputArtifact,
    StepFuture,
    StepOutputs,
    Unmapped,
)
from wharf.execution.heartbeat import liveness_timeout_for
from wharf.execution.interrupt import InterruptibleRegion
from wharf.execution.launcher import StepLauncher, StepOutcome
from wharf.execution.lost_resources import lost_resources, reclaimed_resources
from wharf.execution.outages import refused
from wharf.execution.run_stop import ForcedStop
from wharf.execution.services import RunServices
from wharf.execution.step_like import StepLike
from wharf.execution.step_outcome import failed_steps_reason
from wharf.execution.stop_check import StopCheck
from wharf.store.models import ArtifactVersionRecord, PipelineRunRecord

DEFAULT_WORKERS = 10

logger = logging.getLogger(__name__)

CALLER_RAISES_BODY_ERROR = "wharf_caller_raises_body_error"
"""Set (True) on a pipeline function whose caller raises the body's exception again after the
run (chained to ``RunFailedError``): the runner then logs it in one line and leaves the
traceback to that exception, so that the traceback is shown once."""

SpecFactory = Callable[[StepLike, str, dict[str, InputSpec], dict[str, Any], list[str]], StepSpec]
"""(step, invocation id, inputs, parameters, upstream ids) -> the step's spec."""

_ACTIVE: ContextVar[DynamicRunner | None] = ContextVar("wharf_dynamic_run", default=None)


def active_dynamic_run() -> DynamicRunner | None:
    return _ACTIVE.get()


@dataclass
class DynamicOutcome:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    stop_requested: bool = False
    error: str | None = None
    diverged: str | None = None
    """Why a resumed run's replayed function did not make the earlier process's calls."""

    def final_status(self) -> tuple[ExecutionStatus, str | None]:
        if self.stop_requested:
            return ExecutionStatus.STOPPED, "Stopped on request."
        if self.diverged is not None:
            return ExecutionStatus.FAILED, self.diverged
        if self.error is not None:
            return ExecutionStatus.FAILED, self.error
        failed = failed_steps_reason(self.steps)
        if failed is not None:
            return ExecutionStatus.FAILED, failed
        lost = lost_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if lost is not None:
            return ExecutionStatus.FAILED, lost
        reclaimed = reclaimed_resources((n, o.status, o.reason) for n, o in self.steps.items())
        if reclaimed is not None:
            return ExecutionStatus.STOPPED, reclaimed
        if any(
            o.status in (ExecutionStatus.STOPPED, ExecutionStatus.CANCELLED)
            for o in self.steps.values()
        ):
            return ExecutionStatus.STOPPED, "Some steps were stopped."
        return ExecutionStatus.COMPLETED, None


class StepNotStartedError(StepExecutionError):
    """A submitted step still waiting for a thread of the run's pool when another step of the
    run failed, in a run whose execution mode starts no waiting steps then; the failed step is
    the run's reason, not this."""


def _what_the_body_did(exc: Exception | SystemExit) -> str:
    """How a pipeline function ended the run, as a phrase after "The pipeline function":
    "raised: ValueError: …", or for ``sys.exit`` "exited with code 3" (``sys.exit()``: code 0;
    ``sys.exit("bad config")``: "exited (sys.exit): bad config")."""
    if not isinstance(exc, SystemExit):
        return f"raised: {describe_exception(exc)}"
    if exc.code is None or isinstance(exc.code, int):
        return f"exited with code {exc.code or 0} (sys.exit)"
    return f"exited (sys.exit): {exc.code}"


class DynamicRunner:
    """Runs a dynamic pipeline's function (:meth:`run`), launching steps as it calls them.

    Calling a step runs it and returns its outputs as ``OutputArtifact`` handles (loaded
    lazily); ``step.submit(...)`` returns a ``StepFuture``; ``step.map(...)`` submits one step
    per element and returns a ``MapResultsFuture`` (handles from ``dynamic_futures``). A
    step's first call is named after it, later ones ``name_2``, ``name_3``...; the steps of a
    ``map`` are named by index, ``name_0``, ``name_1``..., a later map of the same step
    ``name_2_0``...; an explicit ``id=`` already given out is an :class:`InputError` at the
    call. A value given to a step's parameter that does not fit its annotation, or another
    step's output whose stored value cannot, is refused at the call (``wharf.core.type_checks``;
    a map checks its values before any of its steps starts); so is an output of another run (a
    handle kept from it)."""

    def __init__(
        self,
        spec: PipelineSpec,
        launcher: StepLauncher,
        services: RunServices,
        run: PipelineRunRecord,
        function: Callable[..., Any],
        spec_factory: SpecFactory,
        workers: int | None = None,
    ) -> None:
        self._spec = spec
        self._launcher = launcher
        self._services = services
        self._run = run
        self._function = function
        self._spec_factory = spec_factory
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
        self._ids: dict[str, int] = {}
        self._taken: set[str] = set()
        """Every invocation id given out in this run."""
        self._futures: list[Future[StepOutputs]] = []
        self._failed_step: str | None = None
        self._failures = 0
        """Steps failed (unless the run continues on failure): a submitted step that waited
        while one failed does not start; a step called or submitted later does."""
        self._produced: set[Any] = set()
        """The ids of the artifact versions this run's steps output (an input takes one)."""
        self.outcome = DynamicOutcome()

    # ------------------------------------------------------------------ the run

    def run(self) -> DynamicOutcome:
        token = _ACTIVE.set(self)
        forced = False
        try:
            self._function(**self._spec.parameters)
        except ForcedStop:  # a second Ctrl-C: the orchestrator ends the running steps itself
            forced = True
            raise
        except RunStoppedError:
            self.outcome.stop_requested = True
        except StepNotStartedError:
            pass  # the step that failed is the run's reason
        except StepExecutionError as exc:
            self.outcome.error = str(exc)  # the step's failure is logged where it ran
        except (Exception, SystemExit) as exc:  # sys.exit ends the run, not the process
            if refused(exc):  # the store refuses the run's credential: the run loop stops it
                raise
            what = _what_the_body_did(exc)
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
            _ACTIVE.reset(token)
            for future in [] if forced else list(self._futures):
                with contextlib.suppress(Exception):  # failures are in the outcome already
                    future.exception()
            self._pool.shutdown(wait=not forced, cancel_futures=forced)
            left_out = self._launcher.end_unreached()
        if not self.outcome.stop_requested:
            self.outcome.stop_requested = self._stop_requested()
        if left_out is not None and self.outcome.error is None:
            self.outcome.diverged = self.outcome.diverged or left_out
        return self.outcome

    def _stop_requested(self) -> bool:
        return self._stop.requested()

    def load(self, version: ArtifactVersionRecord) -> Any:
        from wharf.artifacts import load_artifact

        return load_artifact(
            self._services.artifact_store, version.uri, version.data_type, version.materializer
        )

    # ------------------------------------------------------------------ step calls

    def call(self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepOutputs:
        """Run a step now, in this thread, and return its outputs."""
        spec, inputs = self._prepare(step, args, kwargs)
        return self._execute(spec, inputs)

    def submit(self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]) -> StepFuture:
        return self._start(*self._prepare(step, args, kwargs))

    def _start(self, spec: StepSpec, inputs: dict[str, ArtifactVersionRecord]) -> StepFuture:
        with self._lock:
            failures = self._failures
        future = self._pool.submit(self._execute_queued, spec, inputs, failures)
        with self._lock:
            self._futures.append(future)
        return StepFuture(spec.name, future)

    def map(
        self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> MapResultsFuture:
        step_name = _name_of(step)
        bound = step.interface.bind(
            step_name, args, {k: v for k, v in kwargs.items() if k not in ("after",)}
        )
        mapped = {k: as_list(v) for k, v in bound.items() if is_mappable(v)}
        if not mapped:
            raise StepInterfaceError(
                f"step.map of '{step_name}' needs at least one list (or map result) to map "
                "over; wrap values passed whole in unmapped(...)."
            )
        lengths = {k: len(v) for k, v in mapped.items()}
        if len(set(lengths.values())) != 1:
            raise StepInterfaceError(
                f"step.map of '{step_name}' got inputs of different lengths: {lengths}."
            )
        count = next(iter(lengths.values()))
        fixed = {
            k: (v.value if isinstance(v, Unmapped) else v)
            for k, v in bound.items()
            if k not in mapped
        }
        after = kwargs.get("after")
        ids = self._fresh_map_ids(step_name, count)
        arguments = [{**fixed, **{k: v[i] for k, v in mapped.items()}} for i in range(count)]
        for step_id, values in zip(ids, arguments, strict=True):  # refused before any starts
            for name, value in values.items():
                if not is_upstream(value):
                    step.interface.check_parameter(step_id, name, value)
        futures = []
        for step_id, values in zip(ids, arguments, strict=True):
            # bound already: an input named id or after is no call option
            futures.append(self._start(*self._prepare_bound(step, step_id, values, after)))
        return MapResultsFuture(futures)

    # ------------------------------------------------------------------ internals

    def _fresh_id(self, name: str) -> str:
        """``name`` for its first call, then ``name_2``, ``name_3``... (skipping taken ids)."""
        with self._lock:
            while True:
                n = self._ids.get(name, 0) + 1
                self._ids[name] = n
                candidate = name if n == 1 else f"{name}_{n}"
                if candidate not in self._taken:
                    self._taken.add(candidate)
                    return candidate

    def _fresh_map_ids(self, name: str, count: int) -> list[str]:
        """The ids of one map's ``count`` steps: ``name_0``...; for a later map of the same
        step, the first free prefix among ``name_2``, ``name_3``... (``name_2_0``...)."""
        with self._lock:
            prefix, k = name, 1
            while any(f"{prefix}_{i}" in self._taken for i in range(count)):
                k += 1
                prefix = f"{name}_{k}"
            ids = [f"{prefix}_{i}" for i in range(count)]
            self._taken.update(ids)
            return ids

    def _take_id(self, invocation_id: str, step: StepLike) -> None:
        """Reserve an id the caller chose; one already given out is an error, at the call
        (two steps under one id would leave only one of them in the run)."""
        with self._lock:
            if invocation_id in self._taken:
                raise StepInterfaceError(
                    f"Step id '{invocation_id}' (step '{_name_of(step)}') is already used in "
                    "this run; give each call of a dynamic pipeline a unique id=."
                )
            self._taken.add(invocation_id)

    def _prepare(
        self, step: StepLike, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[StepSpec, dict[str, ArtifactVersionRecord]]:
        """A step call's spec: its ``id=`` (or a fresh id) and ``after=`` are the call's own,
        the other arguments the step's."""
        kwargs = dict(kwargs)
        invocation_id = kwargs.pop("id", None)
        if invocation_id is None:
            invocation_id = self._fresh_id(_name_of(step))
        else:
            self._take_id(invocation_id, step)
        after = kwargs.pop("after", None)
        bound = step.interface.bind(invocation_id, args, kwargs)
        return self._prepare_bound(step, invocation_id, bound, after)

    def _prepare_bound(
        self, step: StepLike, invocation_id: str, bound: dict[str, Any], after: Any
    ) -> tuple[StepSpec, dict[str, ArtifactVersionRecord]]:
        """The spec of a step call whose id is given out and whose arguments are bound to the
        step's inputs (each one of them)."""
        inputs: dict[str, InputSpec] = {}
        versions: dict[str, ArtifactVersionRecord] = {}
        parameters: dict[str, Any] = {}
        upstream: list[str] = []
        for name, value in bound.items():
            artifact = artifact_of(value, invocation_id, name)
            if artifact is not None:
                self._check_produced_here(invocation_id, name, artifact)
                check_artifact(step, invocation_id, name, artifact)
                inputs[name] = InputSpec(step=artifact.step_name, output=artifact.output_name)
                versions[name] = artifact.version
                upstream.append(artifact.step_name)
                continue
            try:
                json.dumps(value)
            except (TypeError, ValueError) as exc:
                raise StepInterfaceError(
                    f"Parameter '{name}' of step '{invocation_id}' is a {type(value).__name__}, "
                    "which is not JSON-serialisable; pass JSON values as parameters and other "
                    "objects as outputs of a step."
                ) from exc
            step.interface.check_parameter(invocation_id, name, value)
            parameters[name] = value
        for item in as_sequence(after):
            if isinstance(item, StepFuture | MapResultsFuture):
                item.wait()
                upstream.extend(
                    [item.invocation_id]
                    if isinstance(item, StepFuture)
                    else [f.invocation_id for f in item]
                )
            elif isinstance(item, OutputArtifact):
                upstream.append(item.step_name)
        spec = self._spec_factory(
            step, invocation_id, inputs, parameters, list(dict.fromkeys(upstream))
        )
        try:  # in the function's own thread: the calls' order is the function's
            self._launcher.called(spec, versions)
        except ReplayDivergedError as exc:
            with self._lock:
                self.outcome.diverged = self.outcome.diverged or str(exc)
            raise
        return spec, versions

    def _check_produced_here(self, step_id: str, input_name: str, artifact: OutputArtifact) -> None:
        """Refuse an output of another run (a handle kept from it): its producer is no step of
        this run, so the input would name (and depend on) whichever step here has its name."""
        with self._lock:
            if artifact.version.id in self._produced:
                return
        raise StepInterfaceError(
            f"Input '{input_name}' of step '{step_id}' got output '{artifact.output_name}' of "
            f"step '{artifact.step_name}' of another run; an input takes an output of this "
            "run's steps: pass its value (.load()) instead."
        )

    def _execute_queued(
        self, spec: StepSpec, inputs: dict[str, ArtifactVersionRecord], failures: int
    ) -> StepOutputs:
        """A submitted step, in a thread of the pool: not started if a step failed while it
        waited (``failures``: how many had failed when it was submitted)."""
        with self._lock:
            failed = self._failed_step if self._failures != failures else None
        if failed is not None:
            mode = self._spec.config.execution_mode.value
            raise StepNotStartedError(
                f"Step '{spec.name}' was not started: step '{failed}' failed while it waited "
                f"({mode}; execution_mode='{ExecutionMode.CONTINUE_ON_FAILURE.value}' starts it)."
            )
        return self._execute(spec, inputs)

    def _execute(self, spec: StepSpec, inputs: dict[str, ArtifactVersionRecord]) -> StepOutputs:
        # The step's own code runs outside the run: a step it calls is a plain function call,
        # in this thread (a called step) as in a pool thread (a submitted one).
        token = _ACTIVE.set(None)
        try:
            outcome = self._launcher.launch(spec, inputs, InterruptibleRegion())
        except ReplayDivergedError as exc:
            with self._lock:
                self.outcome.diverged = self.outcome.diverged or str(exc)
            raise
        except RunStoppingError:
            raise RunStoppedError(
                f"Run '{self._run.name}' is stopping; step '{spec.name}' was not started."
            ) from None
        finally:
            _ACTIVE.reset(token)
        with self._lock:
            self.outcome.steps[spec.name] = outcome
            self._produced.update(v.id for v in outcome.outputs.values())
            halts = self._spec.config.execution_mode is not ExecutionMode.CONTINUE_ON_FAILURE
            if halts and outcome.status is ExecutionStatus.FAILED:
                self._failed_step = spec.name
                self._failures += 1
        if outcome.status in (ExecutionStatus.STOPPED, ExecutionStatus.CANCELLED):
            raise RunStoppedError(f"Step '{spec.name}' was {outcome.status.value}.")
        if not outcome.succeeded:
            raise StepExecutionError(f"Step '{spec.name}' failed: {outcome.reason}")
        handles = tuple(
            OutputArtifact(spec.name, name, outcome.outputs[name], self.load)
            for name in spec.outputs
        )
        if not handles:
            return None
        return handles[0] if len(handles) == 1 else handles


def _name_of(step: StepLike) -> str:
    return str(getattr(step, "name", getattr(step.func, "__name__", "step")))


__all__ = ["DynamicOutcome", "DynamicRunner", "active_dynamic_run"]
