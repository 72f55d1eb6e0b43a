"""Launching one step of a run: decide caching right before it runs, then run its attempts.

Owns :class:`StepLauncher` (one per run: :meth:`StepLauncher.launch` per step,
:meth:`StepLauncher.end_unreached` once a replayed function ended). Invariants: a retry is a
new step run and an interrupted step is never retried; the cache lookup and the creation of a
step's first attempt are one decision, made once the step has its parallelism slot
(:mod:`wharf.execution.cache_decisions`); an attempt in flight that is resumed is adopted by
its backend, never run in a second process; a replay that diverges fails (``call_order``,
checked by :mod:`wharf.execution.resumed_steps`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from datetime import datetime
from typing import Any
from uuid import UUID

from wharf.config.spec import StepSpec, wants_resources
from wharf.core.enums import ExecutionStatus, StepRuntime
from wharf.core.errors import (
    RunStoppingError,
    WharfError,
)
from wharf.core.exact_values import readable
from wharf.execution import step_writes
from wharf.execution.allocation_waits import AllocationWaits, Stops, wait_to_retry
from wharf.execution.attempts import AttemptExecutor, PlacesAttempts
from wharf.execution.cache_decisions import CacheDecisions, Inputs
from wharf.execution.caching import cache_enabled, compute_step_cache_key, expiry_for
from wharf.execution.interrupt import InterruptibleRegion, StepInterrupted
from wharf.execution.launch_errors import end_after_error
from wharf.execution.outages import refused
from wharf.execution.resources.holders_first import HoldersFirst
from wharf.execution.resources.run_requests import RunRequests
from wharf.execution.resumed_steps import ResumedSteps, end_lost
from wharf.execution.run_lifecycle import IN_FLIGHT_STATUSES, Resumption
from wharf.execution.runtime import RuntimePolicy
from wharf.execution.services import RunServices
from wharf.execution.step_outcome import StepOutcome
from wharf.store.models import (
    ArtifactVersionRecord,
    StepRunCreate,
    StepRunRecord,
)

__all__ = ["StepLauncher", "StepOutcome"]  # StepOutcome: for the runners

logger = logging.getLogger(__name__)


class StepLauncher:
    """Launches the steps of one run, each with its attempts.

    Order of events for a step (each arrow is a store write)::

        compute cache key -> cached run found? -> step run CACHED (outputs reused)    [done]
                          -> step run RUNNING  -> attempt (inline or isolated) ends:
                               completed / failed / stopped / cancelled               [done]
                               retrying -> wait (delay x backoff) -> attempt+1        [again]

    Every step-run creation can be refused with ``RunStoppingError`` when the run is stopping:
    for a step's first attempt it propagates (the step never started; the runner stops
    starting steps), for a retry the step ends stopped with its last attempt (retrying ->
    stopped). On a cache hit the decision (``decisions``) records the cached step run and
    answers the found step's output versions, so a hit needs no other request, even in a
    process that never saw the found step. Each moment (started, cached, waiting for
    resources, retrying, ended) is told to ``services.progress`` from what the launcher holds
    already: no store call of its own.

    A step that asks for resources is queued when ``services.resources`` (the step-resources
    port, :mod:`wharf.execution.resources`) is there: its request is made through that port
    before its queued step run is written (:mod:`wharf.execution.step_writes`), the launcher
    waits for the allocation (:mod:`wharf.execution.allocation_waits`) and tells the port when
    the step ended. A wait that ends without an allocation ends the step failed, except that a
    graceful stop of the run (``stops``) cuts it short and ends the step stopped.
    """

    def __init__(
        self,
        services: RunServices,
        run_id: UUID,
        pipeline_name: str,
        inline: AttemptExecutor,
        isolated: AttemptExecutor | None = None,
        record_specs: bool = False,
        runtimes: RuntimePolicy | None = None,
        requests: RunRequests | None = None,
        stops: Stops | None = None,
        resumed: Resumption | None = None,
        check_replay: bool = False,
        stop_recorded: Callable[[StepRunRecord], object] | None = None,
    ) -> None:
        """``requests``: told of each step run created queued and of its moving on, so the
        run's end can settle what was left (:mod:`wharf.execution.resources.run_requests`);
        ``stops``: where waits for resources are registered while they last; ``resumed``:
        the steps an earlier process of the run started; ``check_replay``: its steps are
        called again by a dynamic pipeline's function; ``stop_recorded``: ends an earlier
        attempt that still runs (through the kind of backend that started it) when it is not
        gone on from (that call differs, or the function never calls it again:
        :meth:`end_unreached`); such an attempt is ended failed, stopped if the run is
        stopping."""
        self._services = services
        self._stops = stops
        self._requests = requests or RunRequests()
        self._allocations = AllocationWaits(services, run_id, self._requests, stops)
        self._run_id = run_id
        self._resumed = ResumedSteps(
            services, run_id, resumed, check_replay, stop_recorded, self._ended
        )
        self._calls = self._resumed.calls
        self._pipeline_name = pipeline_name
        self._inline = inline
        self._isolated = isolated
        self._record_specs = record_specs
        self._runtimes = runtimes or RuntimePolicy(has_isolation=isolated is not None)
        self._warned: set[str] = set()
        self.decisions = CacheDecisions(
            services,
            run_id,
            record_specs=record_specs,
            prepare=self._prepare_ahead,
            wanted=self._decided_ahead,
        )

    def runtime_for(self, spec: StepSpec) -> StepRuntime:
        choice = self._runtimes.choose(spec.name, spec.config)
        if choice.warning and spec.name not in self._warned:
            self._warned.add(spec.name)
            logger.warning(choice.warning)
        return choice.runtime

    def executor_for(self, spec: StepSpec) -> AttemptExecutor:
        if self.runtime_for(spec) is StepRuntime.ISOLATED and self._isolated is not None:
            return self._isolated
        return self._inline

    def check_step(self, spec: StepSpec) -> None:
        """Raise if the step's settings cannot be honoured where it would run (a step
        operator the stack lacks, reclaim settings its runtime cannot honour)."""
        self._runtimes.check(spec.name, spec.config)

    def called(self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord] | None) -> None:
        """A dynamic pipeline's function made the call ``spec``, launched later (its position
        is recorded with step runs: ``call_order``). A replay raises ReplayDivergedError here,
        before a later call starts a step, if the earlier process called otherwise; ``inputs``
        None: some are not known yet (of steps still running), their versions are compared
        when the step is launched."""
        self._resumed.called(spec, inputs)

    def launch(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
    ) -> StepOutcome:
        earlier = self._resumed.take(spec.name, inputs)
        if earlier is not None:
            return self._resume(spec, inputs, region, earlier)
        holders = self._holders_for(spec)
        # A step that will queue for resources has nothing to run yet: its preparation and
        # creation (step run, request) give way to steps that hold an allocation, and only a
        # few are prepared at once, so a burst of new steps never crowds out running ones.
        with holders.creating() if holders is not None else nullcontext():
            try:
                cache_key = self._checked_cache_key(spec, inputs)
            except WharfError as exc:
                return self._fail_before_start(spec, inputs, str(exc))
            first = self._create_attempt(spec, inputs, cache_key, 1, None)
        written = first if isinstance(first, StepRunRecord) else first.step_run
        self._calls.written(written.calls if written is not None else None)
        if isinstance(first, StepOutcome):
            return first
        return self._run_attempts(spec, inputs, cache_key, region, first)

    def end_unreached(self) -> str | None:
        """Once a replayed function ended: end the earlier step runs it did not call again
        that are unfinished; why the run fails if it left any out (None: it did not)."""
        return self._resumed.end_unreached()

    def _resume(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        region: InterruptibleRegion,
        record: StepRunRecord,
    ) -> StepOutcome:
        """Go on with a step whose latest step run ``record`` an earlier process of the run
        created, instead of deciding caching and creating a first attempt: an attempt in
        flight that the backend can take over is submitted again (the backend adopts it), one
        in flight that lost its process ends failed (stopped if the run is stopping), a queued
        one waits for its allocation again, a retrying one gets its next attempt."""
        cache_key = record.cache_key or ""
        status = record.status
        if status in IN_FLIGHT_STATUSES:
            if not self._resumed.adoptable(record) or self.executor_for(spec) is self._inline:
                lost = "process was lost with the run's earlier orchestrating process"
                outcome = end_lost(  # no beat was missed: not "Heartbeat lost"
                    self._services,
                    self._run_id,
                    spec.name,
                    record,
                    f"The step's {lost}",
                    f"Stopped: its {lost}",
                )
                return self._ended(outcome, record.start_time)
            return self._run_attempts(spec, inputs, cache_key, region, record, adopted=True)
        if status is ExecutionStatus.QUEUED:
            self._requests.created(record)
            return self._run_attempts(spec, inputs, cache_key, region, record)
        if status is ExecutionStatus.RETRYING:
            created = self._create_attempt(spec, inputs, cache_key, record.attempt + 1, record)
            if isinstance(created, StepOutcome):
                return self._ended(created, record.start_time)
            return self._run_attempts(spec, inputs, cache_key, region, created)
        outputs = {}
        if status.is_successful:
            outputs = self._services.versions.outputs_of(self._services.store, record)
        return StepOutcome(spec.name, status, outputs, record, reason=record.status_reason)

    def _queued(self, spec: StepSpec) -> bool:
        """The step waits for a resource allocation before it runs."""
        return wants_resources(spec) and self._services.resources is not None

    def _holders_for(self, spec: StepSpec) -> HoldersFirst | None:
        resources = self._services.resources
        return resources.holders if resources is not None and wants_resources(spec) else None

    def _base_create(
        self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord]
    ) -> dict[str, Any]:
        return {
            "run_id": self._run_id,
            "name": spec.name,
            "code_hash": spec.code_hash,
            "source_code": spec.source_code,
            "docstring": spec.docstring,
            "parameters": readable(spec.parameters),
            "inputs": {name: v.id for name, v in inputs.items()},
            "spec": spec if self._record_specs else None,
            "calls": self._calls.for_create(spec.name),
        }

    def _fail_before_start(
        self, spec: StepSpec, inputs: Mapping[str, ArtifactVersionRecord], reason: str
    ) -> StepOutcome:
        failed = {"status": ExecutionStatus.FAILED, "status_reason": reason}
        # Named before the first try and retried through a store outage (step_writes): a try
        # whose answer was lost is answered as written, never written twice.
        create = StepRunCreate.model_validate({**self._base_create(spec, inputs), **failed})
        record = step_writes.create(self._services, create)
        self._calls.written(record.calls)
        outcome = StepOutcome(spec.name, ExecutionStatus.FAILED, step_run=record, reason=reason)
        return self._ended(outcome, None)

    def _ended(self, outcome: StepOutcome, started: datetime | None) -> StepOutcome:
        """``outcome``, once told to the progress reporter (from ``started``, if known)."""
        record = outcome.step_run
        if outcome.status.is_finished:
            ended = record.end_time if record is not None else None
            progress = self._services.progress
            progress.step_ended(
                self._run_id, outcome.name, outcome.status, outcome.reason, started, ended
            )
        return outcome

    def _decided_ahead(self, spec: StepSpec) -> bool:
        """Whether the step may be looked at ahead (:mod:`wharf.execution.cache_decisions`):
        launched first here (not resumed), cacheable, and asking for no resources."""
        return (
            not self._resumed.pending(spec.name) and cache_enabled(spec) and not self._queued(spec)
        )

    def _prepare_ahead(self, spec: StepSpec, inputs: Inputs) -> StepRunCreate | None:
        """The first attempt's step run of a step looked at ahead (None if its settings or
        cache key fail: it fails once it gets its slot)."""
        try:
            return self._attempt_create(spec, inputs, self._checked_cache_key(spec, inputs), 1)
        except WharfError:
            return None

    def _checked_cache_key(self, spec: StepSpec, inputs: Inputs) -> str:
        """The step's cache key, once its settings are checked (raises ``WharfError``)."""
        self.check_step(spec)
        materializers = {
            n: o.materializer or f"auto:{o.data_type}" for n, o in spec.outputs.items()
        }
        return compute_step_cache_key(self._services, spec, inputs, materializers)

    def _attempt_create(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        cache_key: str,
        attempt: int,
    ) -> StepRunCreate:
        services = self._services
        queued = self._queued(spec)
        logs_uri = services.artifact_store.new_uri(self._pipeline_name, str(self._run_id))
        return StepRunCreate.model_validate(
            {
                **self._base_create(spec, inputs),
                "spec": spec if (self._record_specs or queued) else None,
                "status": ExecutionStatus.QUEUED if queued else ExecutionStatus.RUNNING,
                "attempt": attempt,
                "cache_key": cache_key,
                "cache_expires_at": expiry_for(services, spec),
                "logs_uri": logs_uri + ".log",
                "runtime": self.runtime_for(spec),
            }
        )

    def _create_attempt(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        cache_key: str,
        attempt: int,
        previous: StepRunRecord | None,
    ) -> StepRunRecord | StepOutcome:
        """The step run of ``attempt`` as created; or, for a cache hit or a retry that may
        not start, the step's outcome. ``previous``: the last attempt's final record."""
        create = self._attempt_create(spec, inputs, cache_key, attempt)
        if previous is not None:  # a retry: the calls its first attempt recorded
            create = create.model_copy(update={"calls": previous.calls})
        if attempt == 1 and cache_enabled(spec):
            # The lookup records a hit itself (one call) unless the cached step run would get
            # a different spec: a queued step sends its spec for its resource request only,
            # while a cached step run holds one only where every step run does.
            record_hit = self._record_specs or not self._queued(spec)
            found = self.decisions.decide(spec, create, record_hit=record_hit)
            if not found.created:
                return self.decisions.publish(spec, create, found)
            self._requests.created(found.step)
            return found.step
        try:
            created = step_writes.create(self._services, create)
        except RunStoppingError as exc:
            if previous is None:
                raise
            # A retry that may not start: its last attempt leaves retrying, ended stopped.
            failed = f"attempt {previous.attempt} failed: {previous.status_reason or exc}"
            reason = f"Stopped on request: its retry never started ({failed})."
            previous = step_writes.end(self._services, previous.id, ExecutionStatus.STOPPED, reason)
            return StepOutcome(
                spec.name, previous.status, step_run=previous, reason=previous.status_reason
            )
        self._requests.created(created)
        return created

    def _run_attempts(
        self,
        spec: StepSpec,
        inputs: Mapping[str, ArtifactVersionRecord],
        cache_key: str,
        region: InterruptibleRegion,
        record: StepRunRecord,
        *,
        adopted: bool = False,
    ) -> StepOutcome:
        """Run the attempts of a step whose first step run is ``record``; ``adopted``: that
        attempt is in flight already (started by an earlier process of the run, allocation
        included): the backend takes it over. An unexpected error before the step ends (a bug,
        a failing collaborator: backend selection, a backend, the progress reporter) ends the
        step failed, never leaving its step run in flight (``launch_errors``); a refusal of the
        run's credential propagates (the store accepts no write: the run loop stops the run)."""
        services = self._services
        resources = services.resources if self._queued(spec) else None
        holders = self._holders_for(spec)
        progress = services.progress
        retry = spec.config.retry
        max_attempts = 1 + (retry.max_retries if retry is not None else 0)
        started: datetime | None = None
        try:
            executor = self.executor_for(spec)
            runtime = self.runtime_for(spec)
            while True:
                allocation = None
                try:
                    if resources is not None and not adopted:
                        try:
                            record, allocation = self._allocations.wait(spec, record, holders)
                        except (WharfError, StepInterrupted) as exc:  # no allocation, or stopped
                            return self._ended(
                                self._allocations.not_allocated(spec, record, exc), started
                            )
                    if holders is not None and executor is not self._inline:
                        holders.end()  # its own process does the rest of its bookkeeping
                    # An inline attempt leaves the holder's stretch while its user code runs
                    # and is back in it from the code's return to the release (step_runner,
                    # attempts).
                    started = started or record.start_time
                    where = (
                        executor.placement(spec, record)
                        if isinstance(executor, PlacesAttempts)
                        else None
                    )
                    progress.step_started(
                        self._run_id, spec.name, runtime, record.attempt, max_attempts, where
                    )
                    result = executor(spec, record, inputs, region, allocation)
                    adopted = False
                finally:
                    if holders is not None:
                        holders.end()
                if resources is not None:
                    # Its request was released with its final status (by its own process if
                    # it had one): wake this process's waiters now, not at their next poll.
                    resources.step_ended(elsewhere=runtime is StepRuntime.ISOLATED)
                final = result.record
                if final.status is not ExecutionStatus.RETRYING or region.interrupted:
                    outcome = StepOutcome(
                        spec.name, final.status, result.outputs, final, reason=final.status_reason
                    )
                    return self._ended(outcome, started)
                attempt = final.attempt + 1
                delay = retry.delay_before(attempt) if retry is not None else 0.0
                progress.step_retrying(
                    self._run_id, spec.name, final.attempt, max_attempts, final.status_reason, delay
                )
                if retry is not None:
                    wait_to_retry(self._stops, services.wait, delay)
                with holders.creating() if holders is not None else nullcontext():
                    created = self._create_attempt(spec, inputs, cache_key, attempt, final)
                if isinstance(created, StepOutcome):  # its retry never started: no duration
                    return self._ended(created, None)  # (its times are the last attempt's)
                record = created
        except Exception as exc:  # not the step's own error: it never stays in flight
            if refused(exc):  # nothing can be written: the run loop stops the run
                raise
            outcome = end_after_error(services, spec.name, record, exc)
        try:
            return self._ended(outcome, started or record.start_time)
        except Exception:  # the reporter may be what failed: the error is logged already
            return outcome
